"""ssd's pretrained backbone is identified as the reference's file (torchvision's V1 ResNeXt50-32x4d,
resnext50_32x4d-7cdf4587.pth) by the SHA-512 the reference's download_backbone.sh checks: any other file, however
well it loads, is refused in the closed division and warned about in the open one."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from trainperf import registry
from trainperf.dist import DistContext
from trainperf.errors import RuleError, TrainperfWarning
from trainperf.spec import RunConfig
from trainperf.workloads.ssd import backbone


def _workload(data_dir: Path, division: str):
    spec, recipe = registry.get_spec("ssd", "reference"), registry.default_recipe("ssd", "reference")
    config = RunConfig(seed=1, division=division)
    return registry.workload_class("ssd")(spec, recipe, config, data_dir=data_dir, dist=DistContext())


def _other_weights(tmp_path: Path) -> Path:
    """A file in the reference's place that is not the reference's (as torchvision's V2 weights would be)."""
    root = tmp_path / "ssd" / "reference"
    for split in ("train", "validation"):  # the layout prepare() checks; nothing in it is parsed there
        (root / split / "data").mkdir(parents=True)
        (root / split / "labels").mkdir()
        (root / split / "labels" / "openimages-mlperf.json").write_text("{}")
    path = root / backbone.REFERENCE_FILE
    path.write_bytes(b"not the reference's weights")
    return path


def test_the_default_backbone_file_is_the_reference_s_name():
    from trainperf.workloads.ssd.workload import SSDWorkload

    assert SSDWorkload.BACKBONE_FILE == "resnext50_32x4d-7cdf4587.pth"
    assert backbone.REFERENCE_URL == "https://download.pytorch.org/models/resnext50_32x4d-7cdf4587.pth"


def test_closed_division_refuses_another_backbone_naming_the_file_and_where_to_get_it(tmp_path):
    path = _other_weights(tmp_path)
    with pytest.raises(RuleError) as e:
        _workload(tmp_path, "closed").prepare()
    msg = str(e.value)
    assert str(path) in msg and "resnext50_32x4d-7cdf4587.pth" in msg and backbone.REFERENCE_URL in msg
    assert "--division open" in msg


def test_open_division_warns_and_goes_on(tmp_path):
    _other_weights(tmp_path)
    w = _workload(tmp_path, "open")
    with pytest.warns(TrainperfWarning, match="resnext50_32x4d-7cdf4587.pth"):
        w.prepare()
    assert w._backbone is not None  # build_model loads it


def test_the_reference_s_file_passes_in_the_closed_division(tmp_path, monkeypatch):
    path = _other_weights(tmp_path)
    monkeypatch.setattr(backbone, "REFERENCE_SHA512", hashlib.sha512(path.read_bytes()).hexdigest())
    _workload(tmp_path, "closed").prepare()


def test_the_checksum_is_the_reference_s():
    # single_stage_detector/scripts/download_backbone.sh:4 @ a0671ab8
    assert backbone.REFERENCE_SHA512.startswith("15c9f0bc1c8d6475") and len(backbone.REFERENCE_SHA512) == 128
    assert backbone.REFERENCE_SHA512.endswith("5fecd8a13")
