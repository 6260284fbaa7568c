"""COCO-format detection data for ``ssd`` and ``maskrcnn``: one loader for mini and reference data.

:func:`load_coco` validates a whole annotation file up front and raises one :class:`DataError` naming
the file, the annotation (or image) id and the fix; :class:`CocoDetection` serves ``(image, target)``
pairs as torchvision's detection models take them. The reference layouts are COCO 2017 (maskrcnn) and
the MLPerf OpenImages subset (ssd), whose annotations MLCommons converts to COCO json; the mini scenes
(:mod:`.scenes`) are written in that same format. Evaluation lives in :mod:`.evaluation`.

This module re-exports the mini generator and the evaluation functions, so callers need only ``coco``.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trainperf import seeds
from trainperf.errors import DataError
from trainperf.workloads.common.detection.evaluation import coco_map, to_coco_results
from trainperf.workloads.common.detection.scenes import (
    CATEGORY_NAMES,
    SCENE_SIZE,
    mini_paths,
    prepare_mini,
    verify_mini,
)

__all__ = [
    "CATEGORY_NAMES",
    "SCENE_SIZE",
    "CocoDetection",
    "CocoIndex",
    "coco2017_paths",
    "coco_map",
    "collate",
    "load_coco",
    "mini_paths",
    "openimages_mlperf_paths",
    "prepare_mini",
    "to_coco_results",
    "verify_mini",
]

BOX_TOLERANCE = 1.0  # pixels a box may reach past its image's border (rounding in real annotations)


# --- reference layouts ------------------------------------------------------------------------------------
def _require(paths: Sequence[Path], layout: str) -> None:
    for path in paths:
        if not path.exists():
            raise DataError(f"{path} not found: the reference scale reads {layout}")


def coco2017_paths(root: Path) -> tuple[Path, Path, Path, Path]:
    """(train_json, train_dir, val_json, val_dir) of COCO 2017 under ``root`` (maskrcnn's reference data)."""
    root = Path(root)
    paths = (
        root / "annotations" / "instances_train2017.json",
        root / "train2017",
        root / "annotations" / "instances_val2017.json",
        root / "val2017",
    )
    _require(
        paths,
        f"COCO 2017 as cocodataset.org ships it: {root}/train2017/*.jpg, {root}/val2017/*.jpg and "
        f"{root}/annotations/instances_{{train,val}}2017.json (unzip train2017.zip, val2017.zip and "
        "annotations_trainval2017.zip there)",
    )
    return paths


def openimages_mlperf_paths(root: Path) -> tuple[Path, Path, Path, Path]:
    """(train_json, train_dir, val_json, val_dir) of the MLPerf OpenImages subset (ssd's reference data).

    The layout MLCommons' ``single_stage_detector/scripts/download_openimages_mlperf.sh`` writes, read by
    its ``coco_utils.get_openimages``: ``{train,validation}/data/*.jpg`` and
    ``{train,validation}/labels/openimages-mlperf.json``.
    """
    root = Path(root)
    paths = (
        root / "train" / "labels" / "openimages-mlperf.json",
        root / "train" / "data",
        root / "validation" / "labels" / "openimages-mlperf.json",
        root / "validation" / "data",
    )
    _require(
        paths,
        f"the MLPerf OpenImages subset: {root}/{{train,validation}}/data/*.jpg and "
        f"{root}/{{train,validation}}/labels/openimages-mlperf.json (written by MLCommons' "
        "single_stage_detector/scripts/download_openimages_mlperf.sh)",
    )
    return paths


# --- the validated index ----------------------------------------------------------------------------------
@dataclass(eq=False)
class CocoIndex:
    """A validated COCO annotation file and its image folder.

    ``images`` keeps the file's order; ``annotations`` maps image id to its annotations (crowd ones
    included: evaluation needs them, training skips them). Labels are contiguous in the order of the
    file's categories, from ``first_label`` (1 where the model keeps label 0 for the background, as
    torchvision's two-stage detectors do; 0 for the ssd reference, whose head has one column per category);
    ``coco`` is pycocotools' COCO object, built on first use.
    """

    json_path: Path
    image_dir: Path
    need_masks: bool
    dataset: dict[str, Any] = field(repr=False)
    images: list[dict[str, Any]] = field(repr=False)
    annotations: dict[int, list[dict[str, Any]]] = field(repr=False)
    category_to_label: dict[int, int]
    label_to_category: dict[int, int]

    @property
    def num_classes(self) -> int:
        """K, the number of object categories (models add one for background where they need it)."""
        return len(self.label_to_category)

    @property
    def category_names(self) -> dict[int, str]:
        return {c["id"]: str(c.get("name", c["id"])) for c in self.dataset["categories"]}

    @property
    def image_ids(self) -> list[int]:
        return [img["id"] for img in self.images]

    def image_path(self, image: dict[str, Any]) -> Path:
        return self.image_dir / image["file_name"]

    @functools.cached_property
    def coco(self):
        """pycocotools' COCO over the already-parsed file, built quietly (it prints otherwise)."""
        from pycocotools.coco import COCO

        gt = COCO()
        gt.dataset = self.dataset
        with contextlib.redirect_stdout(io.StringIO()):
            gt.createIndex()
        return gt


class _Problem(Exception):
    """One validation failure; load_coco turns it into a DataError naming the file."""


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _is_id(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _read_json(path: Path) -> Any:
    try:
        with open(path, "rb") as f:
            return json.load(f)
    except FileNotFoundError:
        raise DataError(f"annotation file {path} not found") from None
    except OSError as e:
        raise DataError(f"annotation file {path} cannot be read ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise DataError(
            f"annotation file {path} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno} "
            "(truncated download or hand edit? fetch the file again)"
        ) from None
    except UnicodeDecodeError:
        raise DataError(f"annotation file {path} is not UTF-8 JSON (wrong file?)") from None


def _check_segmentation(seg: Any, image: dict[str, Any]) -> None:
    if isinstance(seg, list):  # polygons: [[x1, y1, x2, y2, ...], ...]; coordinates are checked when decoded
        if not seg or not all(isinstance(p, list) for p in seg):
            raise _Problem("segmentation must be a non-empty list of polygons (lists of numbers) or an RLE dict")
    elif isinstance(seg, dict):  # RLE: {"size": [h, w], "counts": str | [int, ...]}
        if "counts" not in seg or "size" not in seg:
            raise _Problem("RLE segmentation needs 'size' and 'counts'")
        if list(seg["size"]) != [image["height"], image["width"]]:
            raise _Problem(f"RLE size {seg['size']} differs from the image's [height, width]")
    else:
        raise _Problem(f"segmentation is a {type(seg).__name__}; it must be a list of polygons or an RLE dict")


def _validate(data: Any, need_masks: bool) -> tuple[list[dict], dict[int, dict], dict[int, list[dict]], list[int]]:
    if not isinstance(data, dict):
        raise _Problem("the top level must be a JSON object with 'images', 'annotations' and 'categories'")
    missing = [k for k in ("images", "annotations", "categories") if not isinstance(data.get(k), list)]
    if missing:
        raise _Problem(
            f"top-level key(s) {', '.join(missing)} missing or not a list; a COCO instances file has all three"
        )

    category_ids: list[int] = []
    for cat in data["categories"]:
        if not isinstance(cat, dict) or not _is_id(cat.get("id")):
            raise _Problem(f"category {cat!r} has no integer 'id'")
        if cat["id"] in category_ids:
            raise _Problem(f"category id {cat['id']} is declared twice; category ids must be unique")
        category_ids.append(cat["id"])

    images: dict[int, dict] = {}
    for img in data["images"]:
        if not isinstance(img, dict) or not _is_id(img.get("id")):
            raise _Problem(f"image entry {str(img)[:80]} has no integer 'id'")
        where = f"image id {img['id']}"
        if img["id"] in images:
            raise _Problem(f"{where} is declared twice; image ids must be unique")
        for key in ("file_name", "width", "height"):
            if key not in img:
                raise _Problem(f"{where} has no '{key}'")
        if not isinstance(img["file_name"], str) or not img["file_name"]:
            raise _Problem(f"{where} has file_name {img['file_name']!r}; it must be a file name")
        if not (_is_id(img["width"]) and _is_id(img["height"]) and img["width"] > 0 and img["height"] > 0):
            raise _Problem(
                f"{where} has width {img['width']!r} and height {img['height']!r}; both must be positive integers"
            )
        images[img["id"]] = img

    by_image: dict[int, list[dict]] = {i: [] for i in images}
    seen: set[int] = set()
    cats = set(category_ids)
    required = ("id", "image_id", "category_id", "bbox") + (("segmentation",) if need_masks else ())
    for ann in data["annotations"]:
        if not isinstance(ann, dict) or not _is_id(ann.get("id")):
            raise _Problem(f"annotation {str(ann)[:80]} has no integer 'id'")
        where = f"annotation id {ann['id']}"
        missing = [k for k in required if k not in ann]
        if missing:
            raise _Problem(f"{where} has no {', '.join(repr(k) for k in missing)}")
        if ann["id"] in seen:
            raise _Problem(f"{where} is used twice; annotation ids must be unique")
        seen.add(ann["id"])
        if ann["image_id"] not in images:
            raise _Problem(f"{where} refers to image id {ann['image_id']!r}, which 'images' does not declare")
        if ann["category_id"] not in cats:
            raise _Problem(f"{where} has category_id {ann['category_id']!r}, which 'categories' does not declare")
        img = images[ann["image_id"]]
        box = ann["bbox"]
        if not (isinstance(box, list) and len(box) == 4 and all(_is_number(v) for v in box)):
            raise _Problem(f"{where} has bbox {box!r}; it must be 4 numbers [x, y, width, height]")
        x, y, w, h = box
        if w < 0 or h < 0:
            raise _Problem(f"{where} has bbox {box} with a negative width or height; fix or remove it")
        # Zero width or height is not an error: COCO's own train2017 has two such boxes (annotation ids
        # 918 and 2206849, cocodataset/cocoapi#355). They stay for evaluation, as in the published file,
        # and are left out of training targets, as the MLPerf references' degenerate-box filter does.
        t = BOX_TOLERANCE
        if x < -t or y < -t or x + w > img["width"] + t or y + h > img["height"] + t:
            raise _Problem(
                f"{where} has bbox {box} (x, y, width, height) outside its image ({img['width']}x{img['height']}, "
                f"image id {img['id']}); fix the box or the image's size"
            )
        if ann.get("iscrowd", 0) not in (0, 1):
            raise _Problem(f"{where} has iscrowd {ann['iscrowd']!r}; it must be 0 or 1")
        if need_masks:
            try:
                _check_segmentation(ann["segmentation"], img)
            except _Problem as e:
                raise _Problem(f"{where}: {e}") from None
        by_image[img["id"]].append(ann)
    return data["images"], images, by_image, category_ids


def _check_image_files(json_path: Path, image_dir: Path, images: list[dict]) -> None:
    if not image_dir.is_dir():
        raise DataError(f"image folder {image_dir} (for {json_path}) not found")
    listed = set(os.listdir(image_dir))
    missing = [
        img
        for img in images
        if not (img["file_name"] in listed or ("/" in img["file_name"] and (image_dir / img["file_name"]).is_file()))
    ]
    if missing:
        first = missing[0]
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise DataError(
            f"image file {image_dir / first['file_name']} of image id {first['id']} in {json_path} is missing{more}: "
            "complete the image folder or remove the images from the annotation file"
        )


def load_coco(json_path: Path, image_dir: Path, *, need_masks: bool, first_label: int = 1) -> CocoIndex:
    """Read and validate a COCO instances file and check that every image file exists.

    The file's categories, in its order, become labels ``first_label``, ``first_label + 1``, ...
    """
    json_path, image_dir = Path(json_path), Path(image_dir)
    data = _read_json(json_path)
    try:
        image_list, _, by_image, category_ids = _validate(data, need_masks)
    except _Problem as e:
        raise DataError(f"annotation file {json_path}: {e}") from None
    _check_image_files(json_path, image_dir, image_list)
    category_to_label = {c: i + first_label for i, c in enumerate(category_ids)}
    return CocoIndex(
        json_path=json_path,
        image_dir=image_dir,
        need_masks=need_masks,
        dataset=data,
        images=image_list,
        annotations=by_image,
        category_to_label=category_to_label,
        label_to_category={v: k for k, v in category_to_label.items()},
    )


# --- the torch dataset ------------------------------------------------------------------------------------
def decode_segmentation(seg: Any, height: int, width: int) -> np.ndarray | None:
    """uint8 (height, width) mask of a polygon list or RLE; None when no polygon is usable.

    Polygons with fewer than three points (a few exist in COCO) are dropped, as detectron2 does.
    """
    from pycocotools import mask as mask_utils

    if isinstance(seg, dict):
        rle = mask_utils.frPyObjects(seg, height, width) if isinstance(seg["counts"], list) else seg
    else:
        polygons = [np.asarray(p, dtype=np.float64) for p in seg]  # TypeError/ValueError for non-numbers
        if not all(np.isfinite(p).all() for p in polygons):
            raise ValueError("polygon coordinates must be finite numbers")
        polygons = [p.tolist() for p in polygons if p.ndim == 1 and len(p) >= 6 and len(p) % 2 == 0]
        if not polygons:
            return None
        rle = mask_utils.merge(mask_utils.frPyObjects(polygons, height, width))
    return mask_utils.decode(rle)


def read_image(path: Path, height: int | None = None, width: int | None = None) -> torch.Tensor:
    """uint8 (3, H, W) RGB from a JPEG/PNG file (grayscale and RGBA become RGB); DataError when unreadable.

    Decoded with PIL, as the MLPerf references do (torchvision 0.29 deprecates its own decoders).
    """
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            array = np.asarray(img.convert("RGB"))
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as e:
        raise DataError(f"image file {path} cannot be decoded ({e}): replace it with a good copy") from None
    image = torch.from_numpy(array.copy()).permute(2, 0, 1)
    if height is not None and tuple(image.shape[1:]) != (height, width):
        raise DataError(
            f"image file {path} is {image.shape[2]}x{image.shape[1]} but its annotation file says {width}x{height}: "
            "the file or the annotations belong to another version of the dataset"
        )
    return image


class CocoDetection(torch.utils.data.Dataset):
    """``(image, target)`` pairs: image float32 (3, H, W) in [0, 1]; target as torchvision's detectors take it.

    target: ``boxes`` float32 (N, 4) xyxy pixels, ``labels`` int64 (N,) (the index's labels), ``image_id`` int and,
    when the index was loaded with ``need_masks``, ``masks`` uint8 (N, H, W). Crowd annotations are left
    out of the targets unless ``keep_crowd`` (the ssd reference trains on OpenImages' group boxes, which
    its conversion marks iscrowd=1), and so are zero-sized boxes. With ``train=True`` and
    ``remove_unannotated`` images without any box (crowds included) wider and taller than a pixel are
    skipped, as the maskrcnn reference's COCODataset (``remove_images_without_annotations``) and the ssd
    reference's ``get_coco`` do; the ssd reference's ``get_openimages`` keeps every image
    (``remove_unannotated=False``). With ``train=True`` each sample is
    flipped horizontally with probability ``flip_prob``, drawn from the stream (``seed``,
    ``seeds.STREAM_AUGMENT``, epoch, sample index) of :mod:`trainperf.seeds`: reproducible, independent of
    rank, worker count and order. Call :meth:`set_epoch` before each epoch: the epoch lives in shared
    memory, so that the persistent worker processes of a DataLoader see it too.
    """

    def __init__(
        self,
        index: CocoIndex,
        *,
        train: bool,
        seed: int = 0,
        flip_prob: float = 0.5,
        keep_crowd: bool = False,
        remove_unannotated: bool = True,
    ) -> None:
        self.index = index
        self.keep_crowd = keep_crowd
        self.train = train
        self.seed = seed
        self.flip_prob = flip_prob if train else 0.0
        self._epoch = torch.zeros((), dtype=torch.int64).share_memory_()
        images = index.images
        if train and remove_unannotated:  # no box wider and taller than one pixel: not trained on
            images = [
                img
                for img in images
                if any(a["bbox"][2] > 1 and a["bbox"][3] > 1 for a in index.annotations[img["id"]])
            ]
        self.images = images

    @property
    def epoch(self) -> int:
        return int(self._epoch)

    def set_epoch(self, epoch: int) -> None:
        self._epoch.fill_(epoch)

    def __len__(self) -> int:
        return len(self.images)

    def _flip(self, i: int) -> bool:
        if self.flip_prob <= 0:
            return False
        g = seeds.torch_generator(self.seed, seeds.STREAM_AUGMENT, self.epoch, i)
        return bool(torch.rand((), generator=g) < self.flip_prob)

    def _mask(self, ann: dict[str, Any], h: int, w: int) -> np.ndarray | None:
        try:
            return decode_segmentation(ann["segmentation"], h, w)
        except (TypeError, ValueError, KeyError, IndexError) as e:
            raise DataError(
                f"annotation file {self.index.json_path}: annotation id {ann['id']} has a segmentation that "
                f"pycocotools cannot decode ({e}); fix or remove it"
            ) from None

    def __getitem__(self, i: int) -> tuple[torch.Tensor, dict[str, Any]]:
        img = self.images[i]
        h, w = img["height"], img["width"]
        image = read_image(self.index.image_path(img), h, w).float().div_(255)
        anns = [a for a in self.index.annotations[img["id"]] if self.keep_crowd or not a.get("iscrowd", 0)]
        boxes = torch.tensor([a["bbox"] for a in anns], dtype=torch.float32).reshape(-1, 4)
        boxes[:, 2:] += boxes[:, :2]
        boxes[:, 0::2].clamp_(0, w)
        boxes[:, 1::2].clamp_(0, h)
        keep = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])  # zero-sized boxes teach nothing
        masks = None
        if self.index.need_masks:
            decoded = [self._mask(a, h, w) if k else None for a, k in zip(anns, keep, strict=True)]
            keep &= torch.tensor([m is not None for m in decoded], dtype=torch.bool)
            kept = [m for m in decoded if m is not None]
            masks = torch.from_numpy(np.stack(kept)) if kept else torch.zeros((0, h, w), dtype=torch.uint8)
        boxes = boxes[keep]
        labels = torch.tensor(
            [self.index.category_to_label[a["category_id"]] for a, k in zip(anns, keep, strict=True) if k],
            dtype=torch.int64,
        )
        if self._flip(i):
            image = image.flip(-1)
            boxes = torch.stack([w - boxes[:, 2], boxes[:, 1], w - boxes[:, 0], boxes[:, 3]], dim=1)
            if masks is not None:
                masks = masks.flip(-1)
        target: dict[str, Any] = {"boxes": boxes, "labels": labels, "image_id": img["id"]}
        if masks is not None:
            target["masks"] = masks
        return image, target


def collate(batch: Sequence[tuple[torch.Tensor, dict[str, Any]]]) -> tuple[list[torch.Tensor], list[dict[str, Any]]]:
    """DataLoader collate for detection: images differ in size, so keep lists."""
    images, targets = zip(*batch, strict=True) if batch else ((), ())
    return list(images), list(targets)
