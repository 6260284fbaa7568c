"""benchmarks/data_throughput.py and benchmarks/gpu_decode_check.py: the published rate each loader is held to,
the verdict, and the prepared GPU check run on its CPU twin."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def throughput():
    return _load("data_throughput")


def test_a_benchmark_without_an_h200_result_is_held_to_nvidias_fastest_8_accelerator_one(throughput):
    assert throughput.published("resnet")["accelerator"] == "H200"
    mask = throughput.published("maskrcnn")  # retired before v4.0: no H200 result
    assert mask is not None and "H200" not in mask["accelerator"] and mask["samples_per_second_per_gpu"] > 0


def test_the_verdict_is_the_cores_one_gpu_needs_against_14(throughput):
    slow = throughput.Case("resnet", "resnet", 16, 1, "JPEGs", iter(()), rates=[200.0, 300.0, 250.0])
    row = throughput.row_of(slow)
    assert row["samples_per_second_per_core"] == 250.0
    assert row["cores_per_gpu"] == pytest.approx(row["nvidia"]["samples_per_second_per_gpu"] / 250.0)
    assert row["keeps_up_at_14"] is False
    fast = throughput.row_of(throughput.Case("bert", "bert", 56, 1, "HDF5", iter(()), rates=[1e5]))
    assert fast["keeps_up_at_14"] is True
    table = throughput.markdown([row, fast, {"benchmark": "minigo", "not_measured": "self-play"}])
    assert "| resnet | 250.0 (200.0, 300.0, 250.0) |" in table and "| **no** |" in table
    assert "| minigo | not measured: self-play |" in table


def test_an_unknown_benchmark_is_refused_before_any_fixture_is_written(throughput, capsys):
    with pytest.raises(SystemExit) as e:
        throughput.main(["--benchmarks", "resnet,imagenet"])
    assert e.value.code == 2 and "imagenet: choose among resnet, ssd" in capsys.readouterr().err


def test_the_gpu_decode_check_runs_on_its_cpu_twin(tmp_path):
    check = _load("gpu_decode_check")
    assert check.main(["--cpu-check", "--repeats", "1", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "gpu_decode.json").read_text())
    assert result["batch"] == 8 and result["device"] == "cpu"
    assert result["share_equal"] == 1.0 and result["max_abs_difference"] == 0.0  # the twin is the CPU path
    assert result["worker_images_per_second_per_core"] > 0 and result["device_images_per_second"] > 0
    assert result["nvidia"]["accelerator"] == "H200" and result["worker_cores_per_gpu"] > 0
