"""The one table of limits (trainperf/limits.py) applied by every reader: report, package, check, review and
`run --set` refuse a file or value over a limit with a clear error naming it, never a traceback, and read no more
than the limits allow (a sparse file is refused by its apparent size, counts are checked while lines are read)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from untrusted import MLLOG, log_lines, make_package

from trainperf import limits
from trainperf.errors import ResultsError, UsageError
from trainperf.report.ablation import read_ablation
from trainperf.report.collect import collect
from trainperf.results import mllog_lines, read_mllog_lines
from trainperf.rules import gate
from trainperf.rules.closed import parse_overrides
from trainperf.run_checks import impossible_quality
from trainperf.system import check_system_file

DEEP = "[" * 100_000 + "]" * 100_000
LONG_INT = "9" * 5000


def result(org: Path, i: int = 0) -> Path:
    return org / "results" / "box" / "resnet" / f"result_{i}.txt"


def replace_in(path: Path, old: str, new: str, count: int = -1) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, count))


def with_lines(path: Path, extra: list[str]) -> None:
    """The log with ``extra`` MLLOG lines inserted before its run_stop."""
    lines = path.read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if '"run_stop"' in ln)
    path.write_text("\n".join(lines[:at] + extra + lines[at:]) + "\n")


def test_one_table_every_reader_takes_its_limits_from():
    import trainperf.report.ablation as ablation
    import trainperf.rules.gate as gate_mod

    assert {name: value for name, (value, _) in limits.LIMITS.items()} == {
        name: getattr(limits, name) for name in limits.LIMITS
    }
    assert gate_mod.MAX_LINE_CHARS is limits.MAX_LINE_CHARS
    for module in (gate_mod, ablation):  # no copy of a limit of their own
        assert not [n for n in vars(module) if n.startswith("MAX_") and n.endswith("BYTES")]


def test_report_refuses_a_sparse_result_file_by_its_size_unread(tmp_path):
    org = make_package(tmp_path)
    with open(result(org, 4), "r+b") as f:
        f.truncate(64 * 2**20)
    with pytest.raises(ResultsError, match=r"result_4.txt is 64 MiB \(its apparent size\), over the 16 MiB allowed"):
        collect([org])


def test_report_refuses_more_evaluations_than_the_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "MAX_EVALUATIONS", 50)
    org = make_package(tmp_path)
    line = json.loads(next(ln for ln in log_lines() if '"eval_accuracy"' in ln)[len(MLLOG) :])
    with_lines(result(org), [MLLOG + json.dumps(line)] * 60)
    with pytest.raises(ResultsError, match=r"result_0.txt holds more than 50 eval_accuracy lines \(line \d+ is one"):
        collect([org])


def test_a_file_of_more_mllog_lines_than_the_limit_is_refused_while_it_is_read(monkeypatch):
    monkeypatch.setattr(limits, "MAX_MLLOG_LINES", 100)
    data = (MLLOG + '{"key": "x", "value": 1, "time_ms": 1}\n').encode() * 101
    with pytest.raises(limits.OverLimit, match="more than 100 MLLOG lines"):
        mllog_lines(data)
    assert gate.screen_log(data) == ["the file holds more than 100 MLLOG lines (line 101 is one too many)"]


def test_long_lines_within_the_line_cap_are_bounded_by_the_tools_cost(tmp_path, monkeypatch):
    """The official tools read a line in a time that grows with its square: many lines near the cap cost minutes."""
    monkeypatch.setattr(limits, "MAX_LINE_COST", 50 * 3000**2)
    org = make_package(tmp_path)
    note = MLLOG + json.dumps({"key": "trainperf_note", "value": "A" * 3000, "time_ms": 1, "metadata": {}})
    with_lines(result(org), [note] * 60)
    (refusal,) = gate.screen_log(result(org).read_bytes())
    assert refusal.startswith("the file holds MLLOG lines whose squared lengths add up to over 450,000,000 by line")
    with pytest.raises(ResultsError, match="result_0.txt holds MLLOG lines whose squared lengths add up to over"):
        collect([org])


@pytest.mark.parametrize("literal", ["1000", "1e400", "NaN", "-0.5"])
def test_report_refuses_an_accuracy_no_metric_takes_as_review_does(tmp_path, literal):
    org = make_package(tmp_path)
    for i in range(5):
        replace_in(result(org, i), '"value": 0.95', f'"value": {literal}')
    with pytest.raises(
        ResultsError, match=r"result_0.txt: eval_accuracy at line \d+ is \S+, not a possible top1 value"
    ):
        collect([org])
    assert impossible_quality(json.loads(literal), higher_is_better=True) is not None


def test_a_possible_quality_is_kept():
    assert impossible_quality(0.759, higher_is_better=True) is None
    assert impossible_quality({"BBOX": 0.38, "SEGM": 0.34}, higher_is_better=True) is None
    assert impossible_quality(7.5, higher_is_better=False) is None  # a metric where lower is better has no 1 bound
    assert impossible_quality({"BBOX": 0.38, "SEGM": float("inf")}, higher_is_better=True) == float("inf")


@pytest.mark.parametrize("where", ["system", "summary", "ablation"])
def test_json_nested_100000_deep_is_a_clear_error_not_a_recursion_error(tmp_path, where):
    org = make_package(tmp_path)
    if where == "system":
        replace_in(org / "systems" / "box.json", '"division"', f'"deep": {DEEP}, "division"', 1)
        named = "box.json"
    elif where == "summary":
        (org / "summary.json").write_text(DEEP)
        named = "summary.json"
    else:
        (org / "ablation").mkdir()
        (org / "ablation" / "resnet-mini.json").write_text(
            json.dumps({"configurations": json.loads("[" * 40 + "]" * 40)})
        )
        with pytest.raises(ResultsError, match="resnet-mini.json nests arrays and objects more than 32 deep"):
            read_ablation(org / "ablation" / "resnet-mini.json")
        (org / "ablation" / "resnet-mini.json").write_text(DEEP)
        with pytest.raises(ResultsError, match="resnet-mini.json nests arrays and objects more than 32 deep"):
            read_ablation(org / "ablation" / "resnet-mini.json")
        return
    with pytest.raises(ResultsError, match=f"{named} nests arrays and objects more than 32 deep"):
        collect([org])


def test_a_5000_digit_number_is_a_clear_error_in_report_package_check_system_and_run_set(tmp_path):
    from trainperf.submission.package import build_package

    org = make_package(tmp_path / "sys")
    replace_in(org / "systems" / "box.json", '"number_of_nodes": "1"', f'"number_of_nodes": {LONG_INT}')
    with pytest.raises(ResultsError, match="box.json holds a number of 5,000 characters"):
        collect([org])
    (problem,) = check_system_file(org / "systems" / "box.json")
    assert "holds a number of 5,000 characters" in problem
    with pytest.raises(ResultsError, match="holds a number of 5,000 characters"):
        build_package([org], tmp_path / "pkg-sys", org="acme")
    with pytest.raises(UsageError, match="--set global_batch_size=...: the value holds a number of 5,000 characters"):
        parse_overrides([f"global_batch_size={LONG_INT}"])

    log = make_package(tmp_path / "log")
    replace_in(result(log), '"value": 1,', f'"value": {"9" * 100},', 1)  # the seed: within the line cap
    with pytest.raises(ResultsError, match=r"result_0.txt: line \d+ holds a number of 100 characters"):
        read_mllog_lines(result(log))
    with pytest.raises(ResultsError, match=r"result_0.txt: line \d+ holds a number of 100 characters"):
        collect([log])
    with pytest.raises(ResultsError, match=r"line \d+ holds a number of 100 characters"):
        build_package([log], tmp_path / "pkg-log", org="acme")
    assert [r for r in gate.screen_log(result(log).read_bytes()) if "holds a number of 100 characters" in r]


def test_the_limits_leave_a_real_log_alone():
    data = ("\n".join(log_lines()) + "\n").encode()
    assert all(not ln.over_limit for ln in mllog_lines(data))
    assert gate.screen_log(data) == []
    assert limits.loads('{"time_ms": 1650000000000, "v": [1, [2, {"a": 0.5e-3}]]}')["time_ms"] == 1650000000000


def test_the_reading_cost_of_the_largest_published_result_file_is_allowed():
    """NVIDIA's v2.0 2xa30 maskrcnn logs, accepted by MLCommons, cost the tools 1.47 * 10^9 (sum of squared payload
    lengths): a limit below it rejected a real package. Reproduced by 92 notes of 4,000 characters (1.47 * 10^9)."""
    note = MLLOG + json.dumps({"key": "trainperf_note", "value": "A" * 3950, "time_ms": 1, "metadata": {}})
    data = ("\n".join([note] * 92) + "\n").encode()
    assert 1.45e9 < 92 * len(note.split(MLLOG, 1)[1]) ** 2 < limits.MAX_LINE_COST
    assert len(mllog_lines(data)) == 92
    assert gate.screen_log(data) == []
