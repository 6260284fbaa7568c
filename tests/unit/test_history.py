"""The published MLPerf history: loading untrusted cells, the press-release queries, charts and the CLI.

Expected numbers were read by hand from trainperf/history/data/mlperf_training_results.csv.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from trainperf.errors import DataError, UsageError
from trainperf.history import query
from trainperf.history.query import COLUMNS, load_results, round_key

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def results() -> list[query.Result]:
    return load_results()


def _find(results, round, org, system, benchmark):
    (hit,) = [r for r in results if (r.round, r.org, r.system, r.benchmark) == (round, org, system, benchmark)]
    return hit


# -- loading ------------------------------------------------------------------------------------


def test_shipped_table_loads_with_typed_fields(results):
    assert len(results) == 2181
    dell = _find(results, "v3.0", "Dell", "XE9680x8H100-SXM-80GB", "resnet")
    assert dell.score_min == 13.466 and dell.raw_score_min == 13.41
    assert dell.scaling == pytest.approx(1.0042232277526395)
    assert (dell.nodes, dell.acc_per_node, dell.n_acc) == (1, 8, 8)
    assert (dell.n_runs, dell.n_failed) == (5, 1)
    assert dell.framework == "NGC MXNet 23.04, NGC Pytorch 23.04, NGC HugeCTR 23.04"  # a quoted cell with commas
    assert dell.division == "closed" and dell.log_date == "2023-05-09"


def test_empty_cells_become_none(results):
    alibaba = _find(results, "v0.6", "Alibaba", "sinian", "resnet")
    assert alibaba.division is None and alibaba.nodes is None and alibaba.n_acc is None
    assert alibaba.score_min is None and alibaba.raw_score_min is None and alibaba.log_date is None
    assert (alibaba.n_runs, alibaba.n_failed, alibaba.scaling) == (5, 5, 1.0)


def test_source_spellings_are_normalized(results):
    # v0.6 Google named its Mask R-CNN folder `mask`; v0.7 SIAT wrote `Closed`, v1.0 some wrote `close`.
    assert _find(results, "v0.6", "Google", "tpu-v3-128", "maskrcnn").score_min == 57.46
    assert {r.benchmark for r in results}.isdisjoint({"mask"})
    assert {r.division for r in results} == {"closed", "open", None}


def test_rounds_sort_numerically(results):
    shuffled = ["v5.1", "v1.0", "v0.7", "v10.0", "v2.0", "v1.1", "v0.6", "v2.1"]
    assert sorted(shuffled, key=round_key) == ["v0.6", "v0.7", "v1.0", "v1.1", "v2.0", "v2.1", "v5.1", "v10.0"]
    assert sorted({r.round for r in results}, key=round_key) == [
        "v0.6", "v0.7", "v1.0", "v1.1", "v2.0", "v2.1", "v3.0", "v3.1", "v4.0", "v4.1", "v5.0", "v5.1",
    ]  # fmt: skip
    assert round_key("v2.0") < round_key("not-a-round")  # unparseable names sort last, no crash


def _write_csv(path: Path, rows: list[list[str]], columns=COLUMNS) -> Path:
    import csv

    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(columns)
        w.writerows(rows)
    return path


def _row(**cells: str) -> list[str]:
    base = dict.fromkeys(COLUMNS, "")
    base.update(round="v2.0", org="Acme", system="box", benchmark="resnet", division="closed")
    base.update(cells)
    return [base[c] for c in COLUMNS]


def test_untrusted_cells_never_evaluated_nor_crash(tmp_path):
    garbage = [
        _row(system="a", score_min="=1+1", n_acc="=2*4", org='=HYPERLINK("x")'),
        _row(system="b", score_min="nan", nodes="1.5", n_acc="-8", scaling="inf"),
        _row(system="c", score_min="1e999", raw_score_min="__import__('os')", n_runs="٣"),  # Arabic-Indic 3
        _row(system="d", score_min="-5", acc_per_node="8 ", scaling="0"),
        _row(system="e", score_min="1_000", log_date="[red]x[/red]"),
        _row(system="f", score_min=" 12.5 ", n_acc=" 16 "),
    ]
    rs = {r.system: r for r in load_results(_write_csv(tmp_path / "t.csv", garbage))}
    assert rs["a"].score_min is None and rs["a"].n_acc is None
    assert rs["a"].org == '=HYPERLINK("x")'  # kept as the literal text it is
    assert rs["b"].score_min is None and rs["b"].nodes is None and rs["b"].n_acc is None and rs["b"].scaling is None
    assert rs["c"].score_min is None and rs["c"].raw_score_min is None and rs["c"].n_runs is None
    assert rs["d"].score_min is None and rs["d"].acc_per_node == 8 and rs["d"].scaling is None
    assert rs["e"].score_min is None and rs["e"].log_date == "[red]x[/red]"
    assert rs["f"].score_min == 12.5 and rs["f"].n_acc == 16
    assert query.fastest(list(rs.values())) == [rs["f"]]  # only rows with a score are answered


def test_short_rows_and_extra_columns(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(",".join([*COLUMNS, "extra"]) + "\nv1.0,Acme,box,bert,closed\n", encoding="utf-8")
    (r,) = load_results(path)
    assert (r.round, r.benchmark, r.score_min, r.n_acc, r.log_date) == ("v1.0", "bert", None, None, None)


def test_missing_column_names_file_and_column(tmp_path):
    path = _write_csv(tmp_path / "t.csv", [], columns=[c for c in COLUMNS if c != "score_min"])
    with pytest.raises(DataError, match=r"t\.csv.*score_min"):
        load_results(path)


def test_unusable_tables_raise_data_error(tmp_path):
    with pytest.raises(DataError, match="no such results table"):
        load_results(tmp_path / "absent.csv")
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(DataError, match="missing column"):
        load_results(empty)
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(DataError, match="bin.csv"):
        load_results(binary)
    nameless = _write_csv(tmp_path / "nameless.csv", [_row(benchmark="")])
    with pytest.raises(DataError, match=r"nameless\.csv, line 2.*'benchmark'"):
        load_results(nameless)


# -- queries --------------------------------------------------------------------------------------


def test_fastest_v2_0_at_any_scale(results):
    got = {r.benchmark: (r.score_min, r.org, r.system) for r in query.fastest(results, round="v2.0")}
    assert got == {
        "bert": (0.179, "Google", "cloud-tpu-v4-8192-TF"),
        "dlrm": (0.561, "Google", "research-tpu-v4-256-TF"),
        "maskrcnn": (2.253, "Google", "cloud-tpu-v4-4096-TF"),
        "minigo": (16.231, "NVIDIA", "dgxa100_n224_ngc22.04_tensorflow"),
        "resnet": (0.191, "Google", "cloud-tpu-v4-8192-TF"),
        "rnnt": (2.151, "NVIDIA", "dgxa100_n192_ngc22.04_pytorch"),
        "ssd": (2.343, "Google", "cloud-tpu-v4-4096-TF"),
        "unet3d": (1.216, "NVIDIA", "dgxa100_n96_ngc22.04_mxnet"),
    }


def test_fastest_v3_0_single_node_reproduces_the_published_8xh100_numbers(results):
    rows = query.fastest(results, round="3.0", scope="single-node-8")  # `3.0` reads as `v3.0`
    got = {r.benchmark: (r.score_min, r.org) for r in rows}
    assert got == {
        "resnet": (13.466, "Dell"),
        "unet3d": (11.796, "GIGABYTE"),
        "bert": (5.349, "GIGABYTE"),
        "maskrcnn": (19.18, "NVIDIA"),
        "ssd": (37.009, "NVIDIA"),
        "dlrm_dcnv2": (4.184, "NVIDIA"),
        "rnnt": (16.607, "Quanta_Cloud_Technology"),
    }
    assert all(r.nodes == 1 and r.n_acc == 8 for r in rows)
    assert [r.benchmark for r in rows] == sorted(got)
    (resnet,) = query.fastest(results, round="v3.0", benchmark="resnet")
    assert (resnet.score_min, resnet.org, resnet.n_acc) == (0.183, "NVIDIA_CoreWeave", 3584)


def test_fastest_covers_retired_benchmarks_in_round_order(results):
    rows = query.fastest(results, benchmark="gnmt")
    assert [(r.round, r.score_min, r.org) for r in rows] == [("v0.6", 2.111, "Google"), ("v0.7", 0.978, "NVIDIA")]
    rounds = [r.round for r in query.fastest(results, benchmark="resnet")]
    assert rounds == sorted(rounds, key=round_key) and rounds[0] == "v0.6"


def test_speedup_restarts_where_the_benchmark_changed(results):
    rows = query.speedup(results, "nvidia", "ssd")  # org matched in any letter case
    by_round = {r.round: r for r in rows}
    assert by_round["v0.7"].score_min == 0.891 and by_round["v0.7"].speedup == 1.0
    assert by_round["v1.0"].speedup == pytest.approx(0.891 / 0.484)
    assert by_round["v1.0"].system == "dgxa100_n128_ngc21.05_mxnet" and by_round["v1.0"].n_acc == 1024
    # v2.0 `ssd` is RetinaNet, not SSD-ResNet34: a new baseline, not a 0.2x "slow-down".
    assert (by_round["v2.0"].score_min, by_round["v2.0"].speedup, by_round["v2.0"].baseline_round) == (
        4.253,
        1.0,
        "v2.0",
    )
    assert by_round["v2.1"].speedup == pytest.approx(4.253 / 1.843)
    assert all(r.org == "NVIDIA" for r in rows)


def test_speedup_single_node(results):
    rows = query.speedup(results, "NVIDIA", "dlrm_dcnv2", scope="single-node-8")
    assert rows[0].round == "v3.0" and rows[0].score_min == 4.184 and rows[0].speedup == 1.0
    assert all(r.n_acc == 8 for r in rows)


def test_per_accelerator_resnet_v3_0(results):
    rows = query.per_accelerator(results, "resnet", "v3.0")
    first = rows[0]
    assert (first.accelerator, first.score_min, first.n_acc, first.org) == ("NVIDIA H100-SXM-80GB", 13.819, 8, "Azure")
    assert first.acc_minutes == pytest.approx(110.552)
    h100 = next(r for r in rows if r.accelerator == "NVIDIA H100-SXM5-80GB")
    assert (h100.score_min, h100.n_acc, h100.n_results) == (0.183, 3584, 14)
    assert h100.acc_minutes == pytest.approx(0.183 * 3584)
    assert h100.min_acc_minutes == pytest.approx(26.524 * 4)  # Dell XE8640, 4 accelerators
    assert [r.acc_minutes for r in rows] == sorted(r.acc_minutes for r in rows)


def test_place_ranks_among_the_latest_round(results):
    p = query.place(results, "resnet", 20.0)
    assert (p.round, p.rank, p.count) == ("v4.0", 26, 36)
    assert p.faster_than == pytest.approx(11 / 36)
    assert [r.score_min for r in p.faster] == [13.677, 13.925]
    assert [(r.score_min, r.org) for r in p.slower] == [(20.831, "ASUSTeK"), (25.583, "Fujitsu")]
    p8 = query.place(results, "resnet", 20.0, n_acc=8)
    assert (p8.rank, p8.count) == (17, 20)
    first = query.place(results, "bert", 0.01, round="v2.0")
    assert first.rank == 1 and first.faster_than == 1.0 and first.faster == ()
    tie = query.place(results, "resnet", 13.677, round="v4.0")  # a tie is neither faster nor slower
    assert tie.rank == 24 and tie.slower[0].score_min == 13.925


def test_place_refuses_mini_and_bad_minutes(results):
    with pytest.raises(UsageError, match="mini results are not comparable to MLPerf's"):
        query.place(results, "resnet", 3.0, scale="mini")
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(UsageError, match="positive number"):
            query.place(results, "resnet", bad)
    with pytest.raises(UsageError, match="published counts: .*8"):
        query.place(results, "resnet", 20.0, n_acc=7)
    with pytest.raises(UsageError, match="rounds with one: v0.6, v0.7"):
        query.place(results, "gnmt", 2.0, round="v2.0")


def test_unknown_names_suggest_close_matches(results):
    with pytest.raises(UsageError, match="did you mean resnet"):
        query.fastest(results, benchmark="resnt")
    with pytest.raises(UsageError, match="published rounds: v0.6, v0.7, v1.0"):
        query.fastest(results, round="v9.9")
    with pytest.raises(UsageError, match="did you mean NVIDIA"):
        query.speedup(results, "NVDIA", "bert")
    with pytest.raises(
        UsageError, match="Graphcore has no closed gpt3 result with a score; its benchmarks: bert, resnet"
    ):
        query.speedup(results, "graphcore", "gpt3")
    with pytest.raises(UsageError, match="unknown division"):
        query.fastest(results, division="closd")
    with pytest.raises(UsageError, match="unknown scope"):
        query.fastest(results, scope="one-node")


# -- charts ---------------------------------------------------------------------------------------


def test_charts_are_png(results):
    from trainperf.history.charts import fastest_bar_chart, speedup_chart

    fast = query.fastest(results, round="v2.0")
    assert fastest_bar_chart(fast, "Fastest closed results — v2.0").startswith(PNG)
    assert fastest_bar_chart(fast, "linear $x$", log_scale=False).startswith(PNG)
    assert speedup_chart(query.speedup(results, "NVIDIA", "ssd"), "NVIDIA ssd").startswith(PNG)
    with pytest.raises(UsageError, match="nothing to chart"):
        speedup_chart([], "empty")


def test_chart_labels_are_not_mathtext(tmp_path):
    from trainperf.history.charts import fastest_bar_chart

    odd = _row(org="$\\frac{", system="$$_^", score_min="1.5", n_acc="8")
    rows = load_results(_write_csv(tmp_path / "t.csv", [odd]))
    assert fastest_bar_chart(rows, "$\\undefined{").startswith(PNG)


# -- CLI ------------------------------------------------------------------------------------------


def _run(argv: list[str]) -> int:
    from trainperf.history.cli import add_parser

    parser = argparse.ArgumentParser(prog="trainperf")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.fixture()
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # rich reads it: no truncated cells in captured output


def test_cli_fastest_table_json_and_chart(wide, capsys, tmp_path):
    assert _run(["history", "fastest", "--round", "v2.0"]) == 0
    out = capsys.readouterr().out
    assert "Fastest closed results — v2.0" in out and "cloud-tpu-v4-8192-TF" in out and "0.179" in out
    chart = tmp_path / "fastest.png"
    assert _run(["history", "fastest", "--round", "v2.0", "--json", "--chart", str(chart)]) == 0
    rows = json.loads(capsys.readouterr().out)  # stdout stays pure JSON; the chart note goes to stderr
    assert [r["benchmark"] for r in rows][:2] == ["bert", "dlrm"] and rows[0]["score_min"] == 0.179
    assert chart.read_bytes().startswith(PNG) and list(tmp_path.iterdir()) == [chart]


def test_cli_speedup_per_accelerator_and_place(wide, capsys, tmp_path):
    assert _run(["history", "speedup", "NVIDIA", "ssd", "--chart", str(tmp_path / "s.png")]) == 0
    out = capsys.readouterr().out
    assert "the baseline restarts in v2.0" in out and (tmp_path / "s.png").read_bytes().startswith(PNG)
    assert _run(["history", "per-accelerator", "resnet", "--round", "v3.0"]) == 0
    assert "NVIDIA H100-SXM-80GB" in capsys.readouterr().out
    assert _run(["history", "place", "resnet", "20", "--json"]) == 0
    placed = json.loads(capsys.readouterr().out)
    assert (placed["rank"], placed["count"], placed["round"]) == (26, 36, "v4.0")
    assert _run(["history", "place", "resnet", "20", "--n-acc", "8"]) == 0
    assert "would rank 17 of 21" in capsys.readouterr().out
    assert _run(["history", "place", "resnet", "13.677", "--round", "v4.0"]) == 0
    out = capsys.readouterr().out
    assert "1 published result(s) tie with yours and share rank 24" in out and "│   26 │  13.925 │" in out


def test_cli_errors_are_usage_errors(wide, tmp_path):
    with pytest.raises(UsageError, match="not comparable"):
        _run(["history", "place", "resnet", "3", "--scale", "mini"])
    with pytest.raises(UsageError, match=r"\*\.png"):
        _run(["history", "fastest", "--chart", str(tmp_path / "chart.jpg")])
    with pytest.raises(UsageError, match="does not exist"):
        _run(["history", "fastest", "--chart", str(tmp_path / "absent" / "c.png")])
    with pytest.raises(DataError, match="no such results table"):
        _run(["history", "fastest", "--results-csv", str(tmp_path / "none.csv")])
    with pytest.raises(SystemExit):
        _run(["history", "place", "resnet", "3", "--scale", "huge"])


def _write_package(root: Path, system: str, minutes: list[float], *, scale: str | None = None) -> None:
    """An MLCommons-style package by hand: systems/<system>.json and five resnet results reaching the target."""
    (root / "systems").mkdir(parents=True)
    (root / "systems" / f"{system}.json").write_text(json.dumps({"number_of_nodes": "1", "accelerators_per_node": "8"}))
    t0 = 1_650_000_000_000
    for i, m in enumerate(minutes):
        recs = [("submission_benchmark", "resnet", t0 - 9, {}), ("run_start", None, t0, {})]
        if scale:
            recs.insert(0, ("trainperf_scale", scale, t0 - 9, {}))
        recs += [("eval_accuracy", 0.76, t0 + m * 60000, {"epoch_num": 40}), ("run_stop", None, t0 + m * 60000, {})]
        recs[-1][3]["status"] = "success"
        lines = [":::MLLOG " + json.dumps({"time_ms": t, "key": k, "value": v, "metadata": md}) for k, v, t, md in recs]
        path = root / "results" / system / "resnet" / f"result_{i}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")


def test_cli_place_a_package_places_each_score_in_its_round(wide, capsys, tmp_path):
    _write_package(tmp_path / "org", "box", [30.0, 31.0, 32.0, 33.0, 34.0])
    assert _run(["history", "place", str(tmp_path / "org"), "--round", "v2.0", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert (row["system"], row["benchmark"], row["score"]) == ("box", "resnet", "score")
    assert row["minutes"] == pytest.approx(32.0)
    placed = query.place(load_results(), "resnet", 32.0, round="v2.0")
    assert row["placement"] == {
        "round": "v2.0",
        "division": "closed",
        "rank": placed.rank,
        "count": placed.count,
        "faster_than": placed.faster_than,
    }
    assert 1 < placed.rank <= placed.count  # 32 minutes is neither the fastest nor the slowest published v2.0 resnet
    _write_package(tmp_path / "mini", "cpu", [1.0, 1.01, 1.02, 1.03, 1.04], scale="mini")  # distinct runs
    assert _run(["history", "place", str(tmp_path / "mini")]) == 0
    assert "not comparable" in capsys.readouterr().out
    with pytest.raises(UsageError, match="give a BENCHMARK and your MINUTES"):
        _run(["history", "place", "resnet"])
