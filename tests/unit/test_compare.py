"""`trainperf compare`: the statistics on run sets with known answers, and the refusals."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from trainperf.cli import main
from trainperf.errors import UsageError
from trainperf.report.compare import Side, compare_paths, compare_sides, olympic, runs_needed


def side(runs, label="A", **kw) -> Side:
    return Side(
        label=label,
        runs=tuple(runs),
        score=olympic(runs, 1),
        scale=kw.get("scale", "mini"),
        target=kw.get("target", "t"),
        code=kw.get("code", ("c",) * len(runs)),
    )


def test_olympic_drops_the_ends_and_a_failed_run_is_the_slowest():
    assert olympic([5.0, 1.0, 2.0, 3.0, 100.0], 1) == pytest.approx(10 / 3)
    assert olympic([1.0, 2.0, 3.0, 4.0, math.inf], 1) == pytest.approx(3.0)
    assert math.isinf(olympic([1.0, 2.0, 3.0, math.inf, math.inf], 1))
    assert olympic([4.0, 2.0], 1) == pytest.approx(3.0)  # too few to drop: one run is always kept


def test_separated_runs_give_the_exact_mann_whitney_p_and_a_verdict():
    a, b = side([10.0, 10.2, 10.4, 10.1, 10.3]), side([12.0, 12.5, 12.2, 12.1, 12.4], "B")
    c = compare_sides("resnet", a, b, dropped=1, resamples=2000)
    # every A run faster than every B run: the exact two-sided p is 2 / C(10, 5) = 2/252
    assert c.p_value == pytest.approx(2 / 252)
    assert c.ratio == pytest.approx(10.2 / 12.2333333)
    assert c.verdict.startswith("A faster than B, p = 0.00794") and c.runs_needed is None
    assert c.ci[0] <= c.ratio <= c.ci[1] < 1
    swapped = compare_sides("resnet", b, a, dropped=1, resamples=2000)
    assert swapped.ratio > 1 and swapped.verdict.startswith("A faster than B")  # the labels travel with the runs


def test_constant_sides_give_a_point_interval_and_equal_sides_no_evidence():
    c = compare_sides("x", side([8.0] * 5), side([10.0] * 5, "B"), dropped=1, resamples=500)
    assert c.ci == pytest.approx((0.8, 0.8)) and c.ratio == pytest.approx(0.8)
    same = [10.0, 11.0, 9.0, 10.5, 9.5]
    c = compare_sides("x", side(same), side(same, "B"), dropped=1, resamples=500)
    assert c.p_value == pytest.approx(1.0) and c.verdict.startswith("no evidence of a difference with 5 runs of A")
    assert f"about {c.runs_needed} runs each would show a 5% difference" in c.verdict


def test_runs_needed_follows_the_normal_approximation():
    a = [9.0, 11.0] * 3  # mean 10, sample sd sqrt(1.2): cv 0.1095
    cv = math.sqrt(6 / 5) / 10
    z = 1.959963984540054 + 0.8416212335729143
    assert runs_needed(a, a, alpha=0.05) == math.ceil(2 * (z * cv / 0.05) ** 2 / (3 / math.pi))
    assert runs_needed([1.0], a, alpha=0.05) is None  # one converged run: no spread to go by


def test_failed_runs_rank_slowest():
    a = side([10.0, 10.1, 10.2, 10.3, 10.4])
    b = side([10.5, 10.6, math.inf, math.inf, math.inf], "B")
    c = compare_sides("x", a, b, dropped=1, resamples=500)
    assert c.p_value < 0.05 and c.ratio is None  # B has no score: too many failed
    assert "no evidence" in c.verdict  # no ratio: the verdict does not claim a speed-up it cannot size


# --- folders through the CLI ---------------------------------------------------------------------------
def write_folder(root: Path, minutes, *, scale="mini", code="abc", system="box") -> Path:
    (root / "systems").mkdir(parents=True)
    (root / "systems" / f"{system}.json").write_text('{"number_of_nodes": "1", "accelerators_per_node": "0"}')
    t0 = 1_700_000_000_000
    for i, m in enumerate(minutes):
        recs = [
            ("submission_benchmark", "resnet", t0 - 9, {}),
            ("trainperf_scale", scale, t0 - 9, {}),
            ("trainperf_code", code, t0 - 9, {}),
            ("run_start", None, t0 + i * 10**7, {}),
            ("eval_accuracy", 0.95 + i / 1000, t0 + i * 10**7 + m * 60000, {"epoch_num": 3}),  # distinct runs
            ("run_stop", None, t0 + i * 10**7 + m * 60000, {"status": "success"}),
        ]
        lines = [":::MLLOG " + json.dumps({"time_ms": t, "key": k, "value": v, "metadata": md}) for k, v, t, md in recs]
        path = root / "results" / system / "resnet" / f"result_{i}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
    (root / "summary.json").write_text(json.dumps({"system": system, "benchmarks": []}))
    return root


def test_cli_compares_two_folders_and_prints_json(tmp_path, capsys):
    a = write_folder(tmp_path / "a", [1.0, 1.02, 1.01, 1.03, 1.04])
    b = write_folder(tmp_path / "b", [1.2, 1.21, 1.22, 1.23, 1.24])
    assert main(["compare", str(a), str(b / "summary.json"), "--json", "--resamples", "500"]) == 0
    [c] = json.loads(capsys.readouterr().out)
    assert c["benchmark"] == "resnet" and c["p_value"] == pytest.approx(2 / 252)
    assert c["a"]["runs"] == pytest.approx([1.0, 1.02, 1.01, 1.03, 1.04]) and c["verdict"].startswith("A faster")
    assert main(["compare", str(a), str(b), "--resamples", "500"]) == 0
    out = capsys.readouterr().out
    assert "resnet: A faster than B, p = 0.00794 (5 runs of A and 5 of B)" in out


def test_different_scale_or_code_is_refused_unless_allowed(tmp_path, capsys):
    a = write_folder(tmp_path / "a", [1.0] * 5)
    b = write_folder(tmp_path / "b", [1.1] * 5, code="def")
    with pytest.raises(UsageError, match=r"differ in code \(trainperf code abc against def\).*--allow-different code"):
        compare_paths(a, b, resamples=200)
    [c] = compare_paths(a, b, allow=("code",), resamples=200)
    assert c.differences == ("code",) and c.ratio == pytest.approx(1 / 1.1)
    r = write_folder(tmp_path / "r", [1.0] * 5, scale="reference", code="abc")
    with pytest.raises(UsageError, match=r"differ in scale \(mini against reference\); target"):
        compare_paths(a, r, resamples=200)
    assert main(["compare", str(a), str(b), "--allow-different", "huge"]) == 2
    assert "--allow-different huge: name any of round, scale, target, code" in capsys.readouterr().err
    with pytest.raises(UsageError, match="has no system named 'nope'"):
        compare_paths(a, b, systems=("nope", None))


def test_a_table_printed_to_a_pipe_keeps_whole_lines():
    import io

    from rich.console import Console
    from rich.table import Table

    from trainperf.report.table import for_output

    note = "valid olympic score; " * 6  # 126 characters: rich wraps it over several lines at 80 columns
    table = Table()
    table.add_column("benchmark")
    table.add_column("note")
    table.add_row("resnet", note.strip())
    buf = io.StringIO()
    for_output(Console(file=buf, width=80)).print(table)
    assert any(note.strip() in line for line in buf.getvalue().splitlines())
    narrow = io.StringIO()
    Console(file=narrow, width=80).print(table)
    assert not any(note.strip() in line for line in narrow.getvalue().splitlines())  # what for_output prevents
