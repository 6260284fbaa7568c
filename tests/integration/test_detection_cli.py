"""ssd and maskrcnn through the `trainperf` command: reference dry runs judged by ruleset 2.0.0, bad annotations."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from trainperf.rules.compliance import check_log, is_target_only_failure


def trainperf(*args, timeout=900):
    return subprocess.run(
        [sys.executable, "-m", "trainperf", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.parametrize(("key", "tensors"), [("ssd", 89), ("maskrcnn", 21)])
def test_reference_dry_run_fails_ruleset_2_only_on_the_target(tmp_path, key, tensors):
    r = trainperf("run", key, "--scale", "reference", "--dry-run", "--out", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    [log] = list((tmp_path / "o" / "results").rglob("result_0.txt"))
    res = check_log(log)
    assert res.scale == "reference" and res.ruleset == "2.0.0"
    assert not res.passed
    assert is_target_only_failure(res), res.problems
    assert log.read_text().count('"weights_initialization"') == tensors


@pytest.fixture(scope="module")
def small_scenes(tmp_path_factory, data_dir):
    """A small copy of the mini detection data (20 train, 5 val scenes) that a test may break."""
    from trainperf.workloads.detection import coco
    from trainperf.workloads.resnet import data as resnet_data

    root = tmp_path_factory.mktemp("scenes")
    shutil.copytree(resnet_data.mini_dir(data_dir), resnet_data.mini_dir(root))
    coco.prepare_mini(root, train_scenes=20, val_scenes=5)
    return root


@pytest.mark.parametrize("key", ["ssd", "maskrcnn"])
def test_bad_annotation_names_file_and_id_and_writes_no_result(tmp_path, small_scenes, key):
    from trainperf.workloads.detection import coco

    bad = tmp_path / "data"
    shutil.copytree(small_scenes, bad)
    _, _, val_json, _ = coco.mini_paths(bad)
    doc = json.loads(val_json.read_text())
    victim = doc["annotations"][3]
    victim["category_id"] = 99  # not declared in "categories"
    val_json.write_text(json.dumps(doc))
    r = trainperf("run", key, "--data-dir", bad, "--out", tmp_path / "o")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "instances_val.json" in r.stderr and str(victim["id"]) in r.stderr and "99" in r.stderr
    assert not list((tmp_path / "o" / "results").rglob("*.txt"))
    assert not list((tmp_path / "o" / "results").rglob("*.partial"))
