"""llama2_70b_lora through the CLI: the reference dry run that the official 6.1.0 checker fails on the target alone,
the reference smoke run through the real readers of the GovReport parquet files and the safetensors checkpoint, and
a pickle in the checkpoint's place stopping the run before its clock."""

from __future__ import annotations

import subprocess
import sys

from trainperf.results import first_values, parse_run, read_mllog
from trainperf.rules.compliance import check_log, is_target_only_failure

CLOSED_KEYS = (
    "global_batch_size",
    "opt_base_learning_rate",
    "opt_learning_rate_training_steps",
    "opt_gradient_clip_norm",
    "opt_adamw_weight_decay",
    "gradient_accumulation_steps",
    "lora_alpha",
    "lora_rank",
)  # fmt: skip  (training_6.1.0/closed_llama2_70b_lora.yaml)


def trainperf(*args, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "trainperf", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


def test_reference_dry_run_fails_the_6_1_checker_only_on_the_target(tmp_path):
    r = trainperf("run", "llama2_70b_lora", "--scale", "reference", "--dry-run", "--out", tmp_path / "o")
    assert r.returncode == 0, r.stdout + r.stderr
    [log] = list((tmp_path / "o" / "results").rglob("result_0.txt"))
    res = check_log(log)
    assert res.scale == "reference" and res.ruleset == "6.1.0"
    assert is_target_only_failure(res), res.problems
    records = read_mllog(log)
    first = first_values(records)
    assert all(sum(r.get("key") == k for r in records) == 1 for k in CLOSED_KEYS)
    assert first["submission_division"] == "closed" and first["lora_rank"] == 16 and first["lora_alpha"] == 32
    assert first["opt_learning_rate_training_steps"] == 1024 and first["opt_gradient_clip_norm"] == 0.3
    assert first["trainperf_model_flavour"] == "debug"  # the 70B's code at a toy width on a CPU
    assert first["eval_accuracy"] > 0.925  # a dry run measures nothing: the loss of an untrained model
    assert [r["metadata"]["samples_count"] for r in records if r.get("key") == "eval_accuracy"] == [3]
    assert parse_run(log).status == "aborted"


def test_reference_smoke_run_reads_govreport_parquet_and_a_safetensors_checkpoint(tmp_path):
    out = tmp_path / "o"
    r = trainperf("run", "llama2_70b_lora", "--scale", "reference", "--smoke", "--seed", "1", "--out", out)
    assert r.returncode == 0, r.stdout + r.stderr
    where = out / "smoke-data" / "llama2_70b_lora" / "reference"
    assert f"llama2_70b_lora smoke run: fixture in the reference layout at {where}" in r.stdout
    assert sorted(p.name for p in (where / "scrolls_gov_report_8k").iterdir()) == [
        "train-00000-of-00001.parquet", "validation-00000-of-00001.parquet",
    ]  # fmt: skip
    assert (where / "Llama2-70b-fused-qkv-mlperf" / "model.safetensors.index.json").is_file()
    [log] = list((out / "results").rglob("result_0.txt"))
    first = first_values(read_mllog(log))
    assert first["trainperf_smoke"] is True and first["train_samples"] == 24 and first["eval_samples"] == 8
    assert 5 < first["eval_accuracy"] < 12  # a real loss of the random fixture model over 32,000 tokens (ln = 10.4)
    assert parse_run(log).status == "aborted"  # never a result


def test_a_pickle_for_a_checkpoint_stops_the_run_before_its_clock(tmp_path):
    import torch

    from trainperf.workloads.llama2_70b_lora.reference import MODEL, write_smoke_fixture

    data = tmp_path / "data"
    root = data / "llama2_70b_lora" / "reference"
    write_smoke_fixture(root)
    for p in (root / MODEL).iterdir():
        p.unlink()
    torch.save({"model.embed_tokens.weight": torch.zeros(2, 2)}, root / MODEL / "pytorch_model.bin")
    out = tmp_path / "o"
    r = trainperf("run", "llama2_70b_lora", "--scale", "reference", "--data-dir", data, "--out", out, "--set",
                  "model_flavour=debug", "--set", "max_sequence_length=256", "--division", "open")  # fmt: skip
    assert r.returncode == 2 and "pytorch_model.bin: a PyTorch pickle, not safetensors" in r.stderr, r.stderr
    assert "safe_serialization=True" in r.stderr and "Traceback" not in r.stderr
    assert not list(out.rglob("result_0.txt"))
