"""minigo's mini: one real generation (self-play over the worker processes, then its 40 training steps through the
harness's stepper) and a real evaluation against GNU Go, and a calibration seed's log of a run to the target judged
by the mini rules (`trainperf check`). That the mini reaches its target is shown by its calibration (README.md beside
minigo/workload.py), not rerun here."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from mini_logs import (
    assert_a_success_stopped_at_the_first_evaluation_reaching_the_target,
    assert_the_checker_passes,
    assert_the_target_decides,
    mini_log,
)
from mini_steps import few_steps_command

from trainperf.results import parse_run, read_mllog
from trainperf.workloads.minigo import MINI
from trainperf.workloads.minigo.gtp import GNUGO

SEED = 100_001  # a calibration seed (never a drawn one) that reached the target in 5 generations (README.md)
LOG = mini_log("minigo")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which(GNUGO) is None, reason="GNU Go is not installed (scripts/setup.sh)")
def test_one_real_generation_learns_from_its_games_and_plays_gnugo(data_dir):
    """The generation's 40 steps fit its 64 self-play games (the loss of the last ten steps at least 0.1 below the
    first ten's), and the evaluation plays its 40-game screen against GNU Go, 20 games with each colour, scored as
    GNU Go scores them; a screen short of the target plays no confirmation. Whether one generation already wins more
    is a coin toss (README.md "Networks that do not learn"): the calibration shows the win rate rising."""
    cmd = few_steps_command("minigo", SEED, 1, data_dir, before=False)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    got = json.loads(r.stdout)
    assert got["optimizer_steps"] == 40 and got["train_samples"] == 64 and got["eval_samples"] == 40
    first, *_, last = got["losses"]
    assert last < first - 0.1, got["losses"]
    d = got["after"]
    assert d["games"] == d["screen_games"] == 40 and d["black_games"] == d["white_games"] == 20
    assert d["black_wins"] + d["white_wins"] == round(d["win_rate"] * 40) and d["disagreements"] == 0
    assert d["win_rate"] == d["screen_win_rate"]
    if d["win_rate"] < MINI.target:
        assert d["confirmation_games"] == 0


def test_a_calibration_seeds_log_stops_at_the_target_and_passes_the_checker(tmp_path):
    """Seed 100001's log of `trainperf run minigo` (source paths made relative)."""
    assert_a_success_stopped_at_the_first_evaluation_reaching_the_target(LOG, MINI)
    run = parse_run(LOG)
    assert run.seed == SEED
    records = read_mllog(LOG)
    logged = {rec["key"]: rec["value"] for rec in records}
    assert "actual_selfplay_games_per_generation" in logged and logged["eval_opponent"] == "gnugo --level 0"
    assert logged["trainperf_progress_unit"] == "generations"
    assert logged["eval_games"] == 40 and logged["confirm_games"] == 200  # the screen and the confirmation (README.md)
    accuracy = [r["value"] for r in records if r["key"] == "eval_accuracy"]
    details = [r["value"] for r in records if r["key"] == "trainperf_eval_details"]
    assert len(details) == len(accuracy) == len(run.curve)
    for value, d in zip(accuracy, details, strict=True):  # every evaluation says what it played
        assert d["black_games"] + d["white_games"] == d["games"] == d["screen_games"] + d["confirmation_games"]
        assert d["black_wins"] + d["white_wins"] <= d["games"] and d["disagreements"] == 0
        assert value == d.get("confirmation_win_rate", d["screen_win_rate"])
    assert details[-1]["confirmation_games"] == 200 and details[-1]["confirmation_win_rate"] >= MINI.target
    assert_the_checker_passes(LOG)
    assert_the_target_decides(LOG, MINI, tmp_path)
