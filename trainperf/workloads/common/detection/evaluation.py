"""COCO mAP@[.5:.95] with pycocotools' COCOeval (the metric of both MLPerf detection benchmarks), quietly; and the
same mAP of image sets resampled with replacement, for the bootstrap of the metric's standard error."""

from __future__ import annotations

import contextlib
import copy
import io
from collections.abc import Sequence
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
    ev = _per_image_evaluation(index_or_coco_gt, results, iou_type)
    return 0.0 if ev is None else _summarized_map(ev)


def _per_image_evaluation(index_or_coco_gt: CocoIndex | Any, results: list[dict[str, Any]], iou_type: str) -> Any:
    """pycocotools' COCOeval after ``evaluate()`` (matches per image and category); None without detections."""
    from pycocotools.cocoeval import COCOeval

    if iou_type not in IOU_TYPES:
        raise ValueError(f"iou_type must be one of {IOU_TYPES}, not {iou_type!r}")
    gt = getattr(index_or_coco_gt, "coco", index_or_coco_gt)
    if not results:
        return None
    unknown = {r["image_id"] for r in results} - set(gt.getImgIds())
    if unknown:
        raise ValueError(f"results name image ids the ground truth lacks: {sorted(unknown)[:5]}")
    with contextlib.redirect_stdout(io.StringIO()):
        dt = gt.loadRes(copy.deepcopy(results))  # loadRes adds keys to the dicts it is given
        ev = COCOeval(gt, dt, iouType=iou_type)
        ev.evaluate()
    return ev


def _summarized_map(ev: Any) -> float:
    """stats[0] of an evaluated COCOeval, after its ``accumulate()`` and ``summarize()``."""
    with contextlib.redirect_stdout(io.StringIO()):
        ev.accumulate()
        ev.summarize()
    value = float(ev.stats[0])
    if value < 0:  # COCOeval's -1: no ground-truth object in any category
        raise ValueError("the ground truth holds no (non-crowd) object, so mAP is undefined")
    return value


# --- resampled image sets (the bootstrap of benchmarks/metric_error.py) -------------------------------------
def resampled(
    index_or_coco_gt: CocoIndex | Any, results: list[dict[str, Any]], image_ids: Sequence[int]
) -> tuple[Any, list[dict[str, Any]]]:
    """The ground truth and results of the images ``image_ids``, drawn with replacement, as a new data set.

    Draw ``j`` becomes image ``j + 1`` with copies of its annotations (fresh annotation ids from 1:
    COCOeval takes a matched ground-truth id of 0 for no match) and of its detections, so an image drawn
    twice counts twice. Returns (pycocotools ``COCO``, results) for :func:`coco_map`.
    """
    from pycocotools.coco import COCO

    gt = getattr(index_or_coco_gt, "coco", index_or_coco_gt)
    detections: dict[int, list[dict[str, Any]]] = {}
    for r in results:
        detections.setdefault(r["image_id"], []).append(r)
    images, annotations, drawn = [], [], []
    for new_id, old_id in enumerate(image_ids, start=1):
        images.append({**gt.imgs[old_id], "id": new_id})
        for ann in gt.imgToAnns[old_id]:
            annotations.append({**ann, "id": len(annotations) + 1, "image_id": new_id})
        drawn += [{**r, "image_id": new_id} for r in detections.get(old_id, [])]
    sample = COCO()
    sample.dataset = {"images": images, "annotations": annotations, "categories": gt.dataset["categories"]}
    with contextlib.redirect_stdout(io.StringIO()):
        sample.createIndex()
    return sample, drawn


class ResampledMap:
    """COCO mAP of many resampled image sets, equal to :func:`coco_map` of :func:`resampled` for each.

    COCOeval's matching (``evaluate``) depends on one image's ground truth and detections alone, so it runs
    once over the whole set here; each resample then lays those per-image evaluations out in the order of
    its draws and runs COCOeval's own ``accumulate`` and ``summarize`` on them, as COCOeval would on the
    resampled data set (fresh image ids in draw order). With 50 detections on each of 500 images that is
    0.3-0.5 s a resample instead of 1.2-2.4 s; a test and ``benchmarks/metric_error.py --check`` compare
    the two.
    """

    def __init__(self, index_or_coco_gt: CocoIndex | Any, results: list[dict[str, Any]], iou_type: str) -> None:
        self.ev = _per_image_evaluation(index_or_coco_gt, results, iou_type)
        if self.ev is not None:
            p = self.ev.params
            self.position = {image_id: i for i, image_id in enumerate(p.imgIds)}
            # evalImgs is laid out [category][area range][image], as evaluate() builds it
            self.per_image = np.empty(len(self.ev.evalImgs), dtype=object)
            self.per_image[:] = self.ev.evalImgs
            self.per_image = self.per_image.reshape(len(p.catIds), len(p.areaRng), len(p.imgIds))

    def __call__(self, image_ids: Sequence[int]) -> float:
        if self.ev is None:
            return 0.0
        ev = copy.copy(self.ev)
        params = copy.copy(self.ev.params)
        params.imgIds = list(range(1, len(image_ids) + 1))
        ev.params, ev._paramsEval = params, copy.copy(params)
        positions = [self.position[i] for i in image_ids]
        ev.evalImgs = self.per_image[:, :, positions].ravel().tolist()
        return _summarized_map(ev)


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
