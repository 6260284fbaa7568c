"""The reference's evaluation of one case: Gaussian-weighted sliding-window inference, then Dice per class.

mlcommons/training ``image_segmentation/pytorch/runtime/inference.py``: the volume is first trimmed at each
end of an axis whose size leaves a remainder below half a stride (``size % stride``, split between the two
ends), then padded with the normalized air value (-2.2) so that ``size - roi`` is a multiple of the stride
(``roi * (1 - overlap)``) and at least 0; windows start at every multiple of the stride; each window's
logits are weighted by the reference's importance map (the cube root of the product of three Gaussian
windows of standard deviation ``roi / 8``, scaled to a maximum of 1) and the weighted sum is divided by the
sum of weights; the result is cropped back to the trimmed volume, whose label is the one scored.

The blending is MONAI's ``sliding_window_inference`` given the reference's importance map as
``roi_weight_map``: on a volume padded as above, MONAI's windows are exactly the reference's
(``tests/unit/test_unet3d_evaluation.py`` checks it against a hand computation). Dice: argmax of the logits,
one-hot, background excluded, ``(2 |P n T| + 1e-6) / (|P| + |T| + 1e-6)`` per case and class.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F

SW_BATCH = 4  # windows per forward pass


@lru_cache(maxsize=4)
def importance_map(roi: tuple[int, ...]) -> torch.Tensor:
    """The reference's Gaussian weights of one window (float32), maximum 1."""
    from scipy.signal.windows import gaussian

    g = [gaussian(n, 0.125 * n) for n in roi]
    w = np.cbrt(g[0][:, None, None] * g[1][None, :, None] * g[2][None, None, :])
    return torch.from_numpy(w / w.max()).float()


def trim_and_pad(shape: Sequence[int], roi: Sequence[int], overlap: float) -> tuple[list[slice], list[tuple[int, int]]]:
    """The reference's trim of each axis (slices into the volume) and padding of the trimmed volume ((low, high))."""
    trims, pads = [], []
    for size, r in zip(shape, roi, strict=False):
        stride = int(r * (1 - overlap))
        rest = size % stride
        cut = rest if rest < stride // 2 else 0
        trims.append(slice(cut // 2, size - (cut - cut // 2)))
        size -= cut
        extra = (stride - size % stride) % stride
        if size + extra < r:
            extra += stride
        pads.append((extra // 2, extra - extra // 2))
    return trims, pads


def sliding_window(
    model: torch.nn.Module,
    image: torch.Tensor,
    label: torch.Tensor,
    roi: Sequence[int],
    *,
    overlap: float = 0.5,
    padding_value: float = -2.2,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits of a whole volume (1 x C x D x H x W, trimmed as the reference trims) and the label trimmed alike."""
    from monai.inferers import sliding_window_inference

    roi = tuple(int(r) for r in roi)
    trims, pads = trim_and_pad(image.shape[2:], roi, overlap)
    box = (slice(None), slice(None), *trims)
    image, label = image[box], label[box]
    flat = [p for lo_hi in reversed(pads) for p in lo_hi]  # F.pad takes the last axis first
    padded = F.pad(image, flat, mode="constant", value=padding_value)
    weights = importance_map(roi).to(image.device)
    logits = sliding_window_inference(
        padded,
        roi,
        SW_BATCH,
        model,
        overlap=overlap,
        mode="gaussian",
        roi_weight_map=weights,
        padding_mode="constant",
        cval=padding_value,
    )
    crop = tuple(slice(lo, lo + n) for (lo, _), n in zip(pads, image.shape[2:], strict=False))
    return logits[(slice(None), slice(None), *crop)], label


def dice_scores(logits: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
    """Dice of each foreground class per case (N x 2): argmax prediction against the label, smoothing 1e-6."""
    classes = logits.shape[1]
    pred = F.one_hot(logits.argmax(1), classes).permute(0, 4, 1, 2, 3)[:, 1:].double()
    target = F.one_hot(label[:, 0].long(), classes).permute(0, 4, 1, 2, 3)[:, 1:].double()
    axes = tuple(range(2, pred.ndim))
    return (2 * (pred * target).sum(axes) + 1e-6) / (pred.sum(axes) + target.sum(axes) + 1e-6)
