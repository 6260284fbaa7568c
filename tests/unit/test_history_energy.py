"""The published energy to train in `trainperf history`: the shipped energy table, its checks, and the CLI."""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import pytest

from trainperf.errors import DataError
from trainperf.history import query
from trainperf.history.energy import DEFAULT_ENERGY_CSV, ENERGY_COLUMNS, load_energy, with_energy
from trainperf.history.query import COLUMNS, load_results


def _write(path: Path, columns, rows) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(columns)
        w.writerows(rows)
    return path


def _row(system: str, score: str, energy: str = "", benchmark: str = "resnet") -> list[str]:
    """A results row of one's own, with the optional energy_joules column last."""
    cells = dict.fromkeys(COLUMNS, "")
    cells.update(round="v4.0", org="Acme", system=system, benchmark=benchmark, division="closed")
    cells.update(score_min=score, n_acc="8", nodes="1", accelerator="X1")
    return [cells[c] for c in COLUMNS] + [energy]


@pytest.fixture()
def table(tmp_path) -> Path:
    """Three resnet results, the fastest with a published energy (3.6 MJ = 1 kWh), one bert result with none."""
    rows = [_row("fast", "2.0", "3600000"), _row("mid", "3.0"), _row("slow", "4.0", "0")]
    rows.append(_row("b", "5.0", "", benchmark="bert"))
    return _write(tmp_path / "results.csv", [*COLUMNS, "energy_joules"], rows)


def _run(argv: list[str]) -> int:
    from trainperf.history.cli import add_parser

    parser = argparse.ArgumentParser(prog="trainperf")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.fixture()
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # rich reads it: no truncated cells in captured output


def test_the_shipped_table_carries_the_published_v4_0_energy_and_no_other(tmp_path):
    results = load_results()
    having = [r for r in results if r.energy_joules is not None]
    assert len(having) == 24 and {(r.round, r.org) for r in having} == {
        ("v4.0", "smc-ac-power"),
        ("v4.0", "smc-dc-power"),
    }
    lora = [
        r
        for r in having
        if (r.org, r.system, r.benchmark) == ("smc-ac-power", "1xSMC-H100-SXM-80GB", "llama2_70b_lora")
    ]
    assert round(lora[0].energy_joules) == 12127904  # as SMC publishes it, "verified by MLCommons Association"
    assert "smc.co" in lora[0].energy_source
    same_logs = [
        r for r in results if (r.round, r.org, r.system, r.benchmark) == ("v4.0", "smc", "1xSMC-H100-SXM-80GB", "bert")
    ]
    assert same_logs[0].energy_joules is None and same_logs[0].energy_source is None  # no power logs: blank
    published = load_energy(DEFAULT_ENERGY_CSV)  # every row of the benchmark's data copy, to the joule
    with Path(__file__).resolve().parents[2].joinpath("benchmarks/data/published_energy_v4.0.csv").open() as f:
        source = {("v4.0", r["org"], r["system"], r["benchmark"]): float(r["energy_joules"]) for r in csv.DictReader(f)}
    assert {k: v[0] for k, v in published.items()} == source  # fmt: skip


def test_a_table_of_ones_own_carries_energy_in_its_own_column_and_zero_stays_blank(table):
    rs = {r.system: r for r in load_results(table)}
    assert rs["fast"].energy_joules == 3600000.0
    assert rs["mid"].energy_joules is None and rs["slow"].energy_joules is None  # empty, and 0 is never an energy


@pytest.mark.parametrize(
    ("cell", "words"),
    [("0", "not a positive number"), ("-5", "not a positive number"), ("inf", "not a positive number"),
     ("lots", "not a positive number"), ("1_000", "not a positive number"), ("", "'energy_joules' cell is empty")],
)  # fmt: skip
def test_a_bad_energy_row_is_an_error_naming_file_and_line(tmp_path, cell, words):
    path = _write(tmp_path / "e.csv", ENERGY_COLUMNS, [["v4.0", "Acme", "fast", "resnet", cell, "a page"]])
    with pytest.raises(DataError, match=rf"e\.csv, line 2: .*{words}"):
        load_energy(path)


def test_an_energy_row_twice_or_naming_no_result_is_an_error(tmp_path, table):
    twice = _write(tmp_path / "twice.csv", ENERGY_COLUMNS, [["v4.0", "Acme", "fast", "resnet", "1", "x"]] * 2)
    with pytest.raises(DataError, match=r"twice\.csv, line 3: .*second energy"):
        load_energy(twice)
    stray = _write(tmp_path / "stray.csv", ENERGY_COLUMNS, [["v4.0", "Acme", "nowhere", "resnet", "1", "x"]])
    with pytest.raises(DataError, match=r"stray\.csv: v4\.0 Acme nowhere resnet names no row"):
        with_energy(load_results(table), load_energy(stray), stray)
    with pytest.raises(DataError, match="missing column"):
        load_energy(_write(tmp_path / "cols.csv", ENERGY_COLUMNS[:4], []))


def test_history_energy_lists_the_results_with_an_energy_in_kwh(wide, capsys, table):
    assert _run(["history", "energy", "--results-csv", str(table)]) == 0
    out = capsys.readouterr().out
    assert "energy (kWh)" in out and "1.000" in out and "fast" in out
    assert "mid" not in out and "slow" not in out
    assert _run(["history", "energy", "--results-csv", str(table), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["system"], row["energy_joules"]) == ("fast", 3600000.0)
    assert _run(["history", "energy", "--results-csv", str(table), "--benchmark", "bert"]) == 0
    assert "no closed result with a score and a published energy" in capsys.readouterr().out


def test_other_queries_show_the_energy_where_present_and_blank_elsewhere(wide, capsys, table):
    assert _run(["history", "fastest", "--results-csv", str(table), "--json"]) == 0
    rows = {r["benchmark"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["resnet"]["energy_joules"] == 3600000.0 and rows["bert"]["energy_joules"] is None  # null, not 0
    assert _run(["history", "fastest", "--results-csv", str(table)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any("energy (kWh)" in line for line in lines)
    assert "1.000" in next(line for line in lines if " resnet " in line)
    bert = next(line for line in lines if " bert " in line)
    assert "–" in bert.split("│")[-2] and "0.000" not in bert  # the energy cell of bert: blank
    assert _run(["history", "per-accelerator", "resnet", "--results-csv", str(table), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["energy_joules"] == 3600000.0
    assert _run(["history", "place", "resnet", "3.5", "--results-csv", str(table)]) == 0
    assert "energy (kWh)" in capsys.readouterr().out  # a neighbour (fast) has one
    assert _run(["history", "fastest", "--round", "v2.0"]) == 0  # no energy in v2.0: no energy column
    assert "energy" not in capsys.readouterr().out
    speed = query.speedup(load_results(table), "Acme", "resnet")
    assert [r.energy_joules for r in speed] == [3600000.0]
