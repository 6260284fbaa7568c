"""Tiny detection data sets in the reference layouts, for reference smoke runs (``trainperf run --smoke``).

Each writes real files (JPEGs, COCO json) in the layout the real data set has on disk, small enough for
a few training steps and a full evaluation on a CPU, and with what the real data holds that a loader can
trip on: the highest category id, crowd (group) boxes, images of several sizes and aspect ratios.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

OPENIMAGES_MLPERF_CATEGORIES = 264  # the MLPerf subset's classes; FiftyOne's COCO export numbers them 0..263

# (width, height) of each image and its boxes (x, y, w, h, category id, IsGroupOf).
_OPENIMAGES_SPLITS: dict[str, list[tuple[tuple[int, int], list[tuple[int, int, int, int, int, bool]]]]] = {
    "train": [
        ((160, 120), [(10, 12, 70, 60, 263, False), (90, 40, 60, 70, 0, False)]),
        ((96, 128), [(8, 20, 60, 80, 131, False), (0, 0, 96, 128, 263, True)]),
        ((200, 100), [(30, 10, 80, 70, 263, False)]),
        ((120, 120), [(20, 20, 50, 50, 7, False), (60, 50, 55, 60, 0, False)]),
    ],
    "validation": [
        ((150, 100), [(20, 15, 80, 60, 263, False), (100, 30, 45, 60, 0, False), (0, 0, 150, 100, 131, True)]),
        ((100, 140), [(10, 40, 70, 80, 263, False)]),
    ],
}


def _jpeg(path: Path, width: int, height: int, boxes: list[tuple[int, ...]], rng: np.random.Generator) -> None:
    from PIL import Image

    pixels = rng.integers(90, 140, (height, width, 3)).astype(np.uint8)
    for x, y, w, h, category, _ in boxes:  # each object a block of its category's colour
        colour = np.array([(37 * category) % 256, (91 * category) % 256, (151 * category + 60) % 256])
        pixels[y : y + h, x : x + w] = colour.astype(np.uint8)
    Image.fromarray(pixels, "RGB").save(path, "JPEG", quality=90)


def write_openimages_mlperf(root: Path) -> str:
    """The MLPerf OpenImages subset's layout under ``root``: ``{train,validation}/data/*.jpg`` and
    ``{train,validation}/labels/openimages-mlperf.json`` (COCO json as MLCommons'
    ``fiftyone_openimages.py`` writes it: categories 0..263, ``IsGroupOf`` boxes marked ``iscrowd: 1``)."""
    rng = np.random.default_rng(0)
    categories = [
        {"id": i, "name": f"MLPerf class {i}", "supercategory": None} for i in range(OPENIMAGES_MLPERF_CATEGORIES)
    ]
    image_id = annotation_id = 1
    for split, images in _OPENIMAGES_SPLITS.items():
        (root / split / "data").mkdir(parents=True, exist_ok=True)
        (root / split / "labels").mkdir(parents=True, exist_ok=True)
        doc: dict[str, Any] = {"info": {}, "licenses": [], "categories": categories, "images": [], "annotations": []}
        for (width, height), boxes in images:
            name = f"{split}{image_id:04x}.jpg"
            _jpeg(root / split / "data" / name, width, height, boxes, rng)
            doc["images"].append({"id": image_id, "file_name": name, "width": width, "height": height})
            for x, y, w, h, category, group in boxes:
                doc["annotations"].append(
                    {
                        "id": annotation_id,
                        "image_id": image_id,
                        "category_id": category,
                        "bbox": [float(x), float(y), float(w), float(h)],
                        "area": float(w * h),
                        "iscrowd": int(group),
                        "IsGroupOf": group,
                        "segmentation": None,
                    }
                )
                annotation_id += 1
            image_id += 1
        (root / split / "labels" / "openimages-mlperf.json").write_text(json.dumps(doc))
    counts = {split: len(images) for split, images in _OPENIMAGES_SPLITS.items()}
    return (
        f"{counts['train']} train and {counts['validation']} validation JPEGs of several aspect ratios, "
        f"{OPENIMAGES_MLPERF_CATEGORIES} categories with boxes of the highest id, 263, and group boxes; "
        "no pretrained backbone: the model starts from random weights"
    )


# COCO 2017's 80 category ids (1..90 with the ten ids the 2014 paper dropped left out).
COCO2017_CATEGORY_IDS = tuple(i for i in range(1, 91) if i not in (12, 26, 29, 30, 45, 66, 68, 69, 71, 83))

# (width, height) of each image and its objects (x, y, w, h, category id, iscrowd).
_COCO_SPLITS: dict[str, list[tuple[tuple[int, int], list[tuple[int, int, int, int, int, bool]]]]] = {
    "train2017": [
        ((160, 120), [(10, 12, 70, 60, 90, False), (90, 40, 60, 70, 1, False), (0, 80, 60, 40, 1, True)]),
        ((96, 128), [(8, 20, 60, 80, 44, False)]),
        ((200, 100), [(30, 10, 80, 70, 90, False), (120, 20, 60, 60, 62, True)]),
        ((120, 120), [(20, 20, 50, 50, 7, False), (60, 50, 55, 60, 1, False)]),
    ],
    "val2017": [
        ((150, 100), [(20, 15, 80, 60, 90, False), (100, 30, 45, 60, 1, False), (0, 0, 60, 40, 44, True)]),
        ((100, 140), [(10, 40, 70, 80, 90, False)]),
    ],
}


def _crowd_rle(x: int, y: int, w: int, h: int, width: int, height: int) -> dict[str, Any]:
    """An uncompressed RLE (column-major run lengths, as COCO stores crowds) of a box-shaped region."""
    mask = np.zeros((height, width), dtype=np.uint8)
    mask[y : y + h, x : x + w] = 1
    flat = mask.flatten(order="F")
    counts, current, run = [], 0, 0
    for value in flat:
        if value != current:
            counts.append(run)
            current, run = value, 0
        run += 1
    counts.append(run)
    return {"size": [height, width], "counts": counts}


def write_coco2017(root: Path) -> str:
    """COCO 2017 as cocodataset.org ships it under ``root``: ``train2017/*.jpg``, ``val2017/*.jpg`` and
    ``annotations/instances_{train,val}2017.json`` with all 80 categories (ids up to 90, with gaps),
    polygon masks, and crowd regions as uncompressed RLE."""
    rng = np.random.default_rng(0)
    names = {i: f"COCO category {i}" for i in COCO2017_CATEGORY_IDS}
    categories = [{"id": i, "name": names[i], "supercategory": "thing"} for i in COCO2017_CATEGORY_IDS]
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    image_id = annotation_id = 1
    for split, images in _COCO_SPLITS.items():
        (root / split).mkdir(parents=True, exist_ok=True)
        doc: dict[str, Any] = {"info": {}, "licenses": [], "categories": categories, "images": [], "annotations": []}
        for (width, height), objects in images:
            name = f"{image_id:012d}.jpg"
            _jpeg(root / split / name, width, height, objects, rng)
            doc["images"].append({"id": image_id, "file_name": name, "width": width, "height": height})
            for x, y, w, h, category, crowd in objects:
                if crowd:
                    segmentation: Any = _crowd_rle(x, y, w, h, width, height)
                else:  # a diamond inside the box
                    cx, cy = x + w / 2, y + h / 2
                    segmentation = [[cx, float(y), float(x + w), cy, cx, float(y + h), float(x), cy]]
                doc["annotations"].append(
                    {
                        "id": annotation_id,
                        "image_id": image_id,
                        "category_id": category,
                        "bbox": [float(x), float(y), float(w), float(h)],
                        "area": float(w * h) / (1 if crowd else 2),
                        "iscrowd": int(crowd),
                        "segmentation": segmentation,
                    }
                )
                annotation_id += 1
            image_id += 1
        kind = split.removesuffix("2017")
        (root / "annotations" / f"instances_{kind}2017.json").write_text(json.dumps(doc))
    counts = {split: len(images) for split, images in _COCO_SPLITS.items()}
    return (
        f"{counts['train2017']} train and {counts['val2017']} val JPEGs, all 80 categories (ids up to 90), "
        "polygon masks and crowd regions; no pretrained backbone: the model starts from random weights"
    )
