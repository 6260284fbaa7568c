"""The timeline rule (trainperf/timeline.py): forged timelines are refused by check, by the reader every other command
uses (report, review, compare) and name the rule; the shapes of the published logs are read as before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from untrusted import MLLOG, ORG, SYSTEM, log_lines, make_package

from trainperf.errors import ResultsError
from trainperf.harness.skew import MAX_SKEW_MS
from trainperf.report.collect import collect
from trainperf.report.compare import compare_paths
from trainperf.results import parse_run
from trainperf.rules import compliance
from trainperf.timeline import CLOCK_SKEW_MS, RULE

FOREIGN = ("trainperf_scale", "trainperf_division")  # without them, a log another submitter's code wrote


def records(drop: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    return [
        json.loads(line[len(MLLOG) :])
        for line in log_lines()
        if line.startswith(MLLOG) and json.loads(line[len(MLLOG) :])["key"] not in drop
    ]


def write(path: Path, recs: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(MLLOG + json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    return path


def first(recs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    return next(r for r in recs if r["key"] == key)


def refused_everywhere(tmp_path: Path, recs: list[dict[str, Any]], words: str) -> None:
    """``check`` fails the log, and the reader of report, review and compare refuses it, naming the rule."""
    log = write(tmp_path / "log.txt", recs)
    with pytest.raises(ResultsError, match=f"{RULE}: .*{words}"):
        parse_run(log)
    result = compliance.check_log(log)
    assert not result.passed
    assert any(p.startswith(compliance.TIMING_PROBLEM) and RULE in p and words in p for p in result.problems)
    package = tmp_path / "pkg"
    make_package(package)
    write(package / ORG / "results" / SYSTEM / "resnet" / "result_0.txt", recs)
    with pytest.raises(ResultsError, match=f"result_0.txt: {RULE}: .*{words}"):
        collect([package / ORG])  # report
    with pytest.raises(ResultsError, match=RULE):
        compare_paths(package / ORG, package / ORG)  # compare reads its sides as the report does


def test_the_unedited_log_is_read(tmp_path):
    run = parse_run(write(tmp_path / "log.txt", records()))
    assert run.success and run.minutes == 1500 / 60000


def test_run_start_moved_after_training_began_is_refused(tmp_path):
    """Moving run_start later leaves the first blocks, epochs and evaluations before it: a faster score than the
    run took, refused."""
    recs = records()
    first(recs, "run_start")["time_ms"] = [r for r in recs if r["key"] == "block_start"][1]["time_ms"] - 1
    refused_everywhere(tmp_path, recs, "before run_start")


def test_run_stop_and_evaluations_moved_earlier_are_refused(tmp_path):
    """run_stop and the evaluations moved back in time while the blocks and epochs stay where they were."""
    recs = records()
    early = first(recs, "block_start")["time_ms"]
    for i, r in enumerate(r for r in recs if r["key"] in ("eval_start", "eval_accuracy", "eval_stop", "run_stop")):
        r["time_ms"] = early + 10 + i
    refused_everywhere(tmp_path, recs, "after run_stop")


def test_progress_that_goes_back_is_refused(tmp_path):
    """epoch_num 1.5 then 1.0: the progress the RCP check reads is inflated."""
    recs = records()
    evals = [r for r in recs if r["key"] == "eval_accuracy"]
    evals[0]["metadata"]["epoch_num"], evals[1]["metadata"]["epoch_num"] = 1.5, 1.0
    refused_everywhere(tmp_path, recs, "progress never goes back")


def test_records_out_of_time_order_in_trainperfs_own_log_are_refused(tmp_path):
    recs = records()
    epochs = [r for r in recs if r["key"] == "epoch_stop"]
    epochs[0]["time_ms"] = epochs[1]["time_ms"] + 1  # still inside the run, but after the next epoch's end
    refused_everywhere(tmp_path, recs, "in time order")


@pytest.mark.parametrize(("share", "read"), [(0.4, True), (0.6, False)])
def test_training_after_run_stop_in_another_submitters_log_is_bounded(tmp_path, share, read):
    """Published logs show training that goes on while the deciding evaluation runs (a third of the run at most);
    a log whose training goes on longer after run_stop had its run_stop moved earlier."""
    recs = records(drop=FOREIGN)
    start, stop = first(recs, "run_start")["time_ms"], first(recs, "run_stop")["time_ms"]
    late = {"key": "block_start", "time_ms": stop + int(share * (stop - start)), "metadata": {"first_epoch_num": 2}}
    recs.append(late)  # a block logged after run_stop, as Google's v2.0 dlrm logs one
    log = write(tmp_path / "log.txt", recs)
    if read:
        assert parse_run(log).minutes == (stop - start) / 60000
    else:
        with pytest.raises(ResultsError, match=f"{RULE}: block_start at line .* after run_stop"):
            parse_run(log)


def test_trainperfs_own_log_trains_nothing_after_run_stop(tmp_path):
    recs = records()
    recs.append({"key": "block_start", "time_ms": first(recs, "run_stop")["time_ms"] + 1, "metadata": {}})
    with pytest.raises(ResultsError, match=f"{RULE}: block_start .* after run_stop .* logs run_stop after its last"):
        parse_run(write(tmp_path / "log.txt", recs))


def test_an_untimed_evaluation_during_initialization_is_read_and_never_counted(tmp_path):
    """An evaluation logged before init_stop (untimed, as the rules allow) does not make the run a success."""
    recs = records(drop=FOREIGN)
    init_stop = recs.index(first(recs, "init_stop"))
    during = {**first(recs, "eval_accuracy"), "value": 0.99, "time_ms": recs[init_stop]["time_ms"] - 1}
    recs.insert(init_stop, during)
    run = parse_run(write(tmp_path / "log.txt", recs))
    assert run.evaluations == [0.6, 0.95]
    recs.insert(init_stop + 2, {**during, "time_ms": first(recs, "run_start")["time_ms"] - 1})  # after init_stop
    with pytest.raises(ResultsError, match=f"{RULE}: eval_accuracy .* before run_start"):
        parse_run(write(tmp_path / "late.txt", recs))


def test_the_clock_skew_allowed_is_the_harness_bound():
    assert CLOCK_SKEW_MS == MAX_SKEW_MS
