"""Result files MLCommons published although they break trainperf's timeline rule: accepted by their bytes, with a
warning, and nothing else (trainperf/published.py). The logs here are written for the test: one trains on after
run_stop for longer than the run took (as Google's v1.0 tpu-v4-128 ssd does), one logs the evaluation that reaches
the target after run_stop (as four of xFusion's v3.1 L40S bert files do)."""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path

import pytest
from test_timeline import FOREIGN, first, records, write

from trainperf import published
from trainperf.errors import DataError, ResultsError
from trainperf.history.query import load_results
from trainperf.results import parse_run
from trainperf.rules import compliance
from trainperf.timeline import RULE


def trains_on(recs):
    """Training logged after run_stop for longer than the run (a TPU training on while its evaluation runs)."""
    start, stop = first(recs, "run_start")["time_ms"], first(recs, "run_stop")["time_ms"]
    recs.append({"key": "block_start", "time_ms": stop + 2 * (stop - start), "metadata": {"first_epoch_num": 2}})
    return recs


def evaluates_after(recs):
    """The last evaluation (the one at the target) logged after run_stop."""
    last = [r for r in recs if r["key"] == "eval_accuracy"][-1]
    last["time_ms"] = first(recs, "run_stop")["time_ms"] + 5000
    return recs


def listed(monkeypatch, tmp_path: Path, *logs: Path, finding: str = "after run_stop") -> None:
    """A table that lists ``logs`` by their digests, in place of the shipped one."""
    table = tmp_path / "published_exceptions.csv"
    with table.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(published.COLUMNS)
        for i, log in enumerate(logs):
            digest = hashlib.sha256(log.read_bytes()).hexdigest()
            w.writerow(["v1.0", "acme", f"results/box/resnet/result_{i}.txt", digest, finding, "published as it is"])
    monkeypatch.setattr(published, "TABLE", table)


@pytest.mark.parametrize("edit", [trains_on, evaluates_after], ids=["training after", "evaluation after"])
def test_a_listed_file_is_read_and_scored_with_a_warning_and_an_edit_of_it_is_refused(tmp_path, monkeypatch, edit):
    recs = edit(records(drop=FOREIGN))
    log = write(tmp_path / "log.txt", recs)
    with pytest.raises(ResultsError, match=f"{RULE}: .* after run_stop"):
        parse_run(log)  # unlisted: refused, as any log
    listed(monkeypatch, tmp_path, log)
    run = parse_run(log)
    start, stop = first(recs, "run_start")["time_ms"], first(recs, "run_stop")["time_ms"]
    assert run.minutes == (stop - start) / 60000  # the published score's run_stop, as MLCommons scored it
    assert len(run.accepted) == 1 and "as MLCommons published it in v1.0" in run.accepted[0]
    result = compliance.check_log(log)
    assert not any(p.startswith(compliance.TIMING_PROBLEM) for p in result.problems)
    assert any(RULE in w and "published it in v1.0" in w for w in result.warnings)

    # The attack the rule stops: run_stop moved a second earlier. The bytes differ, so the rule applies again.
    first(recs, "run_stop")["time_ms"] -= 1000
    moved = write(tmp_path / "moved.txt", recs)
    with pytest.raises(ResultsError, match=f"{RULE}: .* after run_stop"):
        parse_run(moved)
    result = compliance.check_log(moved)
    assert any(p.startswith(compliance.TIMING_PROBLEM) and RULE in p for p in result.problems)


def test_only_the_timeline_findings_the_row_names_are_accepted(tmp_path, monkeypatch):
    recs = trains_on(records(drop=FOREIGN))
    recs.append(dict(first(recs, "run_start")))  # and run_start logged twice: another rule, never accepted
    log = write(tmp_path / "log.txt", recs)
    listed(monkeypatch, tmp_path, log)
    with pytest.raises(ResultsError, match="run_start is logged 2 times"):
        parse_run(log)
    # a row that names another finding accepts nothing of this one
    other = write(tmp_path / "other.txt", trains_on(records(drop=FOREIGN)))
    listed(monkeypatch, tmp_path, other, finding="an evaluation outside the timed run")
    with pytest.raises(ResultsError, match=f"{RULE}: block_start .* after run_stop"):
        parse_run(other)


def test_a_malformed_table_is_refused_naming_its_row(tmp_path, monkeypatch):
    table = tmp_path / "published_exceptions.csv"
    table.write_text(",".join(published.COLUMNS) + "\nv1.0,acme,results/../x.txt,abc,after run_stop,why\n")
    monkeypatch.setattr(published, "TABLE", table)
    with pytest.raises(DataError, match="line 2: bad sha256, path"):
        published.table()


def test_the_shipped_table_names_published_results():
    """Every row is a result file of a (round, org, system, benchmark) the history table scores, whose finding the
    timeline rule reports."""
    rows = published.table()
    assert len(rows) == 9
    scored = {(r.round, r.org, r.system, r.benchmark) for r in load_results() if r.score_min is not None}
    for row in rows.values():
        _, system, benchmark, name = row.path.split("/")
        assert (row.round, row.org, system, benchmark) in scored
        assert name.startswith("result_") and row.finding == "after run_stop"
