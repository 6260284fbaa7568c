"""ssd's reference training set against the v2.0 reference (single_stage_detector/ssd/coco_utils.py): its
get_openimages keeps images without a usable box, while maskrcnn's reference (maskrcnn_benchmark COCODataset,
remove_images_without_annotations for training) and the mini scale drop them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from trainperf.workloads.common.detection import coco

# Three images: one box; no annotation at all; only boxes at most a pixel wide or tall (a crowd among them).
IMAGES = [("a.jpg", 0, 120, 90), ("b.jpg", 1, 64, 48), ("c.jpg", 2, 80, 60)]
ANNOTATIONS = [
    {"id": 0, "image_id": 0, "category_id": 1, "bbox": [12.0, 9.0, 60.0, 45.0], "area": 2700.0, "iscrowd": 0},
    {"id": 1, "image_id": 2, "category_id": 0, "bbox": [5.0, 5.0, 1.0, 30.0], "area": 30.0, "iscrowd": 0},
    {"id": 2, "image_id": 2, "category_id": 1, "bbox": [5.0, 5.0, 40.0, 0.5], "area": 20.0, "iscrowd": 1},
]


def _labels(categories, first_id):
    return {
        "info": {"description": "three images, two without a usable box"},
        "categories": [{"id": first_id + i, "name": n} for i, n in enumerate(categories)],
        "images": [{"id": i, "file_name": f, "width": w, "height": h} for f, i, w, h in IMAGES],
        "annotations": [{**a, "category_id": a["category_id"] + first_id, "segmentation": None} for a in ANNOTATIONS],
    }


def _images(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, _, w, h in IMAGES:
        Image.new("RGB", (w, h), (90, 140, 200)).save(folder / name, format="JPEG")


def _openimages(root: Path) -> None:
    """The MLPerf OpenImages layout (ids from 0, as MLCommons' export writes them)."""
    for split in ("train", "validation"):
        _images(root / split / "data")
        (root / split / "labels").mkdir(parents=True)
        (root / split / "labels" / "openimages-mlperf.json").write_text(
            json.dumps(_labels(["Airplane", "Antelope"], 0))
        )


def _workload(key, scale, data_dir):
    from trainperf import registry
    from trainperf.dist import DistContext
    from trainperf.spec import RunConfig

    spec, recipe = registry.get_spec(key, scale), registry.default_recipe(key, scale)
    return registry.workload_class(key)(spec, recipe, RunConfig(seed=1), data_dir=data_dir, dist=DistContext())


def test_ssd_reference_trains_on_every_openimages_image_as_get_openimages_does(tmp_path):
    _openimages(tmp_path / "ssd" / "reference")
    w = _workload("ssd", "reference", tmp_path)
    w.REFERENCE_CLASSES = None  # two classes stand in for the subset's 264
    w.load_data()
    assert (w.train_samples, w.eval_samples) == (3, 3)
    targets = {t["image_id"]: t for _, t in (w.train_set[i] for i in range(3))}
    assert targets[0]["labels"].tolist() == [1] and targets[1]["boxes"].shape == (0, 4)
    # the 1-pixel-wide box and the half-pixel-tall group box are still targets (only zero-sized ones are not)
    assert targets[2]["labels"].tolist() == [0, 1]


def test_a_retinanet_loss_takes_an_image_without_boxes():
    import torch

    from trainperf.workloads.common.detection import models

    torch.manual_seed(0)
    model = models.mini_retinanet(2).train()
    empty = {"boxes": torch.zeros((0, 4)), "labels": torch.zeros((0,), dtype=torch.int64)}
    losses = model([torch.rand(3, 96, 96)], [empty])
    assert all(torch.isfinite(v.detach()) for v in losses.values()) and float(losses["bbox_regression"].detach()) == 0.0


@pytest.mark.parametrize("remove, kept", [(True, [0]), (False, [0, 1, 2])])
def test_images_without_a_box_over_a_pixel_are_removed_only_when_asked(tmp_path, remove, kept):
    _openimages(tmp_path)
    index = coco.load_coco(*coco.openimages_mlperf_paths(tmp_path)[:2], need_masks=False)
    ds = coco.CocoDetection(index, train=True, keep_crowd=True, remove_unannotated=remove)
    assert [img["id"] for img in ds.images] == kept
    assert len(coco.CocoDetection(index, train=False)) == 3  # evaluation keeps every image in both references


def test_maskrcnn_reference_still_removes_them(tmp_path):
    # maskrcnn: COCO 2017's layout, as its reference's COCODataset(remove_images_without_annotations=is_train)
    root = tmp_path / "maskrcnn" / "reference"
    for split in ("train2017", "val2017"):
        _images(root / split)
        (root / "annotations").mkdir(parents=True, exist_ok=True)
        (root / "annotations" / f"instances_{split}.json").write_text(json.dumps(_labels(["person", "dog"], 1)))
    index = coco.load_coco(*coco.coco2017_paths(root)[:2], need_masks=False)
    assert [img["id"] for img in coco.CocoDetection(index, train=True).images] == [0]
