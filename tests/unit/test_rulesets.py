"""The package's own round: which MLPerf Training ruleset `check` and `review` give the official tools, and which of
the installed tools' checks are warnings for an older round (hand-written logs; no copy of a published one)."""

from __future__ import annotations

import csv
import datetime as dt
from pathlib import Path

import pytest
from untrusted import SYSTEM, foreign_log, log_lines

from trainperf.errors import UsageError
from trainperf.rules import rulesets
from trainperf.rules.compliance import check_log
from trainperf.submission.official import ToolRun
from trainperf.submission.review import _Bench, _check_seeds_and_consistency, _package_checker_errors, _round_gap, _Run

pytest.importorskip("mlperf_logging")
HISTORY = Path(rulesets.__file__).parents[1] / "history" / "data" / "mlperf_training_results.csv"


# --- the rulesets -------------------------------------------------------------------------------------
def test_every_training_ruleset_of_the_installed_tools_from_1_0_on_is_supported():
    found = rulesets.supported()
    assert found[0] == "1.0.0" and {"1.1.0", "2.0.0", "2.1.0", "3.0.0"} <= set(found)
    assert rulesets.normalize("v1.1") == rulesets.normalize("1.1") == "1.1.0"
    for wrong in ("0.7.0", "9.9", "latest"):
        with pytest.raises(UsageError, match="support 1.0.0, 1.1.0"):
            rulesets.normalize(wrong)


def test_the_round_ends_are_the_latest_log_dates_of_the_published_rounds():
    latest: dict[str, str] = {}
    with HISTORY.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row["log_date"]:
                latest[row["round"]] = max(latest.get(row["round"], ""), row["log_date"])
    for ruleset, end in rulesets.ROUND_ENDS.items():
        assert latest[rulesets.round_name(ruleset)] == end.isoformat(), ruleset


def test_the_round_is_the_users_then_trainperfs_then_the_repositorys_then_the_logs(tmp_path):
    repo = tmp_path / "training_results_v1.1" / "NVIDIA"
    oct_2021, may_2026 = dt.date(2021, 10, 19), dt.date(2026, 5, 1)

    def pick(**kw):
        args = {"given": None, "path": tmp_path, "trainperf_logs": False, "latest": oct_2021, "held": {"bert"}}
        return rulesets.package_ruleset(**{**args, **kw})[0::2]

    assert pick(given="2.1", path=repo, trainperf_logs=True) == ("2.1.0", False)
    assert pick(path=repo, trainperf_logs=True, latest=may_2026) == ("2.0.0", False)  # trainperf's rules are v2.0's
    assert pick(path=repo, latest=dt.date(2022, 5, 1)) == ("1.1.0", False)
    assert pick() == ("1.1.0", True)
    # a result's later runs, days after its first (the history's date), are still of its round
    assert pick(latest=rulesets.ROUND_ENDS["1.1.0"] + dt.timedelta(days=10)) == ("1.1.0", True)
    # a benchmark its date's round did not have moves it on: gpt3 came with v3.0
    assert pick(latest=dt.date(2022, 5, 1), held={"gpt3", "bert"}) == ("3.0.0", True)
    with pytest.raises(UsageError, match="name the round with --ruleset"):
        pick(latest=dt.date(2024, 1, 1), held={"gpt3", "minigo"})  # no round holds both
    with pytest.raises(UsageError, match="v0.7, a ruleset the installed official tools do not support"):
        pick(path=tmp_path / "training_results_v0.7" / "Google")


# --- check: a reference log of another round ------------------------------------------------------------
def test_a_foreign_log_is_checked_by_the_rules_of_its_round_and_says_so(tmp_path):
    log = foreign_log(tmp_path / "result_0.txt")
    inferred = check_log(log)
    assert inferred.ruleset == "1.1.0" and inferred.scale == "reference"
    assert any("checked by the MLPerf Training v1.1 rules, inferred from the logs" in w for w in inferred.warnings)
    given = check_log(log, ruleset="2.0")
    assert given.ruleset == "2.0.0" and not any("inferred" in w for w in given.warnings)
    with pytest.raises(UsageError, match="unknown MLPerf Training ruleset '0.6'"):
        check_log(log, ruleset="0.6")


def test_v1_1s_weights_initialization_check_is_a_warning_for_v1_1_only(tmp_path):
    """The v1.1 round's checker warned about a closed log without weights_initialization (mlcommons/logging 63c9709;
    Baidu's published v1.1 PaddlePaddle resnet logs none); 4.1.68 fails it for every ruleset, as v2.0's did."""
    log = foreign_log(tmp_path / "result_0.txt", {"submission_division": "closed", "opt_name": "lars"})
    weights = "the log must contain at least one 'weights_initialization' line"
    v11 = check_log(log, ruleset="1.1.0")
    assert not any(p.startswith(weights) for p in v11.problems), v11.problems
    assert any(w.startswith(weights) and "63c9709" in w for w in v11.warnings)
    v20 = check_log(log, ruleset="2.0.0")
    assert any(p.startswith(weights) for p in v20.problems)


def test_a_mini_log_is_checked_by_trainperfs_mini_rules_whatever_its_date(tmp_path):
    log = tmp_path / "result_0.txt"
    log.write_text("\n".join(log_lines()) + "\n", encoding="utf-8")
    assert check_log(log).ruleset == "2.0.0"
    with pytest.raises(UsageError, match="applies to reference-scale logs only"):
        check_log(log, ruleset="1.1.0")


# --- review: checks of later rounds ---------------------------------------------------------------------
def test_the_no_seed_error_is_a_warning_before_v4_1_and_an_error_from_v4_1():
    no_seed = [
        "Seed checker failed and found the following errors: Result file results/box/bert/result_0.txt logs no seed.",
        "Seed checker failed",
    ]
    errors, warnings = _package_checker_errors(no_seed, "1.1.0")
    assert errors == [] and "not a rule of the v1.1 round" in warnings[0] and "ac0096c" in warnings[0]
    errors, warnings = _package_checker_errors(no_seed, "4.1.0")
    assert errors == no_seed and warnings == []

    def seeds_of(ruleset):
        runs = [
            _Run(name=f"result_{i}.txt", path=Path("x"), logged=None, records=[{"key": "run_start"}]) for i in (0, 1)
        ]
        bench = _Bench(system=SYSTEM, benchmark="bert", runs=runs)
        _check_seeds_and_consistency(bench, "acme", None, ruleset)
        return bench

    assert not seeds_of("2.1.0").problems and "not a rule of the v2.1 round" in seeds_of("2.1.0").warnings[0]
    assert seeds_of("4.1.0").problems[0].startswith("result_0.txt: logs no seed")


def test_the_batch_size_comparison_crash_is_a_gap_of_the_tool_before_v3_0_only():
    """rcp_checker compares global_batch_size across files from v3.0 on (mlcommons/logging 74c310b)."""
    err = "WARNING -  Batch sizes in files do not match.\nTraceback (most recent call last):\n  ...\nKeyError: None\n"
    ran = ToolRun(tool="rcp_checker", rc=1, out="", err=err)
    assert "v2.1 round's rcp_checker" in _round_gap(ran, {}, "2.1.0")
    assert _round_gap(ran, {}, "3.0.0") == ""


def test_a_copy_after_run_stop_of_an_evaluation_within_the_run_is_read_and_a_new_one_refused():
    """NVIDIA's published v1.1 HugeCTR dlrm logs repeat their last evaluation (same value, same epoch) 1 ms after
    run_stop: a copy, not an evaluation off the clock. One with another value after run_stop is still refused, and
    so is the copy of an evaluation that was itself outside the run."""
    from trainperf.run_checks import timing_problems

    def log(*evals):
        recs = [
            {"key": "run_start", "time_ms": 1_634_248_000_000},
            {"key": "run_stop", "time_ms": 1_634_248_488_079, "metadata": {"status": "success"}},
        ]
        recs += [{"key": "eval_accuracy", "time_ms": t, "value": v, "metadata": {"epoch_num": e}} for t, v, e in evals]
        return list(enumerate(recs, 1))

    within = (1_634_248_488_079, 0.802656, 1.99988)
    assert timing_problems(log(within, (1_634_248_488_080, 0.802656, 1.99988))) == []
    (problem,) = timing_problems(log(within, (1_634_248_488_080, 0.81, 1.99988)))
    assert "after run_stop" in problem
    late = (1_634_248_600_000, 0.81, 3)
    assert len(timing_problems(log(late, (1_634_248_600_001, 0.81, 3)))) == 2


def test_a_key_the_installed_rules_renamed_after_v2_1_is_read_by_its_v2_1_name(tmp_path):
    """The v2.1 closed bert rules asked for opt_epsilon; the installed 2.1.0 rules ask for opt_lamb_epsilon
    (mlcommons/logging d82b94d, after the v2.1 results were published), which published v2.1 bert logs lack."""
    closed = {"submission_benchmark": "bert", "submission_division": "closed"}
    missing = "the log must contain exactly one 'opt_lamb_epsilon' line but has 0"
    renamed = check_log(foreign_log(tmp_path / "a" / "result_0.txt", {**closed, "opt_epsilon": 1e-6}), ruleset="2.1")
    assert missing not in renamed.problems and any(w.startswith(missing) and "d82b94d" in w for w in renamed.warnings)
    assert missing in check_log(foreign_log(tmp_path / "b" / "result_0.txt", closed), ruleset="2.1").problems


def test_every_reference_scale_check_says_what_it_fixes():
    keys = {key for checks in rulesets.REFERENCE_SCALE_OPEN_CHECKS.values() for key in checks}
    assert keys <= set(rulesets.REFERENCE_SCALE_SUBJECTS), keys - set(rulesets.REFERENCE_SCALE_SUBJECTS)
    assert rulesets.REFERENCE_SCALE_SUBJECTS["global_batch_size"] == "batch size"
    assert rulesets.REFERENCE_SCALE_SUBJECTS["eval_accuracy"] == "quality target"
