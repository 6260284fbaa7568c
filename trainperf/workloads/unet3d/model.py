"""The 3D U-Net of MLPerf Training v2.0 (mlcommons/training ``image_segmentation/pytorch/model``), architecture only.

An input block of two 3x3x3 convolutions, then one down-sampling block per step of ``filters`` and a
bottleneck (each a stride-2 convolution and a stride-1 convolution), then as many up-sampling blocks (a
2x2x2 transposed convolution with bias, concatenation with the skip connection, two convolutions) and a
1x1x1 output convolution with bias. Every 3x3x3 convolution has no bias and is followed by an affine
instance norm and a ReLU. The reference's filters are (32, 64, 128, 256, 320) for 1 input channel and 3
classes: 31,190,243 parameters, as the reference module counts (``reference_parameter_count`` computes it from the layer
shapes). Weights keep PyTorch's default initialization, as the reference's (``weights_init_scale`` 1.0).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

REFERENCE_FILTERS = (32, 64, 128, 256, 320)


class ConvBlock(nn.Sequential):
    """Convolution (no bias), affine instance norm, ReLU."""

    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__(
            nn.Conv3d(cin, cout, kernel_size=3, stride=stride, padding=1, bias=False),
            nn.InstanceNorm3d(cout, affine=True),
            nn.ReLU(inplace=True),
        )


class DoubleConv(nn.Module):
    """Two convolution blocks; the first one strided in a down-sampling block."""

    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = ConvBlock(cin, cout, stride)
        self.conv2 = ConvBlock(cout, cout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2(self.conv1(x))


class UpBlock(nn.Module):
    """Transposed convolution (2x2x2, stride 2, with bias), concatenation with the skip, two convolution blocks."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        # one-layer Sequentials keep the reference's parameter names (``upsample_conv.0.weight``), so its
        # checkpoints load as they are
        self.upsample_conv = nn.Sequential(nn.ConvTranspose3d(cin, cout, kernel_size=2, stride=2, bias=True))
        self.conv1 = ConvBlock(2 * cout, cout)
        self.conv2 = ConvBlock(cout, cout)

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        x = torch.cat((self.upsample_conv(x), skip), dim=1)
        return self.conv2(self.conv1(x))


class UNet3D(nn.Module):
    """The reference 3D U-Net for any list of filters (the mini scale uses fewer and narrower ones)."""

    def __init__(self, in_channels: int = 1, n_class: int = 3, filters: Sequence[int] = REFERENCE_FILTERS) -> None:
        super().__init__()
        filters = tuple(filters)
        self.filters = filters
        self.input_block = DoubleConv(in_channels, filters[0])
        self.downsample = nn.ModuleList(
            DoubleConv(i, o, stride=2) for i, o in zip(filters[:-1], filters[1:], strict=False)
        )
        self.bottleneck = DoubleConv(filters[-1], filters[-1], stride=2)
        ups = [UpBlock(filters[-1], filters[-1])]
        ups += [UpBlock(i, o) for i, o in zip(reversed(filters[1:]), reversed(filters[:-1]), strict=False)]
        self.upsample = nn.ModuleList(ups)
        self.output = nn.Module()
        self.output.conv = nn.Conv3d(filters[0], n_class, kernel_size=1, bias=True)  # layers.py OutputLayer.conv

    @property
    def divisor(self) -> int:
        """Spatial sizes must be multiples of this (one halving per down-sampling block and the bottleneck)."""
        return 2 ** len(self.filters)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.input_block(x)
        skips = [x]
        for down in self.downsample:
            x = down(x)
            skips.append(x)
        x = self.bottleneck(x)
        for up, skip in zip(self.upsample, reversed(skips), strict=False):
            x = up(x, skip)
        return self.output.conv(x)


def reference_parameter_count(
    filters: Sequence[int] = REFERENCE_FILTERS, in_channels: int = 1, n_class: int = 3
) -> int:
    """Parameters of the 3D U-Net computed from its layer shapes (a check independent of the modules)."""

    def conv(cin: int, cout: int) -> int:  # 3x3x3 without bias, then instance norm's weight and bias
        return 27 * cin * cout + 2 * cout

    f = list(filters)
    total = conv(in_channels, f[0]) + conv(f[0], f[0])
    for i, o in zip([*f[:-1], f[-1]], [*f[1:], f[-1]], strict=False):  # down-sampling blocks, then the bottleneck
        total += conv(i, o) + conv(o, o)
    for i, o in zip([f[-1], *reversed(f[1:])], [f[-1], *reversed(f[:-1])], strict=False):  # up-sampling blocks
        total += 8 * i * o + o + conv(2 * o, o) + conv(o, o)
    return total + f[0] * n_class + n_class


def reference_tensor_names(model: UNet3D) -> list[str]:
    """The MLPerf v2.0 names of the model's tensors (``closed_unet3d.yaml``), one per layer, in model order.

    ``input_block.conv1.0.weight`` -> ``input_block_0_conv``; ``downsample.2.conv2.1.bias`` ->
    ``down2_block_1_instancenorm``; ``bottleneck`` -> ``down<N>`` after the N down-sampling blocks;
    ``upsample.0.upsample_conv.0.weight`` -> ``up0_deconv``; ``output.conv.weight`` -> ``output_conv``.
    """
    names: list[str] = []
    for name, _ in model.named_parameters():
        parts = name.split(".")
        if parts[0] == "output":
            out = "output_conv"
        elif parts[0] == "upsample" and parts[2] == "upsample_conv":
            out = f"up{parts[1]}_deconv"
        else:
            if parts[0] == "input_block":
                prefix, rest = "input", parts[1:]
            elif parts[0] == "bottleneck":
                prefix, rest = f"down{len(model.downsample)}", parts[1:]
            else:
                prefix, rest = f"{'down' if parts[0] == 'downsample' else 'up'}{parts[1]}", parts[2:]
            block = int(rest[0].removeprefix("conv")) - 1
            layer = "conv" if rest[1] == "0" else "instancenorm"
            out = f"{prefix}_block_{block}_{layer}"
        if out not in names:
            names.append(out)
    return names
