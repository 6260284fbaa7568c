"""A mini rnnt run to its target, end to end through the CLI (synthesized speech in LibriSpeech layout, the
reference's features, the RNN-T, LAMB, greedy decoding and jiwer's WER), judged by the official compliance
checker with the mini rules."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from trainperf import registry
from trainperf.results import first_values, parse_run, read_mllog
from trainperf.rules.compliance import check_log

pytestmark = pytest.mark.slow

# a calibration seed that reached the target (README.md of rnnt), so CI does not depend on a drawn seed; its
# deciding evaluations sit 4.2 SE above and 3.0 SE below the target, so the epoch it stops at is not a coin toss
SEED = 100002


def test_mini_rnnt_reaches_target_and_passes_the_checker(tmp_path, data_dir):
    target = registry.get_spec("rnnt", "mini").target
    out = tmp_path / "out"
    r = subprocess.run(
        [sys.executable, "-m", "trainperf", "run", "rnnt", "--seed", str(SEED), "--out", out, "--data-dir", data_dir],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    [log] = list((out / "results").rglob("result_0.txt"))
    run = parse_run(log)
    assert run.status == "success"
    # WER: lower is better; every epoch is evaluated, the first far above the target (this seed on one machine:
    # 0.813), and the run stops at the first evaluation that reaches it. Which epoch that is depends on the
    # processor's arithmetic (epoch 7 on one machine, 8 on another), so the test holds the schedule, not the epoch.
    epochs = [epoch for _, epoch, _ in run.curve]
    assert epochs == [float(e) for e in range(1, len(epochs) + 1)]
    assert run.curve[-1][2] <= target and all(q > target for _, _, q in run.curve[:-1])
    assert run.curve[0][2] > 0.5
    first = first_values(read_mllog(log))
    assert (first["train_samples"], first["eval_samples"]) == (2880, 400)
    assert first["opt_name"] == "lamb" and first["data_spec_augment_freq_n"] == 0
    res = check_log(log)
    assert res.passed, res.problems
    summary = json.loads((out / "summary.json").read_text())["benchmarks"][0]
    assert summary["runs"][0]["peak_rss_mib"] < 3 * 1024  # the mini goal: peak memory at most 3 GiB
