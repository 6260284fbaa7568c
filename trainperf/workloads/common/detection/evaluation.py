"""COCO mAP@[.5:.95] with pycocotools' COCOeval (the metric of both MLPerf detection benchmarks), quietly."""

from __future__ import annotations

import contextlib
import copy
import io
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:
    from trainperf.workloads.common.detection.coco import CocoIndex

IOU_TYPES = ("bbox", "segm")


def coco_map(index_or_coco_gt: CocoIndex | Any, results: list[dict[str, Any]], iou_type: str) -> float:
    """COCO mAP@[.5:.95] (COCOeval's stats[0]) of ``results`` against the ground truth; 0.0 without detections.

    ``index_or_coco_gt`` is a :class:`~trainperf.workloads.common.detection.coco.CocoIndex` or a pycocotools
    ``COCO``; ``results`` are COCO result dicts (see :func:`to_coco_results`). Every image of the
    ground truth counts, so images the model found nothing in count as misses.
    """
    from pycocotools.cocoeval import COCOeval

    if iou_type not in IOU_TYPES:
        raise ValueError(f"iou_type must be one of {IOU_TYPES}, not {iou_type!r}")
    gt = getattr(index_or_coco_gt, "coco", index_or_coco_gt)
    if not results:
        return 0.0
    unknown = {r["image_id"] for r in results} - set(gt.getImgIds())
    if unknown:
        raise ValueError(f"results name image ids the ground truth lacks: {sorted(unknown)[:5]}")
    with contextlib.redirect_stdout(io.StringIO()):
        dt = gt.loadRes(copy.deepcopy(results))  # loadRes adds keys to the dicts it is given
        ev = COCOeval(gt, dt, iouType=iou_type)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    value = float(ev.stats[0])
    if value < 0:  # COCOeval's -1: no ground-truth object in any category
        raise ValueError("the ground truth holds no (non-crowd) object, so mAP is undefined")
    return value


def to_coco_results(
    image_id: int,
    boxes_xyxy: torch.Tensor,
    scores: torch.Tensor,
    labels: torch.Tensor,
    index: CocoIndex,
    masks: torch.Tensor | None = None,
    mask_threshold: float = 0.5,
) -> list[dict[str, Any]]:
    """COCO result dicts for one image's detections.

    ``boxes_xyxy`` (N, 4) in the original image's pixels, ``scores`` (N,), ``labels`` (N,) the index's
    labels (mapped back to category ids with ``index.label_to_category``), ``masks`` optional (N, 1, H, W)
    probabilities, binarized at ``mask_threshold`` and written as RLE with str counts (JSON-ready).

    A detection whose label is no category's is left out: a RetinaNet head with a column for label 0
    that the data never uses (1-based labels) can still score it above the threshold, and such a
    detection names no category a COCO result could carry.
    """
    from pycocotools import mask as mask_utils

    boxes = boxes_xyxy.detach().to("cpu", dtype=torch.float64).numpy().reshape(-1, 4)
    xywh = np.concatenate([boxes[:, :2], boxes[:, 2:] - boxes[:, :2]], axis=1)
    score_list = scores.detach().cpu().double().tolist()
    label_list = labels.detach().cpu().long().tolist()
    known = [i for i, label in enumerate(label_list) if label in index.label_to_category]
    if len(known) < len(label_list):
        xywh, score_list, label_list = xywh[known], [score_list[i] for i in known], [label_list[i] for i in known]
        masks = masks[known] if masks is not None else None
    results = [
        {
            "image_id": int(image_id),
            "category_id": int(index.label_to_category[label]),
            "bbox": [round(float(v), 3) for v in box],
            "score": float(score),
        }
        for box, score, label in zip(xywh, score_list, label_list, strict=True)
    ]
    if masks is not None:
        binary = (masks.detach().cpu()[:, 0] > mask_threshold).numpy().astype(np.uint8)
        if len(binary) != len(results):
            raise ValueError(f"{len(binary)} masks for {len(results)} boxes")
        if len(binary):
            rles = mask_utils.encode(np.asfortranarray(binary.transpose(1, 2, 0)))
            for result, rle in zip(results, rles, strict=True):
                result["segmentation"] = {
                    "size": [int(s) for s in rle["size"]],
                    "counts": rle["counts"].decode("ascii"),
                }
    return results
