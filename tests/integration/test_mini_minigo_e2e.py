"""A mini minigo run to its target against GNU Go, end to end, judged by the mini rules (`trainperf check`)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from trainperf.results import parse_run, read_mllog
from trainperf.rules.compliance import check_log
from trainperf.workloads.minigo import MINI
from trainperf.workloads.minigo.gtp import GNUGO

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which(GNUGO) is None, reason="GNU Go is not installed (scripts/setup.sh)"),
]


def test_mini_minigo_reaches_target_against_gnugo_and_passes_the_checker(tmp_path):
    out = tmp_path / "out"
    r = subprocess.run(
        [sys.executable, "-m", "trainperf", "run", "minigo", "--seed", "3", "--out", out],
        capture_output=True,
        text=True,
        timeout=420,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    [log] = list((out / "results").rglob("result_0.txt"))
    run = parse_run(log)
    assert run.status == "success"
    assert run.curve[-1][2] >= MINI.target and all(q < MINI.target for _, _, q in run.curve[:-1])
    res = check_log(log)  # the mini rules through the MLPerf compliance checker, as `trainperf check` runs them
    assert res.passed and res.scale == "mini", res.problems
    check = subprocess.run(
        [sys.executable, "-m", "trainperf", "check", log], capture_output=True, text=True, timeout=300
    )
    assert check.returncode == 0, check.stdout + check.stderr
    logged = {rec["key"]: rec["value"] for rec in read_mllog(log)}
    assert "actual_selfplay_games_per_generation" in logged and logged["eval_opponent"] == "gnugo --level 0"
    assert logged["trainperf_progress_unit"] == "generations"
    assert logged["eval_games"] == 40  # the calibrated evaluation (README.md): 20 games cannot tell untrained apart
    summary = json.loads((out / "summary.json").read_text())["benchmarks"][0]
    assert summary["score_label"] == "preview" and summary["runs"][0]["status"] == "success"
