"""gpt_oss_20b through the CLI: the reference dry run that the official 6.1.0 checker fails on the target alone, and
the reference smoke run through llama31_8b's real loader of Megatron's indexed files and a tokenizer.json."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

from trainperf.results import first_values, parse_run, read_mllog
from trainperf.rules.compliance import check_log, is_target_only_failure


def trainperf(*args, timeout=900):
    return subprocess.run(
        [sys.executable, "-m", "trainperf", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


def test_reference_dry_run_fails_the_6_1_checker_only_on_the_target(tmp_path):
    r = trainperf("run", "gpt_oss_20b", "--scale", "reference", "--dry-run", "--out", tmp_path / "o")
    assert r.returncode == 0, r.stdout + r.stderr
    [log] = list((tmp_path / "o" / "results").rglob("result_0.txt"))
    res = check_log(log)
    assert res.scale == "reference" and res.ruleset == "6.1.0"
    assert is_target_only_failure(res), res.problems
    first = first_values(read_mllog(log))
    assert first["submission_benchmark"] == "gpt_oss_20b" and first["submission_division"] == "closed"
    assert first["max_steps"] == 1_200_000 and first["opt_learning_rate_warmup_steps"] == 128
    assert first["opt_learning_rate_decay_steps"] == 1_200_000 - 128 and first["opt_end_learning_rate"] == 4e-5
    assert first["trainperf_model_flavour"] == "debug"  # the 20B's code at a toy width on a CPU
    assert first["trainperf_sequence_length"] == 64 and first["max_sequence_length"] == 8192
    assert first["trainperf_moe_experts"] == 8 and first["trainperf_moe_top_k"] == 4
    assert first["eval_accuracy"] > 3.34  # a dry run measures nothing: the loss of an untrained model
    names = [r["metadata"]["tensor"] for r in read_mllog(log) if r.get("key") == "weights_initialization"]
    assert "layers.1.feed_forward.experts.w2" in names and len(names) == 2 * 10 + 3
    assert parse_run(log).status == "aborted"


def test_reference_smoke_run_reads_llama31_8bs_files_through_its_loader(tmp_path):
    out = tmp_path / "o"
    r = trainperf("run", "gpt_oss_20b", "--scale", "reference", "--smoke", "--seed", "1", "--out", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"fixture in the reference layout at {out / 'smoke-data' / 'gpt_oss_20b' / 'reference'}" in r.stdout
    [log] = list((out / "results").rglob("result_0.txt"))
    first = first_values(read_mllog(log))
    assert first["trainperf_smoke"] is True and first["train_samples"] > 0 and first["eval_samples"] > 0
    assert 0 < first["eval_accuracy"] < 20  # a real log-perplexity over the fixture's validation sequences
    balance = first["trainperf_eval_details"]  # the experts' load over the training tokens, beside the metric
    assert 1.0 <= balance["expert_load_mean_max"] <= balance["expert_load_max"] <= 8 / 4
    assert parse_run(log).status == "aborted"  # never a result


def test_the_c4_files_are_read_where_llama31_8b_keeps_them(tmp_path):
    from trainperf.workloads.gpt_oss_20b.workload import GptOssWorkload
    from trainperf.workloads.llama31_8b import reference

    shared = tmp_path / "llama31_8b" / "reference"
    (shared / "tokenizer").mkdir(parents=True)
    for name in ("c4-train.en_6_text_document", "c4-train.en_7_text_document", reference.VALIDATION):
        for ext in ("bin", "idx"):
            (shared / f"{name}.{ext}").touch()  # find() checks the names only; the loader checks the contents
    (shared / reference.TOKENIZER).touch()
    files = GptOssWorkload.find_reference_files(SimpleNamespace(data_dir=tmp_path))  # type: ignore[arg-type]
    assert files.validation.parent == shared and len(files.train) == 2
