"""The mini data is checked against its manifest before the clock, cheaply: sizes always, hashes only of files that
changed since they were last found intact; a corrupted file (well-formed, with the same size) is refused before
run_start, naming the file and the fix."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from trainperf import registry
from trainperf.data import verified
from trainperf.dist import DistContext
from trainperf.errors import DataError
from trainperf.harness.mllog import RunLog
from trainperf.harness.runner import Submission, execute_run
from trainperf.results import read_mllog
from trainperf.spec import RunConfig
from trainperf.workloads.resnet import mini_data as resnet_mini

RACY_NS = verified.RACY_NS
TICK_S = 0.05  # longer than one tick of the file system's clock (ext4: at most 10 ms)


@pytest.fixture
def hashed(monkeypatch) -> list[Path]:
    """Every file hashed, in order; files are recorded however recently written (the tests write them just now)."""
    calls: list[Path] = []
    real = verified.sha256

    def counting(path: Path) -> str:
        calls.append(Path(path))
        return real(path)

    monkeypatch.setattr(verified, "sha256", counting)
    monkeypatch.setattr(verified, "RACY_NS", 0)
    return calls


def files(root: Path, n: int = 3) -> dict[str, verified.Expected]:
    manifest = {}
    for i in range(n):
        path = root / "sub" / f"f{i}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes([i]) * (100 + i))
        manifest[f"sub/f{i}.bin"] = verified.Expected(sha256=verified.sha256(path), size=100 + i)
    return manifest


def test_a_second_check_hashes_nothing_and_a_changed_file_is_hashed_again(tmp_path, hashed):
    manifest = files(tmp_path)
    hashed.clear()
    assert verified.check_files(tmp_path, manifest) == []
    assert len(hashed) == 3
    cache = json.loads((tmp_path / verified.CACHE).read_text())
    assert sorted(cache["files"]) == sorted(manifest)
    hashed.clear()
    assert verified.check_files(tmp_path, manifest) == []
    assert hashed == []  # a stat of each file, no read
    time.sleep(TICK_S)
    changed = tmp_path / "sub" / "f1.bin"
    changed.write_bytes(b"\xff" * 101)  # same size, other bytes
    problems = verified.check_files(tmp_path, manifest)
    assert hashed == [changed]
    assert problems == [f"{changed} has the wrong checksum (corrupt or replaced)"]
    assert "sub/f1.bin" not in json.loads((tmp_path / verified.CACHE).read_text())["files"]


def test_a_time_set_back_by_hand_is_still_seen(tmp_path, hashed):
    manifest = files(tmp_path)
    assert verified.check_files(tmp_path, manifest) == []
    path = tmp_path / "sub" / "f0.bin"
    st = path.stat()
    time.sleep(TICK_S)
    path.write_bytes(b"\x07" * 100)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size and modification time; the change time moved
    hashed.clear()
    assert verified.check_files(tmp_path, manifest) == [f"{path} has the wrong checksum (corrupt or replaced)"]


def test_sizes_are_checked_without_reading(tmp_path, hashed):
    manifest = files(tmp_path)
    path = tmp_path / "sub" / "f2.bin"
    path.write_bytes(b"short")
    (tmp_path / "sub" / "f0.bin").unlink()
    hashed.clear()
    problems = verified.check_files(tmp_path, manifest)
    assert problems == [
        f"{tmp_path / 'sub' / 'f0.bin'} is missing",
        f"{path} has the wrong checksum (corrupt or replaced: 5 bytes, the manifest says 102)",
    ]
    assert hashed == [tmp_path / "sub" / "f1.bin"]


def test_a_file_written_just_before_it_was_hashed_is_hashed_again(tmp_path, hashed, monkeypatch):
    monkeypatch.setattr(verified, "RACY_NS", RACY_NS)
    manifest = files(tmp_path)
    hashed.clear()
    assert verified.check_files(tmp_path, manifest) == []
    assert verified.check_files(tmp_path, manifest) == []
    assert len(hashed) == 6  # modified within RACY_NS of being hashed: not recorded


def test_the_cache_is_a_shortcut_only(tmp_path, hashed):
    manifest = files(tmp_path)
    (tmp_path / verified.CACHE).write_text("{not json")
    hashed.clear()
    assert verified.check_files(tmp_path, manifest) == []
    assert len(hashed) == 3
    hashed.clear()
    assert verified.check_files(tmp_path, manifest, trust_cache=False) == []  # `trainperf data verify`
    assert len(hashed) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([verified.CACHE, "sub"])  # no temporary file left


# --- the mini resnet data, before the clock ----------------------------------------------------------------
@pytest.fixture
def mini_copy(tmp_path, data_dir):
    dest = tmp_path / "data"
    shutil.copytree(resnet_mini.mini_dir(data_dir), resnet_mini.mini_dir(dest))
    return dest


def test_the_resnet_manifest_gives_each_file_its_size(data_dir):
    for f in resnet_mini.MINI_FILES:
        assert (resnet_mini.mini_dir(data_dir) / f.name).stat().st_size == f.size


def test_an_inverted_image_file_is_refused_before_run_start(tmp_path, mini_copy, hashed):
    """The test images inverted (255 - pixel): the same size, a valid IDX file that loads, and a checksum that
    differs."""
    assert resnet_mini.verify_mini(mini_copy, trust_cache=True) == []  # recorded as intact
    path = resnet_mini.mini_dir(mini_copy) / "t10k-images-idx3-ubyte"
    time.sleep(TICK_S)
    raw = np.fromfile(path, dtype=np.uint8)
    raw[16:] = 255 - raw[16:]
    raw.tofile(path)
    resnet_mini.load_mini(mini_copy)  # well-formed: the loader alone would train on it
    hashed.clear()
    log_path = tmp_path / "log.txt"
    log = RunLog(log_path)
    try:
        with pytest.raises(DataError) as info:
            execute_run(
                registry.workload_class("resnet"),
                registry.get_spec("resnet", "mini"),
                registry.default_recipe("resnet", "mini"),
                RunConfig(seed=1),
                log=log,
                submission=Submission(org="acme", platform="box", status="research"),
                data_dir=mini_copy,
                dist=DistContext(),
            )
    finally:
        log.close()
    assert hashed == [path]  # the other three files were not read again
    message = str(info.value)
    assert f"{path} has the wrong checksum (corrupt or replaced)" in message
    assert "trainperf data prepare resnet" in message
    keys = [r["key"] for r in read_mllog(log_path)]
    assert "init_start" in keys and "run_start" not in keys
    assert resnet_mini.prepare_mini(mini_copy) == [path]  # the fix the message names repairs it
    assert resnet_mini.verify_mini(mini_copy, trust_cache=True) == []


def test_a_manifest_checked_whole_lists_only_files_inside_its_folder(tmp_path):
    """check_manifest: the settings must be the generator's, the files those asked for and inside the folder."""
    import json

    from trainperf.data.verified import check_manifest, sha256

    (tmp_path / "a.bin").write_bytes(b"abc")
    good = {"generator": "g1", "files": {"a.bin": {"bytes": 3, "sha256": sha256(tmp_path / "a.bin")}}}
    path = tmp_path / "manifest.json"
    for doc, names, problem in (
        (good, ("a.bin",), None),
        (good, None, None),
        ({**good, "generator": "g0"}, None, "another generator version"),
        (good, ("a.bin", "b.bin"), "does not list"),
        ({**good, "files": {"../a.bin": good["files"]["a.bin"]}}, None, "does not list"),
        ({**good, "files": {}}, None, "does not list"),
    ):
        path.write_text(json.dumps(doc))
        got = check_manifest(path, "run it again", {"generator": "g1"}, names, trust_cache=False)
        assert (got == []) if problem is None else (len(got) == 1 and problem in got[0]), (doc, got)
    path.unlink()
    assert "missing" in check_manifest(path, "run it again", {}, trust_cache=False)[0]
