"""Detection data (ssd, maskrcnn): mini scene generator, COCO loader and its errors, flips, COCO mAP, and
the workloads' data path (prepare, load_data, the training stream, evaluation)."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from pycocotools import mask as mask_utils

from trainperf.errors import DataError
from trainperf.workloads.common.detection import coco, scenes
from trainperf.workloads.resnet import mini_data as resnet_mini

SMALL = {"train_scenes": 20, "val_scenes": 10}


def _with_fashion_mnist(root: Path, data_dir: Path) -> Path:
    """A data folder whose resnet/ is the prepared Fashion-MNIST (linked, not copied)."""
    (root / "resnet").mkdir(parents=True)
    (root / resnet_mini.MINI_SUBDIR).symlink_to(resnet_mini.mini_dir(data_dir))
    return root


@pytest.fixture(scope="module")
def small_scenes(tmp_path_factory, data_dir) -> Path:
    """20 train and 10 val scenes, prepared once for this module (the one slow-ish test fixture)."""
    root = _with_fashion_mnist(tmp_path_factory.mktemp("scenes"), data_dir)
    written = scenes.prepare_mini(root, **SMALL)
    assert len(written) == 20 + 10 + 2 + 1  # PNGs, two json files, the manifest
    return root


@pytest.fixture
def scenes_copy(tmp_path, small_scenes) -> Path:
    import shutil

    root = _with_fashion_mnist(tmp_path / "data", small_scenes.resolve())
    shutil.copytree(scenes.mini_root(small_scenes), scenes.mini_root(root))
    return root


def _workload(key: str, scale: str, data_dir: Path, seed: int = 1):
    from trainperf import registry
    from trainperf.dist import DistContext
    from trainperf.spec import RunConfig

    spec, recipe = registry.get_spec(key, scale), registry.default_recipe(key, scale)
    return registry.workload_class(key)(spec, recipe, RunConfig(seed=seed), data_dir=data_dir, dist=DistContext())


# --- the generator ----------------------------------------------------------------------------------------
def test_prepare_is_idempotent_and_quiet(small_scenes, capsys):
    assert scenes.verify_mini(small_scenes, **SMALL) == []
    assert scenes.prepare_mini(small_scenes, **SMALL) == []
    assert capsys.readouterr() == ("", "")


def test_generation_is_deterministic_for_a_seed(tmp_path, data_dir, small_scenes):
    other = _with_fashion_mnist(tmp_path / "again", data_dir)
    scenes.prepare_mini(other, **SMALL)
    manifest = json.loads((scenes.mini_root(small_scenes) / scenes.MANIFEST).read_text())
    assert json.loads((scenes.mini_root(other) / scenes.MANIFEST).read_text()) == manifest
    assert manifest["version"] == scenes.GENERATOR_VERSION and manifest["seed"] == scenes.SEED
    xtr, ytr, _, _ = resnet_mini.load_mini(data_dir)
    a = scenes.compose_scene(np.random.default_rng(7), xtr[:500, 0].numpy(), ytr[:500].numpy())
    b = scenes.compose_scene(np.random.default_rng(8), xtr[:500, 0].numpy(), ytr[:500].numpy())
    assert not np.array_equal(a[0], b[0])


def test_scene_objects_stay_visible(data_dir):
    xte, yte = (t[:2000] for t in resnet_mini.load_mini(data_dir)[2:])
    rng = np.random.default_rng(0)
    counts = []
    for _ in range(100):
        image, objects = scenes.compose_scene(rng, xte[:, 0].numpy(), yte.numpy())
        assert image.shape == (96, 96, 3) and image.dtype == np.uint8
        counts.append(len(objects))
        for obj in objects:
            visible = int(obj.mask.sum())
            assert visible >= scenes.MIN_VISIBLE_AREA
            assert visible >= scenes.MIN_VISIBLE_FRACTION * obj.full_area
        free = ~np.any([o.mask for o in objects], axis=0)
        assert image[free].std(axis=0).max() > 3  # a textured background, not a flat colour
    assert min(counts) >= 1 and max(counts) == scenes.MAX_OBJECTS


def test_annotations_match_their_masks(small_scenes):
    train_json, train_dir, val_json, val_dir = scenes.mini_paths(small_scenes)
    data = json.loads(val_json.read_text())
    assert data["info"]["version"] == scenes.GENERATOR_VERSION and data["info"]["seed"] == scenes.SEED
    assert [c["name"] for c in data["categories"]] == list(scenes.CATEGORY_NAMES)
    assert [c["id"] for c in data["categories"]] == list(range(1, 11))
    assert len(data["images"]) == 10 and (val_dir / "000010.png").exists()
    per_image = np.bincount([a["image_id"] for a in data["annotations"]], minlength=11)[1:]
    assert per_image.min() >= 1 and per_image.max() <= 4
    for ann in data["annotations"]:
        assert isinstance(ann["segmentation"]["counts"], str)
        mask = mask_utils.decode(ann["segmentation"])
        assert int(mask.sum()) == ann["area"] >= scenes.MIN_VISIBLE_AREA
        rows, cols = np.nonzero(mask)
        x, y = cols.min(), rows.min()
        assert ann["bbox"] == [x, y, cols.max() + 1 - x, rows.max() + 1 - y]  # tight box of the visible mask


def test_verify_catches_changed_and_missing_files_and_prepare_repairs_them(scenes_copy):
    root = scenes.mini_root(scenes_copy)
    (root / "train" / "000003.png").write_bytes(b"not a png")
    (root / "val" / "000002.png").unlink()
    problems = scenes.verify_mini(scenes_copy, **SMALL)
    assert any("train/000003.png has the wrong checksum" in p for p in problems)
    assert any("val/000002.png is missing" in p for p in problems)
    assert any("records" in p for p in scenes.verify_mini(scenes_copy))  # default sizes: another dataset
    written = scenes.prepare_mini(scenes_copy, **SMALL)
    assert sorted(p.name for p in written) == ["000002.png", "000003.png", scenes.MANIFEST]
    assert scenes.verify_mini(scenes_copy, **SMALL) == []
    (root / scenes.MANIFEST).unlink()
    assert "missing" in scenes.verify_mini(scenes_copy, **SMALL)[0]


def test_registered_for_both_detection_benchmarks():
    import importlib

    from trainperf import registry

    data = registry.benchmark("ssd").mini_data
    assert data is registry.benchmark("maskrcnn").mini_data and data.needs == ("resnet",)

    def function(name: str):
        module, _, attr = name.partition(":")
        return getattr(importlib.import_module(module), attr)

    assert function(data.prepare) is scenes.prepare_mini and function(data.verify) is scenes.verify_mini


def test_a_run_hashes_only_the_scenes_changed_since_they_were_last_found_intact(scenes_copy, monkeypatch):
    from trainperf.data import verified

    hashed = []
    real = verified.sha256
    monkeypatch.setattr(verified, "sha256", lambda path: hashed.append(path) or real(path))
    monkeypatch.setattr(verified, "RACY_NS", 0)  # the scenes were written just now
    root = scenes.mini_root(scenes_copy)
    assert scenes.verify_mini(scenes_copy, **SMALL, trust_cache=True) == []
    assert len(hashed) == 20 + 10 + 2  # PNGs and annotation files: every file of the manifest
    hashed.clear()
    assert scenes.verify_mini(scenes_copy, **SMALL, trust_cache=True) == []
    assert hashed == []
    time.sleep(0.05)  # past one tick of the file system's clock
    png = root / "train" / "000003.png"
    png.write_bytes(bytes(255 - b for b in png.read_bytes()))  # the same size, other bytes
    problems = scenes.verify_mini(scenes_copy, **SMALL, trust_cache=True)
    assert hashed == [png] and problems == [f"{png} has the wrong checksum (corrupt or replaced)"]


def test_verify_without_checksums_reads_only_the_manifest(scenes_copy):
    root = scenes.mini_root(scenes_copy)
    (root / "train" / "000003.png").write_bytes(b"not a png")
    assert scenes.verify_mini(scenes_copy, **SMALL, checksums=False) == []
    (root / "val" / "000002.png").unlink()
    assert scenes.verify_mini(scenes_copy, **SMALL, checksums=False) == [f"{root / 'val' / '000002.png'} is missing"]


# --- the loader on the mini scenes ------------------------------------------------------------------------
def test_loader_serves_images_and_targets(small_scenes):
    train_json, train_dir, _, _ = scenes.mini_paths(small_scenes)
    index = coco.load_coco(train_json, train_dir, need_masks=True)
    assert index.num_classes == 10 and index.label_to_category[1] == 1
    ds = coco.CocoDetection(index, train=False)
    assert len(ds) == 20
    image, target = ds[0]
    assert image.shape == (3, 96, 96) and image.dtype == torch.float32 and 0 <= image.min() <= image.max() <= 1
    n = len(target["labels"])
    assert target["boxes"].shape == (n, 4) and target["boxes"].dtype == torch.float32
    assert target["labels"].dtype == torch.int64 and 1 <= int(target["labels"].min())
    assert target["masks"].shape == (n, 96, 96) and target["masks"].dtype == torch.uint8
    assert target["image_id"] == 1
    for box, mask in zip(target["boxes"], target["masks"], strict=True):
        rows, cols = torch.nonzero(mask, as_tuple=True)
        assert box.tolist() == [cols.min(), rows.min(), cols.max() + 1, rows.max() + 1]
    images, targets = coco.collate([ds[0], ds[1]])
    assert len(images) == len(targets) == 2 and targets[1]["image_id"] == 2
    boxes_only = coco.CocoDetection(coco.load_coco(train_json, train_dir, need_masks=False), train=False)
    assert "masks" not in boxes_only[0][1]


def test_horizontal_flip_moves_boxes_and_masks_with_the_image(small_scenes):
    index = coco.load_coco(*scenes.mini_paths(small_scenes)[:2], need_masks=True)
    plain = coco.CocoDetection(index, train=False)
    flipped = coco.CocoDetection(index, train=True, flip_prob=1.0)
    (image, target), (fimage, ftarget) = plain[3], flipped[3]
    assert torch.equal(fimage, image.flip(-1)) and torch.equal(ftarget["masks"], target["masks"].flip(-1))
    x0, y0, x1, y1 = target["boxes"].unbind(1)
    assert torch.equal(ftarget["boxes"], torch.stack([96 - x1, y0, 96 - x0, y1], 1))
    for box, mask in zip(ftarget["boxes"], ftarget["masks"], strict=True):  # still tight after the flip
        rows, cols = torch.nonzero(mask, as_tuple=True)
        assert box.tolist() == [cols.min(), rows.min(), cols.max() + 1, rows.max() + 1]


def test_flips_are_seeded_by_seed_and_epoch(small_scenes):
    index = coco.load_coco(*scenes.mini_paths(small_scenes)[:2], need_masks=False)

    def pattern(seed: int, epoch: int) -> list[bool]:
        ds = coco.CocoDetection(index, train=True, seed=seed)
        ds.set_epoch(epoch)
        return [ds._flip(i) for i in range(len(ds))]

    assert pattern(1, 0) == pattern(1, 0)
    assert pattern(1, 0) != pattern(1, 1) and pattern(1, 0) != pattern(2, 0)
    assert 3 <= sum(pattern(1, 0)) <= 17
    assert not any(coco.CocoDetection(index, train=False)._flip(i) for i in range(20))


def test_persistent_workers_see_the_epoch(small_scenes):
    # The reference loader keeps its worker processes for the whole run: set_epoch must reach them.
    index = coco.load_coco(*scenes.mini_paths(small_scenes)[:2], need_masks=False)
    ds = coco.CocoDetection(index, train=True, seed=1)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=len(ds), num_workers=1, persistent_workers=True, collate_fn=coco.collate
    )
    plain = [coco.CocoDetection(index, train=False)[i][0] for i in range(len(ds))]
    for epoch in (0, 1):
        ds.set_epoch(epoch)
        [(images, _)] = list(loader)
        flipped = [not torch.equal(im, p) for im, p in zip(images, plain, strict=True)]
        assert flipped == [ds._flip(i) for i in range(len(ds))]
    assert ds.epoch == 1


# --- reference layouts: COCO 2017 (polygons, crowd RLE) and the OpenImages MLPerf subset -----------------
def _jpeg(path: Path, width: int, height: int, mode: str = "RGB") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new(mode, (width, height), (90, 140, 200) if mode == "RGB" else 120).save(path, format="JPEG")


def _coco2017_annotations() -> dict:
    def rect(x, y, w, h):
        return [[x, y, x + w, y, x + w, y + h, x, y + h]]

    crowd = mask_utils.encode(np.asfortranarray(np.pad(np.ones((10, 20), np.uint8), ((30, 20), (5, 55)))))
    crowd_counts = [int(c) for c in mask_utils.decode(crowd).T.ravel()]  # build an uncompressed RLE from it
    runs, last, n = [], 0, 0
    for v in crowd_counts:
        if v != last:
            runs.append(n)
            last, n = v, 0
        n += 1
    runs.append(n)
    return {
        "info": {"description": "tiny COCO 2017"},
        "images": [
            {"id": 139, "file_name": "000000000139.jpg", "width": 80, "height": 60},
            {"id": 285, "file_name": "000000000285.jpg", "width": 64, "height": 48},
        ],
        "annotations": [
            {"id": 7, "image_id": 139, "category_id": 18, "bbox": [10, 5, 30, 20], "area": 600, "iscrowd": 0,
             "segmentation": rect(10, 5, 30, 20)},
            {"id": 8, "image_id": 139, "category_id": 1, "bbox": [50, 10, 20, 40], "area": 800, "iscrowd": 0,
             "segmentation": rect(50, 10, 20, 40) + [[60, 20, 61, 20]]},  # a sliver polygon, as COCO has
            {"id": 9, "image_id": 139, "category_id": 1, "bbox": [5, 30, 20, 10], "area": 200, "iscrowd": 1,
             "segmentation": {"size": [60, 80], "counts": runs}},
            {"id": 10, "image_id": 285, "category_id": 1, "bbox": [0, 0, 64, 48], "area": 3072, "iscrowd": 0,
             "segmentation": rect(0, 0, 64, 48)},
            {"id": 11, "image_id": 285, "category_id": 18, "bbox": [3, 4, 5, 0.0], "area": 0, "iscrowd": 0,
             "segmentation": [[3, 4, 8, 4, 8, 4, 3, 4]]},  # zero height: COCO train2017 has two of these
        ],
        "categories": [{"id": 1, "name": "person"}, {"id": 18, "name": "dog"}],
    }  # fmt: skip


@pytest.fixture
def coco2017(tmp_path) -> Path:
    root = tmp_path / "coco"
    for split in ("train2017", "val2017"):
        _jpeg(root / split / "000000000139.jpg", 80, 60)
        _jpeg(root / split / "000000000285.jpg", 64, 48, mode="L")  # COCO has grayscale images too
        (root / "annotations").mkdir(exist_ok=True)
        (root / "annotations" / f"instances_{split}.json").write_text(json.dumps(_coco2017_annotations()))
    return root


def test_coco2017_layout_with_polygons_and_crowds(coco2017):
    train_json, train_dir, val_json, val_dir = coco.coco2017_paths(coco2017)
    assert val_dir == coco2017 / "val2017" and train_json.name == "instances_train2017.json"
    index = coco.load_coco(val_json, val_dir, need_masks=True)
    assert index.category_to_label == {1: 1, 18: 2} and index.category_names == {1: "person", 18: "dog"}
    ds = coco.CocoDetection(index, train=False)
    image, target = ds[0]
    assert image.shape == (3, 60, 80)
    assert target["labels"].tolist() == [2, 1]  # the crowd (id 9) is left out of the targets
    assert target["boxes"].tolist() == [[10, 5, 40, 25], [50, 10, 70, 50]]
    assert target["masks"].shape == (2, 60, 80)
    assert 500 <= int(target["masks"][0].sum()) <= 700 and target["masks"][0, 15, 20] == 1
    gray, target = ds[1]
    assert gray.shape == (3, 48, 64) and torch.equal(gray[0], gray[2])  # grayscale became RGB
    assert target["labels"].tolist() == [1]  # the zero-height box (id 11) is no training target
    assert coco.CocoDetection(index, train=True, keep_crowd=True)[0][1]["labels"].tolist() == [2, 1, 1]


def _openimages_mlperf(root: Path) -> None:
    for split in ("train", "validation"):
        _jpeg(root / split / "data" / "000002b66c9c498e.jpg", 120, 90)
        labels = {  # as MLCommons' fiftyone_openimages.py writes it: ids from 0, iscrowd = IsGroupOf
            "info": {"description": "Exported from FiftyOne"},
            "licenses": [],
            "categories": [{"id": 0, "name": "Airplane", "supercategory": None},
                           {"id": 1, "name": "Antelope", "supercategory": None}],
            "images": [{"id": 0, "file_name": "000002b66c9c498e.jpg", "height": 90, "width": 120,
                        "license": None, "coco_url": None}],
            "annotations": [
                {"id": 0, "image_id": 0, "category_id": 1, "bbox": [12.0, 9.0, 60.0, 45.0], "segmentation": None,
                 "keypoints": None, "num_keypoints": None, "area": 2700.0, "iscrowd": 0, "IsGroupOf": False},
                {"id": 1, "image_id": 0, "category_id": 0, "bbox": [0.0, 0.0, 120.0, 90.0], "segmentation": None,
                 "keypoints": None, "num_keypoints": None, "area": 10800.0, "iscrowd": 1, "IsGroupOf": True},
            ],
        }  # fmt: skip
        (root / split / "labels").mkdir(parents=True)
        (root / split / "labels" / "openimages-mlperf.json").write_text(json.dumps(labels))


def test_openimages_mlperf_layout(tmp_path):
    root = tmp_path / "open-images-v6-mlperf"
    _openimages_mlperf(root)
    train_json, train_dir, val_json, val_dir = coco.openimages_mlperf_paths(root)
    assert (
        train_dir == root / "train" / "data" and val_json == root / "validation" / "labels" / "openimages-mlperf.json"
    )
    index = coco.load_coco(train_json, train_dir, need_masks=False)
    assert index.label_to_category == {1: 0, 2: 1}
    image, target = coco.CocoDetection(index, train=False)[0]
    assert image.shape == (3, 90, 120) and "masks" not in target
    assert target["labels"].tolist() == [2] and target["boxes"].tolist() == [[12, 9, 72, 54]]
    assert coco.CocoDetection(index, train=False, keep_crowd=True)[0][1]["labels"].tolist() == [2, 1]


def test_ssd_reference_trains_on_group_boxes_as_mlperf_does(tmp_path):
    _openimages_mlperf(tmp_path / "ssd" / "reference")
    w = _workload("ssd", "reference", tmp_path)
    w.REFERENCE_CLASSES = None  # two classes stand in for the subset's 264
    w.load_data()
    assert (w.train_samples, w.eval_samples) == (1, 1)
    # labels are the reference's: 0-based in the file's category order (its ids 0, 1 here)
    assert w.train_set[0][1]["labels"].tolist() == [1, 0]  # the IsGroupOf box (iscrowd=1) is a target
    assert w.val_set[0][1]["labels"].tolist() == [1]  # evaluation leaves crowds to COCOeval, as for COCO


# --- the ssd reference's labels, head and resize, against the MLPerf v2.0 reference ------------------------
def test_ssd_reference_labels_span_the_head_and_map_back_to_the_highest_category(tmp_path):
    from trainperf.workloads.common.detection import fixtures, models

    fixtures.write_openimages_mlperf(tmp_path / "ssd" / "reference")
    w = _workload("ssd", "reference", tmp_path)
    w.load_data()
    assert w.train_index.num_classes == models.OPENIMAGES_MLPERF_CLASSES == 264
    labels = {int(x) for i in range(len(w.train_set)) for x in w.train_set[i][1]["labels"]}
    assert max(labels) == 263 and min(labels) == 0  # within a head of 264 columns (no background column)
    results = coco.to_coco_results(
        w.val_set[0][1]["image_id"],
        torch.tensor([[20.0, 15.0, 100.0, 75.0], [0.0, 0.0, 10.0, 10.0]]),
        torch.tensor([0.9, 0.8]),
        torch.tensor([263, 0]),
        w.val_index,
    )
    assert [r["category_id"] for r in results] == [263, 0]
    assert 0 < coco.coco_map(w.val_index, results, "bbox") <= 1


def test_a_detection_of_an_unused_label_is_left_out_not_a_key_error(tmp_path):
    _openimages_mlperf(tmp_path)
    index = coco.load_coco(*coco.openimages_mlperf_paths(tmp_path)[:2], need_masks=False)  # labels 1, 2
    boxes = torch.tensor([[12.0, 9.0, 72.0, 54.0]] * 2)
    results = coco.to_coco_results(0, boxes, torch.tensor([0.9, 0.7]), torch.tensor([0, 2]), index)
    assert [r["category_id"] for r in results] == [1]


def test_ssd_reference_resizes_to_exactly_800x800_without_keeping_the_aspect_ratio():
    from trainperf.workloads.common.detection import models

    transform = models.reference_retinanet().transform.train()
    image = torch.rand(3, 100, 200)
    target = {"boxes": torch.tensor([[20.0, 10.0, 120.0, 60.0]]), "labels": torch.tensor([263])}
    batch, [out] = transform([image], [target])
    assert tuple(batch.tensors.shape) == (1, 3, 800, 800) and batch.image_sizes == [(800, 800)]
    assert out["boxes"].tolist() == [[80.0, 80.0, 480.0, 480.0]]  # x scaled by 4, y by 8
    detections = [{"boxes": torch.tensor([[80.0, 80.0, 480.0, 480.0]])}]
    transform.eval()  # detections map back to the original image's pixels
    [mapped] = transform.postprocess(detections, [(800, 800)], [(100, 200)])
    assert mapped["boxes"].tolist() == [[20.0, 10.0, 120.0, 60.0]]


def test_reference_prepare_checks_the_layout_and_finds_the_backbone(tmp_path):
    w = _workload("ssd", "reference", tmp_path)
    with pytest.raises(DataError, match="download_openimages_mlperf.sh"):
        w.prepare()
    _openimages_mlperf(tmp_path / "ssd" / "reference")
    w.prepare()  # nothing is parsed: the annotation files here declare 2 classes, not 264
    with pytest.raises(DataError, match=r"resnext50_32x4d-7cdf4587.pth not found"):
        w.build_model()
    with pytest.raises(DataError, match=r"declares 2 categories; the ssd model of this scale is built for 264"):
        w.load_data()


@pytest.mark.parametrize(
    ("paths", "missing", "says"),
    [
        (coco.coco2017_paths, "val2017", "train2017.zip"),
        (coco.openimages_mlperf_paths, "train/labels/openimages-mlperf.json", "download_openimages_mlperf.sh"),
        (coco.openimages_mlperf_paths, "validation/data", "validation"),
    ],
)
def test_missing_reference_folder_names_the_layout(tmp_path, paths, missing, says):
    for sub in (
        "train2017",
        "val2017",
        "annotations/instances_train2017.json",
        "annotations/instances_val2017.json",
        "train/data",
        "validation/data",
        "train/labels/openimages-mlperf.json",
        "validation/labels/openimages-mlperf.json",
    ):
        target = tmp_path / sub
        target.parent.mkdir(parents=True, exist_ok=True)
        target.mkdir() if "." not in target.name else target.write_text("{}")
    path = tmp_path / missing
    path.unlink() if path.is_file() else path.rmdir()
    with pytest.raises(DataError, match=rf"{path} not found.*{says}"):
        paths(tmp_path)


def test_mini_paths_say_how_to_prepare(tmp_path):
    with pytest.raises(DataError, match=r"instances_train.json not found.*trainperf data prepare ssd"):
        scenes.mini_paths(tmp_path)


# --- the workloads on the mini scenes ---------------------------------------------------------------------
def test_mini_prepare_checks_the_manifest_without_reading_samples(tmp_path, small_scenes):
    with pytest.raises(DataError, match=r"ssd mini data: .*MANIFEST.json is missing.*trainperf data prepare ssd"):
        _workload("ssd", "mini", tmp_path).prepare()
    with pytest.raises(DataError, match=r"maskrcnn mini data: .*MANIFEST.json records .*'train_scenes': 20"):
        _workload("maskrcnn", "mini", small_scenes).prepare()  # 20 scenes prepared, 8,000 expected


@pytest.mark.parametrize("key", ["ssd", "maskrcnn"])
def test_workload_loads_trains_and_evaluates_the_scenes(small_scenes, key):
    w = _workload(key, "mini", small_scenes)
    assert (w.train_samples, w.eval_samples) == (8000, 500)  # before load_data: the full dataset's sizes
    w.load_data()  # the manifest of these 20 scenes is not the real one's: load_data does not read it
    assert (w.train_samples, w.eval_samples) == (20, 10)
    batches = w.train_batches()
    assert w.train_batches() is batches  # one stream for the run
    per_epoch = 20 // w.local_batch_size
    taken = [next(batches) for _ in range(2 * per_epoch + 1)]  # past two epoch boundaries
    for images, targets in taken:
        assert len(images) == len(targets) == w.local_batch_size and images[0].shape == (3, 96, 96)
        assert ("masks" in targets[0]) == (key == "maskrcnn")
    ids = [[t["image_id"] for t in targets] for _, targets in taken]
    assert ids[:per_epoch] != ids[per_epoch : 2 * per_epoch]  # each epoch shuffles anew
    again = _workload(key, "mini", small_scenes)
    again.load_data()
    first = next(again.train_batches())
    assert [t["image_id"] for t in first[1]] == ids[0] and torch.equal(first[0][0], taken[0][0][0])
    torch.manual_seed(0)
    model = w.build_model()
    value = w.evaluate(model)  # an untrained model on the 10 val scenes
    assert set(value) == {f for f, _ in w.spec.fields} and all(0.0 <= v <= 1.0 for v in value.values())
    assert model.training
    w.close()
    w.close()


# --- bad annotation files ---------------------------------------------------------------------------------
def _ann(data: dict, ann_id: int) -> dict:
    return next(a for a in data["annotations"] if a["id"] == ann_id)


def _set(ann_id: int, key: str, value):
    def change(data):
        _ann(data, ann_id)[key] = value

    return change


def _drop(ann_id: int, key: str):
    def change(data):
        del _ann(data, ann_id)[key]

    return change


BAD_FILES = [
    ("top-level key", lambda d: d.pop("categories"), r"top-level key\(s\) categories missing"),
    ("missing bbox", _drop(8, "bbox"), r"annotation id 8 has no 'bbox'"),
    ("missing segmentation", _drop(7, "segmentation"), r"annotation id 7 has no 'segmentation'"),
    ("three numbers", _set(8, "bbox", [1, 2, 3]), r"annotation id 8 has bbox \[1, 2, 3\]; it must be 4 numbers"),
    ("text in bbox", _set(8, "bbox", [1, 2, "3", 4]), r"annotation id 8 has bbox .*must be 4 numbers"),
    ("negative width", _set(7, "bbox", [10, 5, -3, 20]), r"annotation id 7 has bbox .* negative width or height"),
    (
        "outside",
        _set(10, "bbox", [40, 0, 30, 48]),
        r"annotation id 10 has bbox \[40, 0, 30, 48\].*outside its image \(64x48",
    ),
    (
        "category",
        _set(7, "category_id", 99),
        r"annotation id 7 has category_id 99, which 'categories' does not declare",
    ),
    ("image", _set(7, "image_id", 4242), r"annotation id 7 refers to image id 4242, which 'images' does not declare"),
    ("duplicate annotation", _set(8, "id", 7), r"annotation id 7 is used twice"),
    ("duplicate image", lambda d: d["images"].append(dict(d["images"][0])), r"image id 139 is declared twice"),
    ("duplicate category", lambda d: d["categories"].append({"id": 18}), r"category id 18 is declared twice"),
    ("image size", lambda d: d["images"][1].update(width=0), r"image id 285 has width 0 and height 48"),
    ("segmentation type", _set(7, "segmentation", "polygon"), r"annotation id 7: segmentation is a str"),
    ("RLE size", _set(9, "segmentation", {"size": [1, 1], "counts": "1"}), r"annotation id 9: RLE size \[1, 1\]"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "message"), [b[1:] for b in BAD_FILES], ids=[b[0] for b in BAD_FILES])
def test_bad_annotation_file_names_file_and_annotation(coco2017, change, message):
    val_json, val_dir = coco.coco2017_paths(coco2017)[2:]
    data = _coco2017_annotations()
    change(data)
    val_json.write_text(json.dumps(data))
    with pytest.raises(DataError, match=message) as err:
        coco.load_coco(val_json, val_dir, need_masks=True)
    assert str(err.value).startswith(f"annotation file {val_json}: ")


def test_segmentation_is_only_required_for_masks(coco2017):
    val_json, val_dir = coco.coco2017_paths(coco2017)[2:]
    data = _coco2017_annotations()
    del data["annotations"][0]["segmentation"]
    val_json.write_text(json.dumps(data))
    assert len(coco.CocoDetection(coco.load_coco(val_json, val_dir, need_masks=False), train=False)) == 2


def test_malformed_json_says_line_and_column(coco2017):
    val_json, val_dir = coco.coco2017_paths(coco2017)[2:]
    val_json.write_text('{"images": [\n  {"id": 1,}\n]}')
    with pytest.raises(DataError, match=rf"{val_json} is not valid JSON: .* at line 2, column 12"):
        coco.load_coco(val_json, val_dir, need_masks=False)
    val_json.unlink()
    with pytest.raises(DataError, match=rf"annotation file {val_json} not found"):
        coco.load_coco(val_json, val_dir, need_masks=False)


def test_missing_image_file_is_found_at_load_time(coco2017):
    val_json, val_dir = coco.coco2017_paths(coco2017)[2:]
    (val_dir / "000000000285.jpg").unlink()
    with pytest.raises(DataError, match=r"image file .*val2017/000000000285.jpg of image id 285 in .* is missing"):
        coco.load_coco(val_json, val_dir, need_masks=False)


def test_corrupt_image_file_is_named_when_decoded(coco2017):
    val_json, val_dir = coco.coco2017_paths(coco2017)[2:]
    (val_dir / "000000000139.jpg").write_bytes(b"\xff\xd8\xff\xe0 truncated")
    ds = coco.CocoDetection(coco.load_coco(val_json, val_dir, need_masks=False), train=False)
    with pytest.raises(DataError, match=r"image file .*000000000139.jpg cannot be decoded"):
        ds[0]
    _jpeg(val_dir / "000000000139.jpg", 60, 60)
    with pytest.raises(DataError, match=r"000000000139.jpg is 60x60 but its annotation file says 80x60"):
        ds[0]


# --- evaluation -------------------------------------------------------------------------------------------
def _ground_truth_as_results(index: coco.CocoIndex, with_masks: bool) -> list[dict]:
    results = []
    for _, target in coco.CocoDetection(index, train=False):
        masks = target["masks"][:, None].float() if with_masks else None
        scores = torch.ones(len(target["labels"]))
        results += coco.to_coco_results(target["image_id"], target["boxes"], scores, target["labels"], index, masks)
    return results


def test_perfect_predictions_score_map_one(small_scenes, capsys):
    index = coco.load_coco(*scenes.mini_paths(small_scenes)[2:], need_masks=True)
    results = _ground_truth_as_results(index, with_masks=True)
    json.dumps(results)  # plain JSON types only
    assert results[0]["category_id"] in index.label_to_category.values()
    assert isinstance(results[0]["segmentation"]["counts"], str)
    assert coco.coco_map(index, results, "bbox") == pytest.approx(1.0)
    assert coco.coco_map(index.coco, results, "segm") == pytest.approx(1.0)
    assert coco.coco_map(index, [], "bbox") == 0.0
    worse = copy.deepcopy(results)
    for r in worse[::2]:
        r["bbox"][0] += r["bbox"][2] / 2  # half the boxes shifted by half their width
    assert 0.2 < coco.coco_map(index, worse, "bbox") < 0.8
    assert capsys.readouterr() == ("", "")


def _imperfect_results(index: coco.CocoIndex) -> list[dict]:
    """Detections with jittered boxes, some wrong labels, spread scores and one false positive an image."""
    g = torch.Generator().manual_seed(0)
    results = []
    for _, target in coco.CocoDetection(index, train=False):
        boxes = target["boxes"] + 4 * torch.randn(target["boxes"].shape, generator=g)
        boxes = torch.cat([boxes, torch.tensor([[10.0, 10, 40, 40]])])
        labels = torch.cat([target["labels"], torch.tensor([1])])
        labels[torch.rand(len(labels), generator=g) < 0.2] = 2
        masks = torch.cat([target["masks"], torch.zeros(1, *target["masks"].shape[1:], dtype=torch.uint8)])
        scores = torch.rand(len(labels), generator=g)
        results += coco.to_coco_results(target["image_id"], boxes, scores, labels, index, masks[:, None].float())
    return results


def test_resampled_image_sets_score_as_cocoeval_scores_them(small_scenes, capsys):
    from trainperf.workloads.common.detection.evaluation import ResampledMap, resampled

    index = coco.load_coco(*scenes.mini_paths(small_scenes)[2:], need_masks=True)
    results = _imperfect_results(index)
    ids = sorted(index.image_ids)
    rng = np.random.default_rng(0)
    for iou_type in ("bbox", "segm"):
        whole = coco.coco_map(index, results, iou_type)
        assert 0.05 < whole < 0.95
        fast = ResampledMap(index, results, iou_type)
        assert fast(ids) == pytest.approx(whole, abs=1e-12)  # the whole set, drawn once each
        gt, drawn = resampled(index, results, ids)
        assert coco.coco_map(gt, drawn, iou_type) == pytest.approx(whole, abs=1e-12)
        for _ in range(4):  # with repeats: an image drawn twice counts twice
            draw = [ids[i] for i in rng.integers(0, len(ids), size=len(ids))]
            gt, drawn = resampled(index, results, draw)
            assert len(gt.getImgIds()) == len(draw)
            assert len(drawn) == sum(sum(r["image_id"] == i for r in results) for i in draw)
            assert coco.coco_map(gt, drawn, iou_type) == pytest.approx(fast(draw), abs=1e-12)
    gt, _ = resampled(index, results, ids + ids)
    assert len(gt.getAnnIds()) == 2 * len(index.coco.getAnnIds())
    assert min(gt.getAnnIds()) >= 1  # COCOeval reads a matched ground-truth id of 0 as no match
    assert len(index.coco.getImgIds()) == len(ids)  # the original is left as it was
    assert capsys.readouterr() == ("", "")


def test_perfect_predictions_against_polygons_and_crowds(coco2017):
    val_json, val_dir = coco.coco2017_paths(coco2017)[2:]
    data = _coco2017_annotations()
    data["annotations"] = [a for a in data["annotations"] if a["id"] != 11]  # no model can find a 0-px box
    val_json.write_text(json.dumps(data))
    index = coco.load_coco(val_json, val_dir, need_masks=True)
    results = _ground_truth_as_results(index, with_masks=True)
    assert len(results) == 3  # the crowd is ignored by COCOeval, not a miss
    assert coco.coco_map(index, results, "bbox") == pytest.approx(1.0)
    assert coco.coco_map(index, results, "segm") == pytest.approx(1.0)


def test_results_for_unknown_images_are_refused(small_scenes):
    index = coco.load_coco(*scenes.mini_paths(small_scenes)[2:], need_masks=False)
    results = coco.to_coco_results(999, torch.tensor([[1.0, 2, 30, 40]]), torch.tensor([0.9]), torch.tensor([3]), index)
    assert results == [{"image_id": 999, "category_id": 3, "bbox": [1.0, 2.0, 29.0, 38.0], "score": pytest.approx(0.9)}]
    with pytest.raises(ValueError, match="image ids the ground truth lacks: \\[999\\]"):
        coco.coco_map(index, results, "bbox")


def test_undecodable_polygon_is_named_when_decoded(coco2017):
    val_json, val_dir = coco.coco2017_paths(coco2017)[2:]
    data = _coco2017_annotations()
    _ann(data, 10)["segmentation"] = [[0, 0, 64, 0, 64, None]]
    val_json.write_text(json.dumps(data))
    ds = coco.CocoDetection(coco.load_coco(val_json, val_dir, need_masks=True), train=False)
    with pytest.raises(DataError, match=r"instances_val2017.json: annotation id 10 has a segmentation .* finite"):
        ds[1]


def test_maskrcnn_smoke_fixture_is_coco2017_with_all_80_categories_and_crowds(tmp_path):
    from trainperf.workloads.common.detection import fixtures
    from trainperf.workloads.maskrcnn.model import COCO_CLASSES

    fixtures.write_coco2017(tmp_path / "maskrcnn" / "reference")
    w = _workload("maskrcnn", "reference", tmp_path)
    w.load_data()
    assert w.train_index.num_classes == 80 and max(w.train_index.category_to_label) == 90
    assert w.train_index.category_to_label[90] == 80 == COCO_CLASSES - 1  # the head's last class (0: background)
    crowds = [a for anns in w.val_index.annotations.values() for a in anns if a["iscrowd"]]
    assert crowds and isinstance(crowds[0]["segmentation"]["counts"], list)  # uncompressed RLE, as COCO's
    image, target = w.train_set[0]
    assert target["labels"].tolist() == [80, 1]  # the crowd region is no training target
    assert target["masks"].shape == (2, *image.shape[1:]) and int(target["masks"].sum()) > 0
    first_val = w.val_set[0][1]["image_id"]
    result = coco.to_coco_results(
        first_val, torch.tensor([[20.0, 15.0, 100.0, 75.0]]), torch.tensor([0.9]), torch.tensor([80]), w.val_index
    )
    assert result[0]["category_id"] == 90 and 0 < coco.coco_map(w.val_index, result, "bbox") <= 1
