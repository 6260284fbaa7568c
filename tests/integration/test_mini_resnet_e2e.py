"""Mini resnet runs to their target, end to end, judged by the official compliance checker; Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from trainperf.results import parse_run
from trainperf.rules.compliance import check_log

pytestmark = pytest.mark.slow


def test_mini_resnet_reaches_target_and_passes_the_checker(tmp_path, resnet_runs):
    # five runs of calibration seeds that reached the target (README), shared with the package tests
    out = resnet_runs
    logs = sorted((out / "results").rglob("result_*.txt"))
    assert [p.name for p in logs] == [f"result_{i}.txt" for i in range(5)]
    for log in logs:
        run = parse_run(log)
        assert run.status == "success"
        assert run.curve[-1][2] >= 0.88 and all(q < 0.88 for _, _, q in run.curve[:-1])
        res = check_log(log)
        assert res.passed, (log.name, res.problems)
    summary = json.loads((out / "summary.json").read_text())["benchmarks"][0]
    assert summary["score_label"] == "score" and summary["score_minutes"] > 0 and len(summary["runs"]) == 5
    assert all(r["status"] == "success" for r in summary["runs"])
    assert all(r["energy_joules"] is None or r["energy_joules"] > 0 for r in summary["runs"])
    stdout = (out.parent / "stdout.txt").read_text()
    assert "resnet" in stdout and summary["score_label"] in stdout  # the results table

    # the report of those real runs: one self-contained HTML file with its charts
    rep = subprocess.run(
        [sys.executable, "-m", "trainperf", "report", out, "-o", tmp_path / "report.html"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rep.returncode == 0, rep.stderr
    html = (tmp_path / "report.html").read_text()
    assert html.count("data:image/png;base64,") >= 3 and "https://" not in html


def test_ctrl_c_logs_aborted_and_counts_nothing(tmp_path, data_dir):
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainperf", "run", "resnet", "--out", str(out), "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As from a terminal: a test run started in the background (`cmd &`) inherits SIGINT ignored, and
        # Python then installs no KeyboardInterrupt handler, so the child would never see the Ctrl-C.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.time() + 120
    partial = None
    while time.time() < deadline:
        found = list((out / "results").rglob(".result_0.txt.*.partial")) if (out / "results").exists() else []
        if found and '"block_start"' in found[0].read_text():
            partial = found[0]
            break
        time.sleep(0.2)
    assert partial is not None, "the run did not start"
    os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert not list((out / "results").rglob("result_0.txt"))
    [kept] = list((out / "interrupted").rglob("result_0-1.txt"))
    assert parse_run(kept).status == "aborted"
