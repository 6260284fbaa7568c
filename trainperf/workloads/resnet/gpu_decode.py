"""resnet's reference training input decoded and augmented on the device (used when the device is a GPU).

The DataLoader's workers read each JPEG's bytes and its header (its size, not its pixels), and draw the
reference's crop window (:func:`data.distorted_box_window`) and flip from torch's default generator, the same
draws in the same order as :class:`data.ReferenceTrainTransform` makes; a batch is the encoded files, the
windows, the flips and the labels (:class:`EncodedBatch`). On the device, :func:`decode_and_augment` decodes
the batch in one call (``torchvision.io.decode_jpeg(device="cuda")``, nvJPEG) and crops, flips and resizes each
image with the reference's rule (:func:`data.tf1_resize_bilinear`'s sampling and arithmetic, in float32),
reading only the four neighbours of each output pixel, then subtracts the channel means.

The same code runs with ``device="cpu"`` (its CPU twin, libjpeg-turbo's decoder): there it gives
:class:`data.ReferenceTrainTransform`'s numbers bit for bit (tests/unit/test_resnet_fast_path.py). On a GPU the
crops, flips and resize are the same; nvJPEG's inverse DCT and upsampling may differ from libjpeg-turbo's by
a grey level here and there, which the GPU check measures (benchmarks/gpu_decode_check.py).

A file that is not a three-channel JPEG (greyscale, CMYK, a PNG named .JPEG: ImageNet holds a few) is decoded
in the worker by PIL, as ImageFolder reads it, and travels as pixels.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from trainperf.errors import DataError
from trainperf.workloads.resnet import data


@dataclass
class EncodedBatch:
    """A batch of training images before decoding: for each image its JPEG bytes (uint8, 1-D) or, for a file
    that is not a three-channel JPEG, its decoded (H, W, 3) uint8 pixels; its crop window (top, left,
    height, width) and whether it is flipped."""

    images: list[torch.Tensor]
    windows: list[tuple[int, int, int, int]]
    flips: list[bool]
    paths: list[str]

    def __len__(self) -> int:
        return len(self.images)


def _is_rgb_jpeg(raw: bytes) -> tuple[int, int] | None:
    """(height, width) of a baseline or progressive three-component JPEG, from its header; None otherwise."""
    if raw[:2] != b"\xff\xd8":
        return None
    i = 2
    while i + 9 < len(raw):
        if raw[i] != 0xFF:
            return None
        marker = raw[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # markers without a length
            i += 2
            continue
        length = int.from_bytes(raw[i + 2 : i + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a start of frame
            height = int.from_bytes(raw[i + 5 : i + 7], "big")
            width = int.from_bytes(raw[i + 7 : i + 9], "big")
            components = raw[i + 9]
            if components != 3 or not height or not width:
                return None
            return height, width
        i += 2 + length
    return None


class EncodedTrainSample:
    """The worker's share of the device path, as an ImageFolder loader and transform in one: the file's bytes
    (or PIL's pixels), the crop window and the flip."""

    def __call__(self, path: str | Path) -> tuple[torch.Tensor, tuple[int, int, int, int], bool, str]:
        raw = Path(path).read_bytes()
        size = _is_rgb_jpeg(raw)
        if size is None:
            from PIL import Image

            with Image.open(path) as img:
                pixels = torch.from_numpy(np.array(img.convert("RGB")))
            size = (pixels.shape[0], pixels.shape[1])
            image = pixels
        else:
            image = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
        window = data.distorted_box_window(*size)
        flip = float(torch.rand(())) < 0.5
        return image, window, flip, str(path)


def collate(samples: list) -> tuple[EncodedBatch, torch.Tensor]:
    """ImageFolder's (sample, label) pairs -> (EncodedBatch, labels)."""
    images = [s[0][0] for s in samples]
    windows = [s[0][1] for s in samples]
    flips = [s[0][2] for s in samples]
    paths = [s[0][3] for s in samples]
    return EncodedBatch(images, windows, flips, paths), torch.tensor([s[1] for s in samples])


def imagenet_train_set(root: Path):
    """ImageNet's training folder read the device path's way (the same files, classes and order as
    :func:`data.imagenet_datasets`' training set)."""
    from torchvision import datasets

    return datasets.ImageFolder(Path(root) / "train", loader=EncodedTrainSample())


def _axis(n_in: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    lower, upper, weight = data._tf1_axis(n_in)
    return (
        torch.from_numpy(lower).to(device, non_blocking=True),
        torch.from_numpy(upper).to(device, non_blocking=True),
        torch.from_numpy(weight).to(device, non_blocking=True),
    )


def crop_flip_resize(
    pixels: torch.Tensor, window: tuple[int, int, int, int], flip: bool, mean: torch.Tensor
) -> torch.Tensor:
    """:func:`data.crop_flip_resize` in torch on a (3, H, W) uint8 image on any device: (3, 224, 224) float32."""
    top, left, h, w = window
    device = pixels.device
    y0, y1, wy = _axis(h, device)
    x0, x1, wx = _axis(w, device)
    if flip:
        x0, x1 = (w - 1) - x0, (w - 1) - x1
    n = data.OUTPUT_SIZE
    rows = pixels.index_select(1, torch.cat([y0, y1]) + top)  # (3, 2n, W): the upper and the lower rows
    near = rows.index_select(2, x0 + left).float()
    horizontal = rows.index_select(2, x1 + left).float()
    horizontal.sub_(near).mul_(wx).add_(near)  # along each row: near + (far - near) * wx
    upper, lower = horizontal[:, :n], horizontal[:, n:]
    out = lower - upper  # then between rows: upper + (lower - upper) * wy
    return out.mul_(wy[:, None]).add_(upper).sub_(mean)


def _decode_one(raw: torch.Tensor, device: torch.device, path: str) -> torch.Tensor:
    from torchvision.io import decode_jpeg

    try:
        return decode_jpeg(raw, device=device)
    except RuntimeError:
        pass
    try:
        return decode_jpeg(raw).to(device)  # libjpeg-turbo, as the CPU path decodes it
    except RuntimeError as e:
        reason = str(e).strip().splitlines()[-1]
        raise DataError(
            f"ImageNet file {path} is not a decodable JPEG ({reason}): replace it with the original"
        ) from None


def decode_and_augment(batch: EncodedBatch, device: torch.device | str) -> torch.Tensor:
    """The batch's (N, 3, 224, 224) float32 input on ``device``: JPEGs decoded there in one call (nvJPEG on a
    GPU), pixels decoded by a worker copied there, then each image cropped, flipped and resized."""
    from torchvision.io import decode_jpeg

    device = torch.device(device)
    encoded = [i for i, im in enumerate(batch.images) if im.ndim == 1]
    decoded: dict[int, torch.Tensor] = {}
    if encoded:
        raws = [batch.images[i] for i in encoded]
        try:
            outs = decode_jpeg(raws, device=device)
        except RuntimeError:  # one file the device's decoder refuses: each alone, the refused ones on the CPU
            outs = [_decode_one(raw, device, batch.paths[i]) for i, raw in zip(encoded, raws, strict=True)]
        decoded.update(zip(encoded, outs, strict=True))
    mean = torch.tensor(data.REFERENCE_MEAN_255, device=device)[:, None, None]
    images = []
    for i, (window, flip) in enumerate(zip(batch.windows, batch.flips, strict=True)):
        pixels = decoded.get(i)
        if pixels is None:  # decoded by PIL in the worker: (H, W, 3)
            pixels = batch.images[i].to(device, non_blocking=True).permute(2, 0, 1)
        images.append(crop_flip_resize(pixels, window, flip, mean))
    return torch.stack(images)
