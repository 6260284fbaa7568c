"""A mini bert run to its target, end to end through the real loader of the packed HDF5 layout, judged by the
official compliance checker with the mini rules."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trainperf.results import first_values, parse_run, read_mllog
from trainperf.rules.compliance import check_log

pytestmark = pytest.mark.slow
SEED = 100007  # a calibration seed that reached the target, at 22,400 samples (README.md beside bert/workload.py)


def test_mini_bert_reaches_target_and_passes_the_checker(tmp_path, data_dir):
    out = tmp_path / "out"
    r = subprocess.run(
        [sys.executable, "-m", "trainperf", "run", "bert", "--seed", str(SEED), "--out", out, "--data-dir", data_dir],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    [log] = list((out / "results").rglob("result_0.txt"))
    run = parse_run(log)
    assert run.status == "success"
    assert run.curve[-1][2] >= 0.11 and all(q < 0.11 for _, _, q in run.curve[:-1])
    first = first_values(read_mllog(log))
    assert (first["train_samples"], first["eval_samples"]) == (125_492, 2_000)
    assert first["opt_lamb_weight_decay_rate"] == 0.01 and first["num_warmup_steps"] == 100
    res = check_log(log)
    assert res.passed, res.problems
