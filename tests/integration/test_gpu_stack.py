"""benchmarks/gpu_stack.py, the prepared GPU check, run on a CPU at toy sizes: the ablation it starts, the table
and JSON it writes, and NVIDIA's published per-GPU rate beside them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gpu_stack():
    spec = importlib.util.spec_from_file_location("gpu_stack", ROOT / "benchmarks" / "gpu_stack.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_published_rate_is_derived_from_the_table_and_the_rcps(gpu_stack):
    r = gpu_stack.published_rate("resnet")
    # NVIDIA's fastest closed 8 x H200 ResNet-50 in the shipped table: 12.027 min (v4.0); 35.2 epochs of ImageNet
    # at batch 3,264 (the RCP mean): about 7.8k images/s per GPU, the figure MLPerf's readers quote (7.7k).
    assert r["minutes"] == pytest.approx(12.027) and r["global_batch"] == 3264
    assert r["samples_per_second_per_gpu"] == pytest.approx(35.2 * 1_281_167 / (12.027 * 60) / 8)
    b = gpu_stack.published_rate("bert")
    assert b["global_batch"] == 448 and 500 < b["samples_per_second_per_gpu"] < 2000


def test_the_cpu_check_runs_the_reference_ablation_and_writes_the_table(gpu_stack, tmp_path, capsys):
    out = tmp_path / "out"
    assert gpu_stack.main(["--cpu-check", "--benchmarks", "resnet", "--out", str(out)]) == 0
    [row] = json.loads((out / "gpu_stack.json").read_text())
    assert row["benchmark"] == "resnet" and row["global_batch"] == 2 and not row["error"]
    assert row["stack_off"] > 0 and row["stack_on"] > 0
    assert row["stack_on_flags"] == "--precision bf16 --prefetch 2"
    assert set(row["speedups"]) == {"baseline", "prefetch 2", "bf16 autocast", "all"}
    assert "ReferenceLars has no fused implementation" in row["skipped"]["optimizer fused"]
    ablation = json.loads((out / "ablation" / "resnet-reference.json").read_text())
    assert ablation["scale"] == "reference" and ablation["precision"] == "fp32"
    assert ablation["data"].startswith("synthetic")
    table = (out / "gpu_stack.md").read_text()
    assert table == capsys.readouterr().out.split("resnet: done\n", 1)[1].rstrip("\n") + "\n"
    assert "| resnet | cpu" in table and "(v4.0, 12.03 min)" in table
    assert "skipped: optimizer foreach, optimizer fused" in table


def test_a_failed_ablation_is_a_row_that_says_why_and_a_non_zero_exit(gpu_stack, tmp_path, monkeypatch):
    monkeypatch.setitem(gpu_stack.SETTINGS, "resnet", {"steps": 1, "warmup": 0, "timeout_s": 1})
    out = tmp_path / "out"
    assert gpu_stack.main(["--cpu-check", "--benchmarks", "resnet", "--out", str(out), "--timeout-s", "1"]) == 1
    [row] = json.loads((out / "gpu_stack.json").read_text())
    assert "stopped at its time limit" in row["error"] and "resnet.log" in row["error"]
    assert "stopped at its time limit" in (out / "gpu_stack.md").read_text()
