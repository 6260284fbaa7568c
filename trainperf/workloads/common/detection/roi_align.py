"""ROI Align through ``torch.nn.functional.grid_sample``, for the mini Mask R-CNN on the CPU.

torchvision's ``roi_align`` is the right operator and the reference model uses it. Its CPU backward,
however, is a single-threaded C++ loop; in the mini Mask R-CNN (one sample per bin, 48 box and up to 12
mask ROIs per image, four FPN levels) it was a quarter of each training step on two cores
(``benchmarks/detection_throughput.py``, README.md). With one sample per bin and ``aligned=False``,
ROI Align is exactly a bilinear sample at each bin's centre, which ``grid_sample`` computes with
PyTorch's vectorized, multi-threaded kernels in both directions. :class:`GridMultiScaleRoIAlign` is
torchvision's ``MultiScaleRoIAlign`` (same level mapping, same scales) with that operator inside;
``tests/unit/test_roi_align.py`` checks it against ``torchvision.ops.roi_align`` forward and backward.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torchvision.ops import MultiScaleRoIAlign
from torchvision.ops.poolers import _convert_to_roi_format, _filter_input, _setup_scales


def roi_align_one_sample(features: Tensor, rois: Tensor, output_size: tuple[int, int], spatial_scale: float) -> Tensor:
    """``torchvision.ops.roi_align(features, rois, output_size, spatial_scale, sampling_ratio=1, aligned=False)``.

    ``features`` (N, C, H, W); ``rois`` (K, 5) rows of (image index, x1, y1, x2, y2) in image pixels.
    Returns (K, C, ph, pw). As in torchvision, a point within one pixel outside the map takes the
    value at its edge and a point further out gives 0.
    """
    ph, pw = output_size
    n, c, h, w = features.shape
    k = rois.shape[0]
    if k == 0:
        return features.new_zeros((0, c, ph, pw))
    rois = rois.detach().to(features.dtype)
    image = rois[:, 0].long()
    x1, y1 = rois[:, 1] * spatial_scale, rois[:, 2] * spatial_scale
    roi_w = (rois[:, 3] * spatial_scale - x1).clamp(min=1.0)
    roi_h = (rois[:, 4] * spatial_scale - y1).clamp(min=1.0)
    centres_x = (torch.arange(pw, device=rois.device, dtype=rois.dtype) + 0.5) / pw
    centres_y = (torch.arange(ph, device=rois.device, dtype=rois.dtype) + 0.5) / ph
    xs = x1[:, None] + centres_x[None] * roi_w[:, None]  # (K, pw) in feature pixels
    ys = y1[:, None] + centres_y[None] * roi_h[:, None]  # (K, ph)
    # align_corners=True: -1 and 1 are the centres of the first and last pixels, as in roi_align's
    # bilinear interpolation; padding "border" is its clamping of the points to the map.
    gx = xs * (2.0 / max(w - 1, 1)) - 1.0
    gy = ys * (2.0 / max(h - 1, 1)) - 1.0
    grid = torch.stack(torch.broadcast_tensors(gx[:, None, :], gy[:, :, None]), dim=-1)  # (K, ph, pw, 2)
    # One grid_sample call per level: each image's ROIs side by side, padded to the most ROIs of an image.
    counts = torch.bincount(image, minlength=n)
    most = int(counts.max())
    order = torch.argsort(image, stable=True)
    starts = torch.cumsum(counts, 0) - counts
    slot = torch.empty_like(image)
    slot[order] = torch.arange(k, device=rois.device) - starts[image[order]]
    padded = grid.new_zeros((n, most, ph, pw, 2))
    padded[image, slot] = grid
    out = F.grid_sample(
        features, padded.view(n, most * ph, pw, 2), mode="bilinear", padding_mode="border", align_corners=True
    )  # (N, C, most * ph, pw)
    out = out.view(n, c, most, ph, pw)[image, :, slot]  # (K, C, ph, pw)
    # torchvision's roi_align gives 0 for a point beyond one pixel outside the map ("border" would clamp
    # it): a box under a pixel wide is stretched to one pixel and may reach past the edge.
    inside_x = (xs >= -1.0) & (xs <= w)
    inside_y = (ys >= -1.0) & (ys <= h)
    inside = inside_y[:, :, None] & inside_x[:, None, :]  # (K, ph, pw)
    if not bool(inside.all()):
        out = out * inside[:, None].to(out.dtype)
    return out


class GridMultiScaleRoIAlign(MultiScaleRoIAlign):
    """``MultiScaleRoIAlign`` with one sample per bin, computed by :func:`roi_align_one_sample`."""

    def __init__(self, featmap_names: list[str], output_size: int | tuple[int, int]) -> None:
        super().__init__(featmap_names, output_size, sampling_ratio=1)

    def forward(self, x: dict[str, Tensor], boxes: list[Tensor], image_shapes: list[tuple[int, int]]) -> Tensor:
        features = _filter_input(x, self.featmap_names)
        if self.scales is None or self.map_levels is None:
            self.scales, self.map_levels = _setup_scales(
                features, image_shapes, self.canonical_scale, self.canonical_level
            )
        rois = _convert_to_roi_format(boxes)
        size = tuple(self.output_size)
        if len(features) == 1:
            return roi_align_one_sample(features[0], rois, size, self.scales[0])
        levels = self.map_levels(boxes)
        result = features[0].new_zeros((len(rois), features[0].shape[1], *size))
        for level, (feature, scale) in enumerate(zip(features, self.scales, strict=True)):
            idx = torch.where(levels == level)[0]
            result[idx] = roi_align_one_sample(feature, rois[idx], size, scale).to(result.dtype)
        return result
