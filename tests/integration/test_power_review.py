"""`trainperf review` and `trainperf report` on a package with MLPerf power logs (hand-written, tests/power_logs.py):
the power rules checked per file, the energy score as MLCommons' result_summarizer computes it beside the time
score, and a hostile power folder kept away from the official tools."""

from __future__ import annotations

import json
import os

import pytest
from power_logs import add_power, expected_joules, node_log, switch_log
from round_logs import APR_2024, package, plain_records, record
from untrusted import SYSTEM

from trainperf.errors import ResultsError
from trainperf.report.collect import collect
from trainperf.submission import power
from trainperf.submission.cli import format_review
from trainperf.submission.layout import copy_package
from trainperf.submission.review import _Bench, _check_power, review, review_json

pytest.importorskip("mlperf_logging")
DAY = 86_400_000
NODE_EFF, SW_WATTS, SW_EFF = 0.95, 200.0, 0.9


def runs(count: int = 5) -> list[list[dict]]:
    return [plain_records(APR_2024 + i * DAY, "resnet", i + 1, minutes=2 + i * 0.5) for i in range(count)]


def powered(tmp_path, recs_of: list[list[dict]], node=node_log):
    """A v4.0 resnet package whose runs have two nodes (run i's node_0 at 1000 + 10 i W, node_1 at 900 W) and a
    switch."""
    org = package(tmp_path, "resnet", recs_of)
    for i, recs in enumerate(recs_of):
        logs = {
            "node_0.txt": node(recs, 1000 + 10 * i),
            "node_1.txt": node(recs, 900),
            "sw_0.txt": switch_log(recs, 200),
        }
        add_power(org, "resnet", i, logs)
    return org


def only(result):
    (verdict,) = result.verdicts
    return verdict


def test_energy_score_is_given_beside_the_time_score_as_the_summarizer_computes_it(tmp_path):
    """Power logs that keep the rules: the energy score is the olympic mean of the runs' energies over the runs the time
    score keeps, equal to the known value and to the installed result_summarizer's, in the text and the JSON."""
    recs_of = runs()
    result = review(powered(tmp_path, recs_of))
    verdict = only(result)
    assert result.passed, verdict.problems
    energies = [expected_joules(r, [1000 + 10 * i, 900], NODE_EFF, SW_WATTS, SW_EFF) for i, r in enumerate(recs_of)]
    known = sum(energies[1:4]) / 3  # runs 1 to 3: the time score drops the fastest (0) and the slowest (4)
    assert verdict.energy_joules == pytest.approx(known, rel=1e-9)
    assert verdict.summarizer_energy_joules == pytest.approx(known, rel=1e-9)
    assert not [w for w in verdict.warnings if "power" in w or "energy" in w], verdict.warnings
    text = "\n".join(format_review(result))
    assert f"energy to train: trainperf {power.joules_text(verdict.energy_joules)} | result_summarizer" in text
    entry = json.loads(json.dumps(review_json(result)))["verdicts"][0]
    assert entry["energy_joules"] == pytest.approx(known) and entry["power_logs"] is True
    assert entry["scaled_energy_joules"] == pytest.approx(known)  # no scaling.json: as published


def test_report_reads_energy_to_train_from_a_packages_power_logs(tmp_path):
    """`report`'s "energy to train" of a published package: each run's energy from its power logs, as review's."""
    recs_of = runs()
    powered(tmp_path, recs_of)
    (bench,) = collect([tmp_path / "acme"])[0].benchmarks
    energies = [expected_joules(r, [1000 + 10 * i, 900], NODE_EFF, SW_WATTS, SW_EFF) for i, r in enumerate(recs_of)]
    assert [r.energy_joules for r in bench.runs] == pytest.approx(energies, rel=1e-9)
    assert bench.runs[0].energy_note == "MLPerf power logs (2 node(s), 1 switch(es))"


def test_power_logs_that_break_the_rules_are_named_with_their_rule(tmp_path):
    """Too few readings (and too slow), a measurement that starts after run_start, a conversion efficiency over 1,
    a negative interconnect estimate: each a warning naming the file and the rule; the energy is still the one the
    installed summarizer computes (run 3's uneven readings among those it counts), scaled as published by the review
    committee's scaling.json."""
    recs_of = runs()
    org = powered(tmp_path, recs_of)
    add_power(org, "resnet", 0, {"node_0.txt": node_log(recs_of[0], 1000, every=5000)})  # 25 readings, 0.2 Hz
    add_power(org, "resnet", 1, {"node_1.txt": node_log(recs_of[1], 900, lead=-3000)})  # starts 3 s late
    add_power(org, "resnet", 2, {"node_0.txt": node_log(recs_of[2], 1020, eff=1.5)})
    add_power(org, "resnet", 3, {"sw_0.txt": switch_log(recs_of[3], -5.0)})
    uneven = {f"node_{n}.txt": node_log(recs_of[3], 1000 + 50 * n, uneven=True) for n in range(2)}
    add_power(org, "resnet", 3, uneven)  # run 3 is among the runs the olympic mean keeps
    (org / "results" / SYSTEM / "resnet" / "scaling.json").write_text('{"scaling_factor": 1.05}')  # the committee's
    verdict = only(result := review(org))
    assert verdict.passed, verdict.problems
    found = "\n".join(w for w in verdict.warnings if power.RULE in w)
    assert "power/result_0/node_0.txt: 25 power readings, under the 60 a run needs" in found
    assert "power/result_0/node_0.txt: one reading every 4.88 s on average, slower than the 1 Hz" in found
    assert (
        "power/result_1/node_1.txt: the measurement starts 3.00 s after run_start: it does not cover the run" in found
    )
    assert "power/result_2/node_0.txt: conversion_eff 1.5 is not an efficiency in (0, 1]" in found
    assert "power/result_3/sw_0.txt: interconnect_power_est must be" in found
    assert all(w.startswith("power/result_") for w in found.splitlines())
    assert verdict.summarizer_energy_joules is not None
    assert verdict.energy_joules == pytest.approx(verdict.summarizer_energy_joules, rel=1e-9)
    assert verdict.scaled_energy_joules == pytest.approx(1.05 * verdict.energy_joules)  # as the summarizer scales it
    assert "x1.05 (scaling.json) = " in "\n".join(format_review(result))


def test_hostile_power_folders_are_kept_from_the_official_tools(tmp_path):
    """A power log over the size cap, one the summarizer would stop on (no power_measurement_start; a reading that is
    text), one whose logged value the gate refuses, a run without a node log, a stray name: each named, and the
    benchmark's power folder left out of the copy the official tools read (no energy score, no crash)."""
    recs_of = runs()
    bad = {
        0: {"node_0.txt": node_log(recs_of[0], 1000)[1:]},  # no power_measurement_start
        1: {"node_1.txt": node_log(recs_of[1], 900)[:5] + [record(recs_of[1][-1]["time_ms"], "power_reading", "9e9")]},
        2: {"node_0.txt": [record(1, "submission_division", "../../../tmp/x"), *node_log(recs_of[2], 1000)]},
    }
    for i, logs in bad.items():
        org = powered(tmp_path / str(i), recs_of)
        add_power(org, "resnet", i, logs)
        layout = copy_package(org, tmp_path / f"copy{i}" / "acme")
        assert not layout.power_logs and not (layout.root / "results" / SYSTEM / "resnet" / "power").exists()
        warnings = "\n".join(layout.warnings_of[(SYSTEM, "resnet")])
        assert f"results/{SYSTEM}/resnet/power/result_{i}/{next(iter(logs))}" in warnings, warnings
        assert "no energy score (the official summarizer cannot read it)" in warnings
    org = powered(tmp_path / "big", recs_of)
    big = org / "results" / SYSTEM / "resnet" / "power" / "result_3" / "node_0.txt"
    os.truncate(big, 17 * 2**20)  # sparse: over the 16 MiB cap, refused by its size before a byte is read
    (big.parent.parent / "result_4" / "node_0.txt").unlink()
    for node in ("node_0.txt", "node_1.txt"):
        (big.parent.parent / "result_2" / node).unlink()
    (big.parent / "notes.sh").write_text("rm -rf /\n")
    warnings = "\n".join(copy_package(org, tmp_path / "copy_big" / "acme").warnings_of[(SYSTEM, "resnet")])
    assert "power/result_3/node_0.txt: the file is" in warnings and "it is not read" in warnings
    assert "power/result_3/notes.sh is not a power log (node_<n>.txt, sw_<n>.txt); left out" in warnings
    assert "power/result_4: the node logs are not node_0.txt to node_0.txt" in warnings
    assert "power/result_2: no node_<n>.txt for result_2.txt; every run of a power submission has one" in warnings


def test_a_link_in_a_power_folder_refuses_the_package(tmp_path):
    recs_of = runs()
    org = powered(tmp_path, recs_of)
    node = org / "results" / SYSTEM / "resnet" / "power" / "result_0" / "node_1.txt"
    node.unlink()
    node.symlink_to("/etc/passwd")
    with pytest.raises(ResultsError, match="power/result_0/node_1.txt"):
        copy_package(org, tmp_path / "copy" / "acme")


def test_node_energy_on_uneven_readings_is_the_sum_of_reading_times_interval():
    """The rules' sum(power reading * duration since the previous reading), over the readings between the start and
    the stop (one before the start and one after the stop not counted), scaled to the run and by conversion_eff."""
    lines = [(0, "power_reading", 9e3), (100, "power_measurement_start", None), (100, "conversion_eff", 0.5)]
    lines += [(600, "power_reading", 1000.0), (1100, "power_reading", 3000.0), (2100, "power_reading", 2000.0)]
    lines += [(2100, "power_measurement_stop", None), (2600, "power_reading", 9e3)]
    data = "".join(
        f":::MLLOG {json.dumps({'time_ms': t, 'key': k, 'value': v, 'metadata': {}})}\n" for t, k, v in lines
    )
    log, why = power.parse(data.encode(), "node_0.txt")
    assert log is not None, why
    measured = 1000.0 * 500 + 3000.0 * 500 + 2000.0 * 1000  # W * ms over the 2000 ms measured
    assert power.node_joules(log, 60_000) == pytest.approx(0.5 * measured / 2000 * 60_000 / 1000)


def test_power_logs_of_a_round_before_v4_0_are_named():
    """Power submissions came with v4.0: power logs in an older round's package are named in a warning."""
    bench = _Bench(system=SYSTEM, benchmark="resnet")
    _check_power(bench, {}, "3.1.0")
    assert bench.has_power and any("power submissions came with v4.0" in w for w in bench.warnings), bench.warnings
    _check_power(bench := _Bench(system=SYSTEM, benchmark="resnet"), {}, "4.0.0")
    assert not bench.warnings
