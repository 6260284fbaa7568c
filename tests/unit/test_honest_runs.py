"""Results that survive a skeptical review: seeds, failed and interrupted runs, resume checks, strict budgets.

The fake workload of tests/helpers.py stands in for training (the fake_registry fixture).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
from pathlib import Path

import pytest
from helpers import FAKE_BENCHMARK, FAKE_SPEC, FakeRecipe, FakeWorkload, first, keys_in

import trainperf
from trainperf import seeds
from trainperf.cli import _terminated
from trainperf.dist import DistContext
from trainperf.errors import ResultsError, RunFailed, RunInterrupted
from trainperf.harness.mllog import RunLog
from trainperf.harness.runner import Submission, execute_run
from trainperf.harness.suite import SuiteOptions, interrupted_runs, run_suite
from trainperf.report.collect import collect
from trainperf.spec import RunConfig

SUB = Submission(org="test-org", platform="test-system", status="onprem")


@pytest.fixture(autouse=True)
def _fresh_fake():
    FakeWorkload.qualities = [0.5, 0.9]
    FakeWorkload.interrupt_at_step = None
    FakeWorkload.interrupt_with = KeyboardInterrupt
    yield
    FakeWorkload.interrupt_at_step = None
    FakeWorkload.interrupt_with = KeyboardInterrupt


def options(tmp_path, **kw):
    base = dict(
        benchmarks=("resnet",), scale="mini", runs=2, out=tmp_path / "out", data_dir=tmp_path, system_name="test-system"
    )
    base.update(kw)
    return SuiteOptions(**base)


def results(tmp_path):
    return tmp_path / "out" / "results" / "test-system" / "resnet"


# --- seeds ----------------------------------------------------------------------------------------------
def test_default_runs_draw_their_seeds_from_the_system_and_log_the_source(tmp_path, fake_registry):
    run_suite(options(tmp_path, runs=3), DistContext())
    files = sorted(results(tmp_path).glob("result_*.txt"))
    drawn = [first(f, "seed")["value"] for f in files]
    low, high = seeds.DRAWN_SEEDS
    assert len(set(drawn)) == 3 and all(low <= s < high for s in drawn)
    assert {first(f, "trainperf_seed_source")["value"] for f in files} == {seeds.SOURCE_SYSTEM}
    assert not set(drawn) & set(seeds.CALIBRATION_SEEDS)


def test_a_fixed_seed_makes_runs_reproducible_and_is_logged_as_fixed(tmp_path, fake_registry):
    run_suite(options(tmp_path, runs=2, seed=41), DistContext())
    files = sorted(results(tmp_path).glob("result_*.txt"))
    assert [first(f, "seed")["value"] for f in files] == [41, 42]
    assert {first(f, "trainperf_seed_source")["value"] for f in files} == {seeds.SOURCE_FIXED}


def test_calibration_seeds_are_disjoint_from_every_drawn_seed():
    low, _ = seeds.DRAWN_SEEDS
    assert max(seeds.CALIBRATION_SEEDS) < low
    assert seeds.calibration_seeds(10) == list(range(100_001, 100_011))
    with pytest.raises(ValueError):
        seeds.calibration_seeds(0)


# --- failed and interrupted runs --------------------------------------------------------------------------
def test_a_started_run_that_fails_is_kept_as_an_aborted_result_and_counted(tmp_path, fake_registry):
    FakeWorkload.interrupt_at_step = 2
    FakeWorkload.interrupt_with = RuntimeError("the opponent crashed")
    with pytest.raises(RunFailed, match="the opponent crashed.*counted as a run that did not converge"):
        run_suite(options(tmp_path, runs=2), DistContext())
    failed = results(tmp_path) / "result_0.txt"
    assert first(failed, "run_stop")["metadata"]["status"] == "aborted"
    assert first(failed, "trainperf_abort_reason")["value"] == "error: RuntimeError: the opponent crashed"
    doc = json.loads((tmp_path / "out" / "summary.json").read_text())
    [run] = doc["benchmarks"][0]["runs"]
    assert run["status"] == "aborted" and run["reason"].startswith("error: RuntimeError")
    # the same command goes on with the next run; the failed run stays a result, never redone
    FakeWorkload.interrupt_at_step = None
    [summary] = run_suite(options(tmp_path, runs=2), DistContext())
    assert [r["status"] for r in summary.runs] == ["aborted", "success"]
    assert summary.runs[0]["resumed"] and summary.score.successes == 1


def test_a_run_that_fails_before_run_start_leaves_no_result(tmp_path, fake_registry, monkeypatch):
    def broken_prepare(self):
        raise RuntimeError("no data")

    monkeypatch.setattr(FakeWorkload, "prepare", broken_prepare)
    with pytest.raises(RuntimeError, match="no data"):
        run_suite(options(tmp_path, runs=1), DistContext())
    assert not list(results(tmp_path).iterdir())  # nothing started, nothing kept (and no partial file)


def test_sigterm_ends_a_run_like_ctrl_c(tmp_path, fake_registry, monkeypatch):
    original = FakeWorkload.loss

    def loss(self, model, batch):  # the third step sends this process a real SIGTERM
        if self._steps == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return original(self, model, batch)

    monkeypatch.setattr(FakeWorkload, "loss", loss)
    previous = signal.signal(signal.SIGTERM, _terminated)  # the handler `trainperf run` installs
    try:
        with pytest.raises(RunInterrupted, match=r"terminated \(SIGTERM\)"):
            run_suite(options(tmp_path, runs=1), DistContext())
    finally:
        signal.signal(signal.SIGTERM, previous)
    kept = tmp_path / "out" / "interrupted" / "test-system" / "resnet" / "result_0-1.txt"
    assert first(kept, "run_stop")["metadata"]["status"] == "aborted"
    assert first(kept, "trainperf_abort_reason")["value"] == "terminated (SIGTERM)"
    assert not (results(tmp_path) / "result_0.txt").exists()


def test_the_report_shows_interrupted_runs(tmp_path, fake_registry):
    run_suite(options(tmp_path, runs=1), DistContext())
    FakeWorkload.interrupt_at_step = 2
    with pytest.raises(RunInterrupted):
        run_suite(options(tmp_path, runs=2), DistContext())
    aside = tmp_path / "out" / "interrupted" / "test-system" / "resnet"
    (aside / "result_1-2.txt").symlink_to(aside / "result_1-1.txt")  # not a log the suite kept
    (aside / "notes.txt").write_text("not a run\n")
    [system] = collect([tmp_path / "out"])
    [bench] = system.benchmarks
    assert [p.name for p in bench.interrupted] == ["result_1-1.txt"]
    assert any("1 interrupted run(s) kept aside and not counted" in n for n in bench.run_notes)
    assert [Path(r["log"]) for r in interrupted_runs(aside)] == bench.interrupted  # the summary lists the same


# --- resume refuses what it would not make ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("first_kw", "second_kw", "named"),
    [
        ({}, {"overrides": (("learning_rate", 0.2),)}, "overrides (--set)"),
        ({}, {"division": "closed"}, "division (--division)"),
        ({}, {"org": "another-org"}, "organization (--org)"),
        ({"seed": 5}, {"seed": 9}, "seed (--seed) 5 (this run: 9)"),
        ({"seed": 5}, {}, "seed source"),
        ({}, {"seed": 5}, "seed source"),
    ],
)
def test_resume_refuses_runs_made_with_other_settings(tmp_path, fake_registry, first_kw, second_kw, named):
    run_suite(options(tmp_path, runs=1, **first_kw), DistContext())
    with pytest.raises(ResultsError, match=f"cannot resume from .*{re.escape(named)}"):
        run_suite(options(tmp_path, runs=2, **second_kw), DistContext())


def test_resume_refuses_runs_of_other_code_or_another_target(tmp_path, fake_registry):
    run_suite(options(tmp_path, runs=1), DistContext())
    log = results(tmp_path) / "result_0.txt"
    original = log.read_text()
    log.write_text(original.replace(trainperf.code_hash(), "0123456789abcdef"))
    with pytest.raises(ResultsError, match="trainperf code 0123456789abcdef"):
        run_suite(options(tmp_path, runs=2), DistContext())
    log.write_text(original.replace(FAKE_SPEC.target_text, "top1 >= 0.1"))
    with pytest.raises(ResultsError, match=r"target top1 >= 0.1 \(this run: top1 >= 0.8\)"):
        run_suite(options(tmp_path, runs=2), DistContext())


def test_a_dry_run_never_shares_a_folder_with_timed_runs(tmp_path, fake_registry):
    run_suite(options(tmp_path, runs=1, dry_run=True), DistContext())
    with pytest.raises(ResultsError, match="holds dry run results; this one is a timed run"):
        run_suite(options(tmp_path, runs=1), DistContext())
    other = tmp_path / "timed"
    run_suite(options(tmp_path, runs=1, out=other), DistContext())
    with pytest.raises(ResultsError, match="holds timed results; this one is a dry run"):
        run_suite(options(tmp_path, runs=1, out=other, dry_run=True), DistContext())


# --- the budget is progress; minutes only guard against a runaway run ---------------------------------------
def _run_with(tmp_path, spec, qualities):
    FakeWorkload.qualities = qualities
    log = RunLog(tmp_path / "log.txt")
    try:
        return execute_run(
            FakeWorkload,
            spec,
            FakeRecipe(),
            RunConfig(seed=1),
            log=log,
            submission=SUB,
            data_dir=tmp_path,
            dist=DistContext(),
        )
    finally:
        log.close()


def test_the_target_reached_past_the_minutes_guard_is_a_success(tmp_path):
    # a slow machine: every evaluation ends after the wall-clock guard, and the run that learns still succeeds
    spec = dataclasses.replace(FAKE_SPEC, max_minutes=1e-9)
    outcome = _run_with(tmp_path, spec, [0.95])
    assert outcome.status == "success" and outcome.reason == "target" and outcome.quality == 0.95
    assert first(tmp_path / "log.txt", "run_stop")["metadata"]["status"] == "success"
    assert keys_in(tmp_path / "log.txt").count("eval_accuracy") == 1


def test_a_run_short_of_its_target_past_the_guard_stops_as_a_runaway(tmp_path):
    spec = dataclasses.replace(FAKE_SPEC, max_minutes=1e-9)
    outcome = _run_with(tmp_path, spec, [0.5, 0.5, 0.5, 0.5])
    assert outcome.status == "aborted" and outcome.reason == "runaway guard"
    assert first(tmp_path / "log.txt", "trainperf_abort_reason")["value"] == "runaway guard"
    assert keys_in(tmp_path / "log.txt").count("eval_accuracy") == 1  # stopped at its first evaluation
    (tmp_path / "b").mkdir()
    outcome = _run_with(tmp_path / "b", FAKE_SPEC, [0.5, 0.5, 0.5, 0.5])
    assert outcome.reason == "progress budget"  # within the guard: the whole progress budget, then aborted


def test_the_report_counts_a_target_reached_past_the_minutes_guard_as_a_success(tmp_path, fake_registry, monkeypatch):
    run_suite(options(tmp_path, runs=1, seed=3), DistContext())
    late = dataclasses.replace(FAKE_SPEC, max_minutes=1e-9)
    monkeypatch.setattr("trainperf.registry.get_spec", lambda key, scale: late if key == FAKE_BENCHMARK.key else None)
    [system] = collect([tmp_path / "out"])
    [run] = system.benchmarks[0].runs
    assert run.status == "success" and run.success and run.note == ""
