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

SEED = 100_001  # a calibration seed (never a drawn one) that reached the target in 98 s, 5 generations (README.md)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which(GNUGO) is None, reason="GNU Go is not installed (scripts/setup.sh)"),
]


def test_mini_minigo_reaches_target_against_gnugo_and_passes_the_checker(tmp_path):
    out = tmp_path / "out"
    r = subprocess.run(
        [sys.executable, "-m", "trainperf", "run", "minigo", "--seed", str(SEED), "--out", out],
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
    assert logged["eval_games"] == 40 and logged["confirm_games"] == 200  # the screen and the confirmation (README.md)
    records = read_mllog(log)
    accuracy = [r["value"] for r in records if r["key"] == "eval_accuracy"]
    details = [r["value"] for r in records if r["key"] == "trainperf_eval_details"]
    assert len(details) == len(accuracy) == len(run.curve)
    for value, d in zip(accuracy, details, strict=True):  # every evaluation says what it played
        assert d["black_games"] + d["white_games"] == d["games"] == d["screen_games"] + d["confirmation_games"]
        assert d["black_wins"] + d["white_wins"] <= d["games"] and d["disagreements"] == 0
        assert value == d.get("confirmation_win_rate", d["screen_win_rate"])
    assert details[-1]["confirmation_games"] == 200 and details[-1]["confirmation_win_rate"] >= MINI.target
    summary = json.loads((out / "summary.json").read_text())["benchmarks"][0]
    assert summary["score_label"] == "preview" and summary["runs"][0]["status"] == "success"
