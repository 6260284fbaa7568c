"""maskrcnn-benchmark's box arithmetic on torchvision's detection modules (the reference Mask R-CNN only).

maskrcnn-benchmark counts a box's pixels inclusively: ``x1..x2`` spans ``x2 - x1 + 1`` pixels in box coding
(``mb/modeling/box_coder.py:45-53``, ``:77-81``, ``:103-106``), IoU (``mb/structures/boxlist_ops.py``) and NMS
(``mb/csrc/cuda/nms.cu:16-19``). torchvision's continuous functions compute exactly those numbers on the box one
pixel larger, ``(x1, y1, x2 + 1, y2 + 1)``: the same deltas with the same weights and ``log(1000 / 16)`` clip, the
same IoUs, the same NMS. So between its transform and its output the reference model holds every box in that
*shifted* form, and converts only where the reference reads inclusive coordinates themselves: the ground truth
is made inclusive before the resize (``mb/structures/bounding_box.py``: ``convert`` from COCO's xywh with
``- 1``, ``resize`` scaling ``x2`` itself), the anchors are the reference's inclusive ones
(:func:`reference_cell_anchors`), RoIAlign and the mask targets' crop read ``x1..x2`` as they are
(``mb/csrc/cuda/ROIAlign_cuda.cu:82-92``), and the detections are made inclusive again before the masks are
pasted and the boxes resized back (``mb/modeling/roi_heads/mask_head/inference.py``, ``paste_mask_in_image``)
and written to COCO as ``x2 - x1 + 1`` (``mb/data/datasets/evaluation/coco/coco_eval.py:99``).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.image_list import ImageList
from torchvision.models.detection.rpn import RegionProposalNetwork
from torchvision.ops import MultiScaleRoIAlign, roi_align

ANCHOR_SIZES = (32, 64, 128, 256, 512)  # MODEL.RPN.ANCHOR_SIZES (defaults.py:139)
ANCHOR_STRIDES = (4, 8, 16, 32, 64)  # e2e_mask_rcnn_R_50_FPN_1x.yaml:9 (ANCHOR_STRIDE)
ASPECT_RATIOS = (0.5, 1.0, 2.0)  # MODEL.RPN.ASPECT_RATIOS (defaults.py:144)
STRADDLE_THRESH = 0  # MODEL.RPN.STRADDLE_THRESH (defaults.py:147)
POOLER_SCALES = (1 / 4, 1 / 8, 1 / 16, 1 / 32)  # ROI_BOX_HEAD / ROI_MASK_HEAD POOLER_SCALES: P2-P5
SHIFT = (0.0, 0.0, 1.0, 1.0)


def shifted(boxes: Tensor, sign: float = 1.0) -> Tensor:
    """Inclusive boxes to the shifted form (``sign`` 1: x2 + 1, y2 + 1), or back (``sign`` -1)."""
    return boxes + sign * boxes.new_tensor(SHIFT)


def reference_cell_anchors(stride: int, size: float, ratios: tuple[float, ...] = ASPECT_RATIOS) -> Tensor:
    """The reference's anchors of one FPN level, inclusive ``(x1, y1, x2, y2)`` centred on ``(stride - 1) / 2``
    (``mb/modeling/rpn/anchor_generator.py:233-303``): for each ratio a ``stride`` x ``stride`` window's area
    kept with its width rounded, ``round(sqrt(stride**2 / ratio))``, and its height ``round(width * ratio)``,
    then both scaled by ``size / stride``."""
    centre = (stride - 1) / 2
    rows = []
    for ratio in ratios:
        w = float(round(math.sqrt(stride * stride / ratio)))
        h = float(round(w * ratio))
        w, h = w * size / stride, h * size / stride
        rows.append([centre - (w - 1) / 2, centre - (h - 1) / 2, centre + (w - 1) / 2, centre + (h - 1) / 2])
    return torch.tensor(rows, dtype=torch.float32)


class ReferenceAnchorGenerator(AnchorGenerator):
    """The reference's anchors (shifted form), laid at the reference's fixed strides 4-64 from the image's
    corner (``anchor_generator.py:86-108``). torchvision derives a level's stride from the padded image's size
    over the level's (P6 of an 800-row batch: 800 // 13 = 61 rows); the reference's is the configured one."""

    def __init__(self) -> None:
        super().__init__(sizes=tuple((s,) for s in ANCHOR_SIZES), aspect_ratios=(ASPECT_RATIOS,) * len(ANCHOR_SIZES))
        self.cell_anchors = [
            shifted(reference_cell_anchors(st, s)) for st, s in zip(ANCHOR_STRIDES, ANCHOR_SIZES, strict=True)
        ]

    def forward(self, image_list: ImageList, feature_maps: list[Tensor]) -> list[Tensor]:
        grid_sizes = [list(f.shape[-2:]) for f in feature_maps]
        dtype, device = feature_maps[0].dtype, feature_maps[0].device
        strides = [[torch.tensor(s, dtype=torch.int64, device=device)] * 2 for s in ANCHOR_STRIDES]
        self.set_cell_anchors(dtype, device)
        levels = self.grid_anchors(grid_sizes, strides)
        return [torch.cat(levels) for _ in image_list.image_sizes]


def straddles(anchors: Tensor, height: int, width: int, thresh: float = STRADDLE_THRESH) -> Tensor:
    """Shifted anchors reaching more than ``thresh`` pixels outside an image (``anchor_generator.py:110-123``:
    visible when ``x1 >= -t``, ``y1 >= -t``, inclusive ``x2 < width + t`` and ``y2 < height + t``)."""
    a = shifted(anchors, -1.0)
    inside = (a[:, 0] >= -thresh) & (a[:, 1] >= -thresh) & (a[:, 2] < width + thresh) & (a[:, 3] < height + thresh)
    return ~inside


class ReferenceRPN(RegionProposalNetwork):
    """torchvision's RPN with the reference's border rule: anchors that straddle the image are left out of the
    loss (labelled -1, neither sampled as positive nor as negative; ``mb/modeling/rpn/loss.py:86-87``)."""

    image_sizes: list[tuple[int, int]] = []

    def forward(self, images: ImageList, features, targets=None):  # type: ignore[override]
        self.image_sizes = list(images.image_sizes)
        return super().forward(images, features, targets)

    def assign_targets_to_anchors(self, anchors, targets):  # type: ignore[override]
        labels, matched = super().assign_targets_to_anchors(anchors, targets)
        for label, a, (h, w) in zip(labels, anchors, self.image_sizes, strict=True):
            label[straddles(a, h, w)] = -1.0
        return labels, matched


class ReferencePooler(MultiScaleRoIAlign):
    """The reference's FPN pooler (``mb/modeling/poolers.py``) on shifted boxes: the level from the box's area
    counted inclusively (``LevelMapper``: ``floor(4 + log2(sqrt(area) / 224 + 1e-6))`` within P2-P5), RoIAlign
    (``aligned=False``) over the inclusive coordinates."""

    def __init__(self, output_size: int, sampling_ratio: int) -> None:
        super().__init__(["0", "1", "2", "3"], output_size, sampling_ratio)

    def forward(self, x: dict[str, Tensor], boxes: list[Tensor], image_shapes=None) -> Tensor:  # type: ignore[override]
        feats = [x[name] for name in self.featmap_names]
        flat = torch.cat(boxes)
        ids = torch.cat([torch.full((len(b), 1), i, dtype=flat.dtype, device=flat.device) for i, b in enumerate(boxes)])
        rois = torch.cat([ids, shifted(flat, -1.0)], dim=1)
        area = (flat[:, 2] - flat[:, 0]) * (flat[:, 3] - flat[:, 1])
        level = torch.floor(4 + torch.log2(torch.sqrt(area) / 224 + 1e-6)).clamp(2, 5).long() - 2
        size = self.output_size if isinstance(self.output_size, tuple) else (self.output_size,) * 2
        out = feats[0].new_zeros((len(flat), feats[0].shape[1], *size))
        for k, (feat, scale) in enumerate(zip(feats, POOLER_SCALES, strict=True)):
            at = torch.where(level == k)[0]
            if len(at):
                out[at] = roi_align(feat, rois[at], size, scale, self.sampling_ratio, aligned=False).to(out.dtype)
        return out


def inclusive_targets(targets: list[dict[str, Tensor]]) -> list[dict[str, Tensor]]:
    """Ground truth in the reference's inclusive form: ``x2 - 1`` and ``y2 - 1`` (COCO's ``x + w - 1``), and the
    boxes then empty (a pixel wide or less) left out with their labels and masks, as the reference's dataset
    does (``mb/data/datasets/coco.py:104``, ``clip_to_image(remove_empty=True)``)."""
    out = []
    for t in targets:
        boxes = shifted(t["boxes"], -1.0)
        keep = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
        n = len(boxes)
        new = {k: (v[keep] if isinstance(v, Tensor) and v.dim() > 0 and len(v) == n else v) for k, v in t.items()}
        new["boxes"] = boxes[keep]
        out.append(new)
    return out
