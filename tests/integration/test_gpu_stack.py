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


def test_llama31_8b_is_measured_by_its_own_script_beside_the_published_rate(gpu_stack, tmp_path):
    """gpu_llama.py through gpu_stack.py: the decoder's forward and backward pass with checkpointing off and on, and
    the fastest published 8-accelerator result as tokens/s per accelerator (v5.1's GB300: 67.373 min for the RCP
    mean of 161,587 sequences of 8,192 tokens at batch 16)."""
    out = tmp_path / "out"
    assert gpu_stack.main(["--cpu-check", "--benchmarks", "llama31_8b", "--out", str(out)]) == 0
    data = json.loads((out / "gpu_llama.json").read_text())
    assert [r["checkpointing"] for r in data["rows"]] == [False, True]
    assert all(not r["error"] and r["tokens_per_second"] > 0 and r["flavour"] == "debug" for r in data["rows"])
    p = data["published"]
    assert p["round"] == "v5.1" and p["minutes"] == pytest.approx(67.373)
    assert p["tokens_per_second_per_accelerator"] == pytest.approx(161_587.2 * 8192 / (67.373 * 60) / 8)
    table = (out / "gpu_stack.md").read_text()
    assert "llama31_8b, one GPU's forward and backward pass" in table and "| off | cpu |" in table


def test_llama2_70b_lora_is_measured_at_fewer_blocks_beside_the_published_rate(gpu_stack, tmp_path):
    """gpu_lora.py through gpu_stack.py at the debug width: the base with the reference's LoRA at 2 and 4 blocks, the
    80 blocks' step estimated from them, and the fastest published 8-accelerator result as samples/s per accelerator
    (v5.1's GB300: 5.771 min for the RCP mean of 3,187.2 samples at batch 8)."""
    out = tmp_path / "out"
    assert gpu_stack.main(["--cpu-check", "--benchmarks", "llama2_70b_lora", "--out", str(out)]) == 0
    data = json.loads((out / "gpu_lora.json").read_text())
    assert data["flavour"] == "debug" and [r["blocks"] for r in data["rows"]] == [2, 4]
    assert all(not r["error"] and r["samples_per_second"] > 0 for r in data["rows"])
    e = data["estimate"]
    assert e["blocks"] == 80 and e["samples_per_second"] == pytest.approx(1 / e["step_seconds"])
    p = data["published"]
    assert p["round"] == "v5.1" and p["minutes"] == pytest.approx(5.771)
    assert p["samples_per_second_per_accelerator"] == pytest.approx(3187.2 / (5.771 * 60) / 8)
    table = (out / "gpu_stack.md").read_text()
    assert "llama2_70b_lora, one GPU's forward and backward pass (benchmarks/gpu_lora.py)" in table
    assert "Estimated for the reference's 80 blocks" in table


def test_the_8b_counts_seven_and_a_half_billion_parameters_in_its_products():
    spec = importlib.util.spec_from_file_location("gpu_llama", ROOT / "benchmarks" / "gpu_llama.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from trainperf.workloads.common.llm.model import LLAMA31_8B

    # Llama 3.1 8B: 8.03 billion parameters, of which the 0.53 billion of the input embedding are a lookup
    assert module.product_parameters(LLAMA31_8B) == pytest.approx(7.505e9, rel=1e-3)


def _gpu_moe():
    spec = importlib.util.spec_from_file_location("gpu_moe", ROOT / "benchmarks" / "gpu_moe.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_moe_references_are_measured_by_their_own_script_at_fewer_blocks(gpu_stack, tmp_path):
    """gpu_moe.py through gpu_stack.py, rehearsed at the debug width: each model of fewer blocks is a row, and the
    reference's depth is estimated from the step times fitted per block."""
    out = tmp_path / "out"
    assert gpu_stack.main(["--cpu-check", "--benchmarks", "gpt_oss_20b,deepseekv3_671b", "--out", str(out)]) == 0
    gpt = json.loads((out / "gpu_moe_gpt_oss_20b.json").read_text())
    assert [(r["dense_blocks"], r["moe_blocks"]) for r in gpt["rows"]] == [(0, 2), (0, 4)]
    deepseek = json.loads((out / "gpu_moe_deepseekv3_671b.json").read_text())
    assert [(r["dense_blocks"], r["moe_blocks"]) for r in deepseek["rows"]] == [(1, 0), (2, 0), (1, 1)]
    for doc, full in ((gpt, (0, 24)), (deepseek, (3, 58))):
        assert doc["flavour"] == "debug" and doc["sequence_length"] == 64
        assert all(not r["error"] and r["tokens_per_second"] > 0 for r in doc["rows"])
        e = doc["estimate"]
        assert (e["dense_blocks"], e["moe_blocks"]) == full and e["tokens_per_second"] == 64 / e["step_seconds"]
    table = (out / "gpu_stack.md").read_text()
    assert "gpt_oss_20b, one GPU's forward and backward pass (benchmarks/gpu_moe.py)" in table
    assert "| 1 + 1 | cpu |" in table and "3 + 58 blocks without the multi-token prediction block" in table


def test_the_estimate_fits_a_fixed_cost_and_one_per_block():
    rows = [
        {"dense_blocks": 1, "moe_blocks": 0, "step_seconds": 1.0 + 0.5, "error": ""},
        {"dense_blocks": 2, "moe_blocks": 0, "step_seconds": 1.0 + 1.0, "error": ""},
        {"dense_blocks": 1, "moe_blocks": 1, "step_seconds": 1.0 + 0.5 + 2.0, "error": ""},
    ]
    e = _gpu_moe().estimate(rows, (3, 58), 4096)
    assert e["fixed_seconds"] == pytest.approx(1.0) and e["moe_block_seconds"] == pytest.approx(2.0)
    assert e["step_seconds"] == pytest.approx(1.0 + 3 * 0.5 + 58 * 2.0)
    assert _gpu_moe().estimate([{**rows[0], "error": "out of memory"}, *rows[1:]], (3, 58), 4096) is None


def test_the_moe_references_count_their_active_parameters_in_products():
    import dataclasses

    from trainperf.workloads.deepseekv3_671b.model import FLAVOURS as DEEPSEEK
    from trainperf.workloads.gpt_oss_20b.model import FLAVOURS as GPT_OSS

    module = _gpu_moe()
    gpt = GPT_OSS["20B"]
    # GPT-OSS 20B as the reference builds it: 3.77 B parameters active per token (the spec), 0.37 B of them the
    # embedding, a lookup
    assert module.product_parameters(gpt) + gpt.vocab_size * gpt.dim == pytest.approx(3.767e9, rel=1e-3)
    # DeepSeek-V3 without its multi-token prediction block: 37.6 B active (DeepSeek's "37 B activated"), 0.93 B of
    # them the embedding
    deepseek = dataclasses.replace(DEEPSEEK["671B"], mtp_layers=0)
    assert module.product_parameters(deepseek) + deepseek.vocab_size * deepseek.dim == pytest.approx(37.55e9, rel=1e-3)
