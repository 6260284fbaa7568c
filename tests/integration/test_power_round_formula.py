"""The energy score by the package's own round's summarizer: v4.0's read a node log's lines in file order and stopped
the measurement at its last reading (mlcommons/logging 4054425, tag 4.0.0-rc3-rcp-prunning), so a published v4.0
log whose power_measurement_stop sits on its last line but carries power_measurement_start's time has an energy score
there; the installed summarizer sorts the lines and divides by a measurement of length zero. Hand-written logs
(tests/power_logs.py), no copy of a published one."""

from __future__ import annotations

import json

import pytest
from power_logs import add_power, expected_joules, run_window, switch_log
from round_logs import APR_2024, package, plain_records, record
from untrusted import SYSTEM

from trainperf.report.collect import collect
from trainperf.submission import power
from trainperf.submission.cli import format_review
from trainperf.submission.layout import copy_package
from trainperf.submission.review import review

pytest.importorskip("mlperf_logging")
DAY = 86_400_000
NODE_EFF, SW_EFF = 0.95, 0.9


def runs(count: int = 5) -> list[list[dict]]:
    return [plain_records(APR_2024 + i * DAY, "resnet", i + 1, minutes=2 + i * 0.5) for i in range(count)]


def stop_last_with_start_time(recs: list[dict], watts: float, *, every: int = 500, early: bool = False) -> list[dict]:
    """A node's log in the published v4.0 shape: power_measurement_start first, conversion_eff, a reading of
    ``watts`` every ``every`` ms from 1 s before run_start to 1 s after run_stop, then power_measurement_stop on the
    last line with the start's time. ``early``: one reading before the start line (v4.0's summarizer counts it from
    time 0)."""
    start, stop = run_window(recs)
    begin, end = start - 1000, stop + 1000
    out = [record(begin - 500, "power_reading", watts, host="node")] if early else []
    out += [record(begin, "power_measurement_start", event="INTERVAL_START", host="node")]
    out += [record(begin, "conversion_eff", NODE_EFF, host="node")]
    out += [record(t, "power_reading", watts, host="node", unit="W") for t in range(begin + every, end, every)]
    out.append(record(end, "power_reading", watts, host="node", unit="W"))
    return out + [record(begin, "power_measurement_stop", event="INTERVAL_END", host="node")]


def powered(tmp_path, recs_of: list[list[dict]], **shape) -> tuple:
    """A v4.0 resnet package whose runs have two nodes in the published shape and a switch; (org, energies)."""
    org = package(tmp_path, "resnet", recs_of)
    energies = []
    for i, recs in enumerate(recs_of):
        logs = {f"node_{n}.txt": stop_last_with_start_time(recs, 1000 + 10 * i - 100 * n, **shape) for n in range(2)}
        add_power(org, "resnet", i, {**logs, "sw_0.txt": switch_log(recs, 200, SW_EFF)})
        energies.append(expected_joules(recs, [1000 + 10 * i, 900 + 10 * i], NODE_EFF, 200, SW_EFF))
    return org, energies


def only(result):
    (verdict,) = result.verdicts
    return verdict


def test_v4_0_logs_stopped_on_their_last_line_get_v4_0s_energy_score(tmp_path):
    """The v4.0 shape: kept from the installed summarizer (which cannot read it), and the energy score v4.0's
    summarizer gave (every reading up to the stop line, the measurement stopping at the last reading), the olympic
    mean over the runs the time score keeps, with a warning that says so; the package still passes."""
    recs_of = runs()
    org, energies = powered(tmp_path, recs_of)
    layout = copy_package(org, tmp_path / "copy" / "acme")
    assert not (layout.root / "results" / SYSTEM / "resnet" / "power").exists()  # the installed tools never see it
    result = review(org)
    verdict = only(result)
    assert result.ruleset == "4.0.0" and result.passed, verdict.problems
    assert verdict.energy_joules == pytest.approx(sum(energies[1:4]) / 3, rel=1e-9)
    assert verdict.summarizer_energy_joules is None and verdict.power_withheld
    said = "\n".join(verdict.warnings)
    assert "power/result_0/node_0.txt: no reading or power_measurement_stop after power_measurement_start" in said
    assert "kept from the installed result_summarizer, which cannot read it; the energy score is the one v4.0's" in said
    assert "differs from result_summarizer's" not in said
    assert not [w for w in verdict.warnings if power.RULE in w], verdict.warnings  # 2 Hz, covering the run
    assert "| result_summarizer cannot read these power logs" in "\n".join(format_review(result))


def test_report_gives_each_v4_0_runs_energy_as_review_does(tmp_path):
    """`report`'s energy to train of the same package: each run's energy by v4.0's formula (the package's round),
    said so; a run whose log v4.0's summarizer could not read either (a reading before the start) has none."""
    recs_of = runs()
    org, energies = powered(tmp_path, recs_of)
    add_power(org, "resnet", 4, {"node_1.txt": stop_last_with_start_time(recs_of[4], 1000, early=True)})
    (bench,) = collect([tmp_path / "acme"])[0].benchmarks
    assert bench.round == "v4.0"
    assert [r.energy_joules for r in bench.runs[:4]] == pytest.approx(energies[:4], rel=1e-9)
    assert "by v4.0's summarizer's formula (lines in file order)" in bench.runs[0].energy_note
    assert bench.runs[4].energy_joules is None
    assert bench.runs[4].energy_note.startswith("power log unreadable: node_1.txt: a power_reading before"), bench


def test_a_later_round_keeps_the_installed_summarizers_reading(tmp_path):
    """The same logs judged by the v4.1 rules: the installed summarizer's formula, no energy score, as before."""
    org, _ = powered(tmp_path, runs())
    verdict = only(review(org, ruleset="4.1.0"))
    assert verdict.energy_joules is None and not verdict.has_power
    assert any("no energy score (the official summarizer cannot read it)" in w for w in verdict.warnings)


def test_too_few_and_too_sparse_readings_in_the_v4_0_shape_are_still_named_with_their_rule(tmp_path):
    """A reading every 5 s (25 over a 2-minute run): under the 60 a run needs and slower than 1 Hz, each named with
    the power rules, as for any other log; the measurement read as v4.0 read it (not one of length zero)."""
    recs_of = runs()
    org, _ = powered(tmp_path, recs_of)
    add_power(org, "resnet", 0, {"node_0.txt": stop_last_with_start_time(recs_of[0], 1000, every=5000)})
    verdict = only(review(org))
    found = "\n".join(w for w in verdict.warnings if power.RULE in w)
    assert "power/result_0/node_0.txt: 25 power readings, under the 60 a run needs" in found
    assert "power/result_0/node_0.txt: one reading every 4.88 s on average, slower than the 1 Hz" in found
    assert "does not cover the run" not in found


@pytest.mark.parametrize("shape", ["no readings", "a reading before the start"])
def test_logs_v4_0s_summarizer_could_not_read_still_get_no_energy_score(tmp_path, shape):
    """No reading at all (a measurement of length zero for v4.0's summarizer too), or a reading before the start
    line (which it counts from time 0): left out, no energy score, named as before."""
    recs_of = runs()
    org, _ = powered(tmp_path, recs_of)
    node = stop_last_with_start_time(recs_of[2], 1000, early=shape != "no readings")
    if shape == "no readings":
        node = [r for r in node if r["key"] != "power_reading"]
    add_power(org, "resnet", 2, {"node_1.txt": node})
    verdict = only(review(org))
    assert verdict.energy_joules is None and not verdict.has_power
    said = "\n".join(verdict.warnings)
    assert "power is left out of the check: no energy score (the official summarizer cannot read it)" in said
    why = "no reading or power_measurement_stop" if shape == "no readings" else "a power_reading before"
    assert f"power/result_2/node_1.txt: {why}" in said, said


def test_v4_0s_node_energy_reads_lines_in_file_order():
    """By hand: readings summed in file order up to the stop line (the one after it not counted, nor the conversion
    efficiency after it), each times the time since the previous one, over a measurement from the start to the latest
    reading; the installed reading of the same log is a measurement of length zero."""
    lines = [(100, "power_measurement_start", None), (100, "conversion_eff", 0.5), (600, "power_reading", 1000.0)]
    lines += [(1100, "power_reading", 3000.0), (2100, "power_reading", 2000.0), (100, "power_measurement_stop", None)]
    lines += [(2600, "power_reading", 9e3), (2600, "conversion_eff", 0.1)]
    data = "".join(
        f":::MLLOG {json.dumps({'time_ms': t, 'key': k, 'value': v, 'metadata': {}})}\n" for t, k, v in lines
    )
    log, why = power.parse(data.encode(), "node_0.txt")
    assert log is not None, why
    assert power.unreadable(log) is not None and power.unreadable(log, power.IN_FILE_ORDER) is None
    measured = 1000.0 * 500 + 3000.0 * 500 + 2000.0 * 1000  # W * ms over the 2000 ms from 100 to 2100
    got = power.node_joules(log, 60_000, power.formula_of("4.0.0"))
    assert got == pytest.approx(0.5 * measured / 2000 * 60_000 / 1000)
