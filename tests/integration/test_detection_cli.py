"""ssd and maskrcnn through the `trainperf` command: bad annotations. (Their reference logs are judged by ruleset
2.0.0 on the smoke runs of tests/integration/test_smoke_runs.py.)"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys

import pytest

from trainperf.results import parse_run


def trainperf(*args, timeout=900):
    return subprocess.run(
        [sys.executable, "-m", "trainperf", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


def _scenes_with_own_annotations(data_dir, root):
    """A data folder whose mini scenes are the prepared ones (image folders linked) with copied
    annotation files and manifest, which a test may break."""
    from trainperf.workloads.common.detection import scenes

    src, dst = scenes.mini_root(data_dir), scenes.mini_root(root)
    dst.mkdir(parents=True)
    for split in scenes.SPLITS:
        (dst / split).symlink_to(src / split)
    shutil.copytree(src / "annotations", dst / "annotations")
    shutil.copy(src / scenes.MANIFEST, dst / scenes.MANIFEST)
    return root


@pytest.mark.parametrize("key", ["ssd", "maskrcnn"])
def test_bad_annotation_names_file_and_id_and_counts_the_run_as_aborted(tmp_path, data_dir, key):
    # Before the clock a run checks only that the files are there (the manifest); the annotation files
    # are parsed and validated on the clock, after run_start. A bad one stops the run there with one
    # clear error; the run had started, so it stays a result, aborted, counted as not converged.
    from trainperf.workloads.common.detection import coco, scenes

    bad = _scenes_with_own_annotations(data_dir, tmp_path / "data")
    _, _, val_json, _ = coco.mini_paths(bad)
    doc = json.loads(val_json.read_text())
    victim = doc["annotations"][3]
    victim["category_id"] = 99  # not declared in "categories"
    val_json.write_text(json.dumps(doc))
    # the manifest vouches for the edited file (as for a data set prepared by a faulty generator): the
    # checks before the clock pass, and the annotation's meaning is what is wrong
    manifest_path = scenes.mini_root(bad) / scenes.MANIFEST
    manifest = json.loads(manifest_path.read_text())
    name = "annotations/instances_val.json"
    manifest["files"][name] = hashlib.sha256(val_json.read_bytes()).hexdigest()
    manifest["sizes"][name] = val_json.stat().st_size
    manifest_path.write_text(json.dumps(manifest))
    r = trainperf("run", key, "--data-dir", bad, "--out", tmp_path / "o")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "instances_val.json" in r.stderr and f"annotation id {victim['id']}" in r.stderr and "99" in r.stderr
    assert "Traceback" not in r.stderr
    [kept] = list((tmp_path / "o" / "results").rglob("*.txt"))
    assert kept.name == "result_0.txt" and parse_run(kept).status == "aborted"
    assert "instances_val.json" in parse_run(kept).abort_reason
    assert not list((tmp_path / "o" / "results").rglob("*.partial"))
