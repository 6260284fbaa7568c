"""bert at the reference scale without the real data: a smoke run (a tiny fixture in the packed HDF5 layout and a
reference checkpoint with TensorFlow names, read by the real loader, two real steps of BERT-large and a full
evaluation) fails ruleset 2.0.0 only on the quality target. The dry run's log is the same but for its synthetic
batches, so the smoke run's judgement stands for both (and CI's minute for one run of BERT-large); the v2.0
evaluation cadence is pinned in tests/unit/test_v2_rules_tables.py."""

from __future__ import annotations

import json
import subprocess
import sys

from trainperf.results import first_values, parse_run, read_mllog
from trainperf.rules.compliance import check_log, is_target_only_failure


def trainperf(*args, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "trainperf", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


def _judged(out):
    [log] = list((out / "results").rglob("result_0.txt"))
    res = check_log(log)
    assert res.scale == "reference" and res.ruleset == "2.0.0"
    assert not res.passed and is_target_only_failure(res), res.problems
    text = log.read_text()
    assert text.count('"weights_initialization"') == 398
    assert '"tensor": "bert/encoder/layer_23/output/LayerNorm/beta"' in text
    return log


def test_reference_smoke_run_reads_the_packed_hdf5_and_the_checkpoint(tmp_path):
    out = tmp_path / "o"
    r = trainperf("run", "bert", "--scale", "reference", "--smoke", "--seed", "1", "--out", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"bert smoke run: fixture in the reference layout at {out / 'smoke-data' / 'bert' / 'reference'}" in r.stdout
    log = _judged(out)
    first = first_values(read_mllog(log))
    assert first["trainperf_smoke"] is True and first["trainperf_dry_run"] is False
    assert (first["train_samples"], first["eval_samples"]) == (16, 8)  # the fixture's, read by the real loader
    assert 0.0 <= first["eval_accuracy"] <= 1.0
    assert first["opt_learning_rate_training_steps"] == 13_700 and first["num_warmup_steps"] == 0  # bert_ref_256
    assert parse_run(log).status == "aborted"  # never a result
    assert json.loads((out / "trainperf.json").read_text())["kind"] == "smoke run"
