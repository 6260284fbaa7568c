"""ResNet v1.5 architectures: the MLPerf reference ResNet-50 and a small one for the mini scale.

Architecture only: no data, no optimizer, no training loop here.
"""

from __future__ import annotations

import torch
from torch import nn
from torchvision.models import resnet50
from torchvision.models.resnet import Bottleneck


def reference_resnet50(num_classes: int = 1000) -> nn.Module:
    """ResNet-50 v1.5 (stride on the 3x3 convolution), 25.56 M parameters for 1000 classes, initialized as
    the MLPerf v2.0 reference initializes it.

    The reference (mlcommons/training ``image_classification/tensorflow2/resnet_model.py``) initializes
    every convolution with Keras' ``he_normal`` (a normal of standard deviation sqrt(2 / fan_in), truncated
    at two standard deviations and rescaled so that the truncated distribution keeps that deviation), the
    classifier's weights from N(0, 0.01) and its bias at 0, and every batch norm at gamma 1, beta 0: no
    zero-initialized residual branch. torchvision's ResNet-50 has the v1.5 architecture; its own
    initialization (fan-out He normal, uniform classifier) is replaced by the reference's.
    """
    model = resnet50(weights=None, num_classes=num_classes, zero_init_residual=False)
    reference_init_(model)
    return model


# Keras' truncated-normal VarianceScaling divides the deviation by the deviation of a standard normal
# truncated to [-2, 2], so that the truncated samples have the intended deviation.
_TRUNCATED_STD = 0.87962566103423978


@torch.no_grad()
def reference_init_(model: nn.Module) -> nn.Module:
    """The reference's initialization, in place: truncated-normal He (fan-in) convolutions, N(0, 0.01)
    classifier with a zero bias, batch norms at gamma 1 and beta 0."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            fan_in = m.in_channels // m.groups * m.kernel_size[0] * m.kernel_size[1]
            std = (2.0 / fan_in) ** 0.5 / _TRUNCATED_STD
            nn.init.trunc_normal_(m.weight, mean=0.0, std=std, a=-2 * std, b=2 * std)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.01)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
    return model


class MiniResNet(nn.Module):
    """A small ResNet v1.5 for 28x28 grey images: the same bottleneck blocks as ResNet-50.

    Like ResNet-50's stem (convolution, BN, ReLU, max-pool), the stem ends in a 2x2 max-pool (28 -> 14);
    three stages of bottleneck blocks follow, the last two halving the resolution on their 3x3
    convolution (v1.5). The default widths were chosen by measured time-to-train on a 2-core CPU.
    """

    def __init__(
        self,
        *,
        num_classes: int = 10,
        in_channels: int = 1,
        stem_width: int = 16,
        widths: tuple[int, ...] = (8, 16, 32),
        blocks: tuple[int, ...] = (1, 1, 1),
    ) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, stem_width, 3, stride=1, padding=1, bias=False),
            nn.BatchNorm2d(stem_width),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
        )
        stages: list[nn.Module] = []
        inplanes = stem_width
        for i, (planes, n) in enumerate(zip(widths, blocks, strict=True)):
            stride = 1 if i == 0 else 2
            layers: list[nn.Module] = []
            for j in range(n):
                s = stride if j == 0 else 1
                downsample = None
                if s != 1 or inplanes != planes * Bottleneck.expansion:
                    downsample = nn.Sequential(
                        nn.Conv2d(inplanes, planes * Bottleneck.expansion, 1, stride=s, bias=False),
                        nn.BatchNorm2d(planes * Bottleneck.expansion),
                    )
                layers.append(Bottleneck(inplanes, planes, stride=s, downsample=downsample))
                inplanes = planes * Bottleneck.expansion
            stages.append(nn.Sequential(*layers))
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inplanes, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, Bottleneck):
                nn.init.zeros_(m.bn3.weight)  # zero-init residual: the mini model's choice (the reference has none)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(x))
        return self.fc(torch.flatten(self.pool(x), 1))
