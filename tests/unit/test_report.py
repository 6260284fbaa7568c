"""The report: collecting result folders, the one-file HTML report, the Markdown table and `trainperf report`."""

from __future__ import annotations

import argparse
import base64
import json
import re
from pathlib import Path

import pytest

from trainperf import registry
from trainperf.errors import ResultsError, UsageError
from trainperf.report import cli as report_cli
from trainperf.report.collect import ENERGY_KEY, collect
from trainperf.report.html import render_html, render_markdown, write_report
from trainperf.scoring import score_results

T0 = 1_700_000_000_000  # run_start of every fake run, in ms
EVIL = "e<script>$_x$"  # a system name that must be escaped in HTML and drawn as written in charts


def mllog(key: str, value=None, *, t: float, **metadata) -> str:
    rec = {"namespace": "", "time_ms": t, "event_type": "POINT_IN_TIME", "key": key, "value": value}
    rec["metadata"] = metadata
    return ":::MLLOG " + json.dumps(rec)


def write_run(
    path: Path,
    *,
    system: str,
    seed: int,
    minutes: float,
    status: str = "success",
    energy=None,
    t0: float = T0,
    qualities: tuple[float, ...] | None = None,
) -> None:
    """A result file as trainperf's harness writes it: header, evaluations every third of the run, run_stop."""
    lines = [
        mllog("init_start", t=t0 - 500),
        mllog("submission_benchmark", "resnet", t=t0 - 400),
        mllog("submission_platform", system, t=t0 - 400),
        mllog("trainperf_scale", "mini", t=t0 - 400),
        mllog("seed", seed, t=t0 - 400),
        mllog("run_start", t=t0),
    ]
    if qualities is None:
        qualities = tuple(0.8 + 0.03 * k if status == "success" else 0.5 for k in (1, 2, 3))
    for k, quality in enumerate(qualities, start=1):
        t = t0 + minutes * 60000 * k / len(qualities)
        lines.append(mllog("eval_accuracy", quality, t=t, epoch_num=0.5 * k))
    if energy is not None:
        lines.append(mllog(ENERGY_KEY, energy, t=t0 + minutes * 60000, sources=["rapl:package-0"], note="measured"))
    lines.append(mllog("run_stop", t=t0 + minutes * 60000, status=status))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def write_system(root: Path, name: str, *, accelerators: str = "0", nodes: str = "1") -> None:
    desc = {
        "system_name": name,
        "number_of_nodes": nodes,
        "accelerators_per_node": accelerators,
        "accelerator_model_name": "NVIDIA H100-SXM5-80GB" if accelerators != "0" else "N/A",
        "host_processor_model_name": "AMD EPYC",
    }
    (root / "systems").mkdir(parents=True, exist_ok=True)
    (root / "systems" / f"{name}.json").write_text(json.dumps(desc))


# system -> (run minutes, statuses); one aborted run on the GPU system
RUNS = {
    "cpu-box": ([1.0, 1.2, 0.9, 1.5, 1.1], ["success"] * 5),
    EVIL: ([0.30, 0.25, 0.40, 0.28, 0.33], ["success", "success", "aborted", "success", "success"]),
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> list[Path]:
    """A trainperf output folder (CPU-only system) and an MLCommons submission folder (8 GPUs)."""
    base = tmp_path_factory.mktemp("results")
    roots = [base / "run-out", base / "submission" / "org"]
    for root, (name, (minutes, statuses)), acc in zip(roots, RUNS.items(), ("0", "8"), strict=True):
        write_system(root, name, accelerators=acc)
        for i, (m, s) in enumerate(zip(minutes, statuses, strict=True)):
            write_run(
                root / "results" / name / "resnet" / f"result_{i}.txt", system=name, seed=i + 1, minutes=m, status=s
            )
    (roots[0] / "summary.json").write_text('{"system": "cpu-box", "benchmarks": []}')
    return roots


@pytest.fixture(scope="module")
def systems(folders):
    return collect(folders)


@pytest.fixture(scope="module")
def page(systems) -> str:
    return render_html(systems, price_per_hour=None)


def expected_score(name: str):
    spec = registry.get_spec("resnet", "mini")
    minutes, statuses = RUNS[name]
    pairs = [(s == "success", m) for m, s in zip(minutes, statuses, strict=True)]
    return score_results(pairs, runs_required=spec.runs_required, dropped=spec.runs_dropped)


def section(page: str, sid: str) -> str:
    m = re.search(rf'<section id="{sid}">(.*?)</section>', page, re.S)
    assert m, f"no section {sid}"
    return m.group(1)


def test_collect_finds_both_systems_and_scores_them_like_score_results(systems):
    assert [s.name for s in systems] == ["cpu-box", EVIL]
    cpu, gpu = systems
    assert (cpu.accelerators, cpu.processors, gpu.accelerators, gpu.processors) == (0, 1, 8, 8)
    assert any("CPU-only" in n for n in cpu.notes)
    for s in systems:
        (bench,) = s.benchmarks
        assert (bench.benchmark, bench.scale, len(bench.runs)) == ("resnet", "mini", 5)
        assert bench.score == expected_score(s.name)
        assert bench.target == registry.get_spec("resnet", "mini").target
        assert bench.runs[0].curve and bench.runs[0].curve[-1][2] == pytest.approx(0.89)
    assert gpu.benchmarks[0].score.successes == 4 and gpu.benchmarks[0].score.valid


def test_html_is_self_contained_with_a_png_chart_in_each_chart_section(page):
    assert "http://" not in page and "https://" not in page
    for attr in re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', page):
        assert attr.startswith(("data:image/png;base64,", "#")), attr
    for sid in ("time-to-train", "spread", "convergence"):
        images = re.findall(r'src="data:image/png;base64,([^"]+)"', section(page, sid))
        assert images, sid
        assert all(base64.b64decode(img).startswith(b"\x89PNG\r\n\x1a\n") for img in images)
    assert "<script" not in page and html_escaped(EVIL) in page


def html_escaped(text: str) -> str:
    import html

    return html.escape(text, quote=True)


def test_html_has_summary_per_accelerator_and_energy_not_measured(page, systems):
    summary = section(page, "summary")
    for s in systems:
        assert f"{s.benchmarks[0].score.minutes:.3f}" in summary
    assert "4/5" in summary and "5/5" in summary
    per_acc = section(page, "per-accelerator")
    gpu_minutes = expected_score(EVIL).minutes
    assert f"{gpu_minutes * 8:.3f}" in per_acc and "CPU-only" in per_acc
    assert "not measured" in section(page, "energy")


def test_cost_appears_only_with_a_price(page, systems):
    assert 'id="cost"' not in page and "cost to train" not in page.lower()
    priced = render_html(systems, price_per_hour=3.0)
    cost = section(priced, "cost")
    assert f"{expected_score('cpu-box').minutes / 60 * 3.0:.4g}" in cost


def test_markdown_has_one_row_per_system_and_benchmark_with_the_score(systems):
    md = render_markdown(systems)
    rows = [line for line in md.splitlines()[2:] if line.startswith("|")]
    assert len(rows) == 2
    for row, name in zip(rows, RUNS, strict=True):
        assert f"{expected_score(name).minutes:.3f} score" in row
        assert "not measured" in row
    assert "cost" not in md
    assert "cost to train" in render_markdown(systems, price_per_hour=2.0)
    assert "<script" not in md


def test_energy_from_the_run_log_is_reported(tmp_path):
    write_system(tmp_path, "box")
    for i in range(5):
        path = tmp_path / "results/box/resnet" / f"result_{i}.txt"  # distinct runs: copies count as failed
        write_run(path, system="box", seed=i, minutes=1.0 + i / 100, energy=3600.0)
    (s,) = collect([tmp_path])
    assert [r.energy_joules for r in s.benchmarks[0].runs] == [3600.0] * 5
    energy = section(render_html([s], price_per_hour=None), "energy")
    assert "3.60 kJ (1.00 Wh)" in energy
    assert "3.60 kJ (1.00 Wh) olympic mean of the 3 runs the time score keeps" in render_markdown([s])


def test_energy_to_train_is_scored_as_mlcommons_scores_it_not_a_plain_mean(tmp_path):
    """The summarizer's energy score: the olympic mean over the runs the time score keeps, dropped by their minutes
    (mlperf_logging's _index_olympic_average), a failed run's energy never counted; not the plain mean of the
    successful runs, nor an olympic mean dropped by energy."""
    write_system(tmp_path, "box")
    folder = tmp_path / "results/box/resnet"
    # (minutes, joules): the fastest run has a middling energy, the slowest successful one not the most
    runs = [(1.0, 2400.0), (1.1, 1800.0), (1.2, 9000.0), (1.3, 3600.0)]
    for i, (minutes, joules) in enumerate(runs):
        write_run(folder / f"result_{i}.txt", system="box", seed=i, minutes=minutes, energy=joules)
    write_run(folder / "result_4.txt", system="box", seed=4, minutes=1.4, energy=99000.0, status="aborted")
    (s,) = collect([tmp_path])  # the time score drops the run of 1.0 minutes and the aborted one
    assert s.benchmarks[0].score.minutes == pytest.approx((1.1 + 1.2 + 1.3) / 3)
    energy = section(render_html([s], price_per_hour=None), "energy")
    assert "4.80 kJ (1.33 Wh)" in energy  # (1800 + 9000 + 3600) / 3
    assert "4.20 kJ" not in energy  # the plain mean of the four successful runs
    assert "4.80 kJ (1.33 Wh) olympic mean of the 3 runs the time score keeps" in render_markdown([s])

    # the aborted run replaced by a fast one: by minutes 0.9 (900 J) and 1.3 (3600 J) are dropped, where by energy
    # 900 J and 9000 J would be (2.60 kJ), and the plain mean is 3.54 kJ
    write_run(folder / "result_4.txt", system="box", seed=4, minutes=0.9, energy=900.0)
    (s,) = collect([tmp_path])
    md = render_markdown([s])
    assert "4.40 kJ (1.22 Wh) olympic mean of the 3 runs the time score keeps" in md  # (2400 + 1800 + 9000) / 3
    assert "2.60 kJ" not in md and "3.54 kJ" not in md


def test_energy_to_train_needs_the_energy_of_every_run_the_time_score_keeps(tmp_path):
    write_system(tmp_path, "box")
    for i in range(5):  # the middle run by minutes has no energy reading; the fastest and slowest do
        energy = None if i == 2 else 3600.0
        write_run(tmp_path / "results/box/resnet" / f"result_{i}.txt", system="box", seed=i, minutes=1 + i / 10,
                  energy=energy)  # fmt: skip
    (s,) = collect([tmp_path])
    md = render_markdown([s])
    assert "measured for 2 of the 3 runs the time score keeps" in md
    assert "kJ" not in md.splitlines()[2]


def test_same_system_in_two_folders_gets_two_labels(tmp_path):
    for sub in ("a", "b"):
        write_system(tmp_path / sub, "box")
        write_run(tmp_path / sub / "results/box/resnet/result_0.txt", system="box", seed=1, minutes=1.0)
    labels = [s.label for s in collect([tmp_path / "a", tmp_path / "b"])]
    assert labels == ["box (a)", "box (b)"]


def test_benchmark_unknown_to_the_registry_falls_back_to_five_runs(tmp_path):
    write_system(tmp_path, "box")
    for i in range(5):
        path = tmp_path / "results/box/llama" / f"result_{i}.txt"
        write_run(path, system="box", seed=i, minutes=1.0 + i)
        path.write_text(path.read_text().replace('"resnet"', '"llama"'))
    bench = collect([tmp_path])[0].benchmarks[0]
    assert (bench.runs_required, bench.runs_dropped, bench.target) == (5, 1, None)
    assert bench.score.valid and bench.score.minutes == pytest.approx(3.0)
    assert "no mini spec" in bench.spec_note


@pytest.mark.parametrize(
    "damage, named",
    [
        (lambda root: (root / "systems/box.json").write_text("{not json"), "systems/box.json"),
        (lambda root: (root / "systems/box.json").unlink(), "systems/box.json"),
        (lambda root: (root / "systems/box.json").write_text('{"number_of_nodes": "1"}'), "systems/box.json"),
        (lambda root: (root / "results/box/resnet/result_0.txt").write_text("garbage\n"), "result_0.txt"),
        (
            lambda root: (root / "results/box/resnet/result_0.txt").write_text(
                mllog("run_start", t="soon") + "\n" + mllog("run_stop", t=1, status="success")
            ),
            "result_0.txt",
        ),
    ],
)
def test_bad_input_names_the_file_and_writes_nothing(tmp_path, damage, named):
    root = tmp_path / "in"
    write_system(root, "box")
    write_run(root / "results/box/resnet/result_0.txt", system="box", seed=1, minutes=1.0)
    damage(root)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(ResultsError, match=re.escape(named)):
        write_report([root], tmp_path / "out" / "report.html", markdown=tmp_path / "out" / "t.md")
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_a_failed_render_leaves_no_file_and_a_history_chart_is_embedded(folders, page, tmp_path):
    out = tmp_path / "report.html"
    with pytest.raises(UsageError, match="PNG"):
        write_report(folders, out, history_png=b"not a png")
    with pytest.raises(UsageError, match="price"):
        write_report(folders, out, price_per_hour=-1.0)
    assert list(tmp_path.iterdir()) == []
    png = base64.b64decode(re.search(r'base64,([^"]+)"', page).group(1))
    write_report(folders, out, history_png=png)
    assert base64.b64encode(png).decode() in section(out.read_text(), "history")


def test_write_report_refuses_to_overwrite_an_input(folders):
    result = folders[0] / "results/cpu-box/resnet/result_0.txt"
    text = result.read_text()
    with pytest.raises(ResultsError, match="input"):
        write_report(folders, result)
    assert result.read_text() == text


def test_cli_writes_the_report_and_the_markdown(folders, tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="trainperf")
    report_cli.add_parser(parser.add_subparsers(dest="command"))
    out, md = tmp_path / "r" / "report.html", tmp_path / "table.md"
    args = parser.parse_args(
        ["report", *map(str, folders), "-o", str(out), "--price-per-hour", "2.5", "--markdown", str(md)]
    )
    assert args.func(args) == 0
    assert out.read_text().startswith("<!DOCTYPE html>") and 'id="cost"' in out.read_text()
    assert md.read_text().count("\n") == 4  # header, rule, two rows
    assert [p.name for p in out.parent.iterdir()] == ["report.html"]  # no temporary file left behind
    assert "report written" in capsys.readouterr().out


# --- impossible timing, windows of runs, success re-derived from the evaluations --------------------------
def retime(path: Path, key: str, t: float, *, last: bool = False) -> int:
    """Give the first (or last) ``key`` record another time_ms; returns its line number."""
    lines = path.read_text().splitlines()
    records = [json.loads(ln.removeprefix(":::MLLOG ")) for ln in lines]
    i = [j for j, rec in enumerate(records) if rec["key"] == key][-1 if last else 0]
    lines[i] = mllog(key, records[i]["value"], t=t, **records[i]["metadata"])
    path.write_text("\n".join(lines) + "\n")
    return i + 1


@pytest.mark.parametrize(
    "key, t, last, words",
    [
        ("run_stop", T0 - 60000, False, ("run_stop at line 10", "before run_start at line 6", "negative duration")),
        ("eval_accuracy", T0 - 1, False, ("eval_accuracy at line 7", "before run_start at line 6")),
        ("eval_accuracy", T0 + 10 * 60000, True, ("eval_accuracy at line 9", "after run_stop at line 10")),
    ],
)
def test_impossible_timing_is_refused_naming_file_and_line(tmp_path, key, t, last, words):
    root = tmp_path / "in"
    write_system(root, "box")
    write_run(root / "results/box/resnet/result_0.txt", system="box", seed=1, minutes=1.0)
    write_run(root / "results/box/resnet/result_1.txt", system="box", seed=2, minutes=1.0)
    retime(root / "results/box/resnet/result_1.txt", key, t, last=last)
    with pytest.raises(ResultsError, match=r"result_1\.txt: ") as err:
        write_report([root], tmp_path / "out" / "report.html")
    assert all(w in str(err.value) for w in words), str(err.value)
    assert "redo the run" in str(err.value) and not (tmp_path / "out").exists()


def test_more_runs_than_required_score_the_median_window_and_list_every_run(tmp_path):
    write_system(tmp_path, "box")
    minutes = [4.5, 4.0, 0.5, 1.0, 1.5, 2.0, 2.5]  # result_i.txt; result_0 and result_1 started last (all in budget)
    starts = [60, 70, 10, 20, 30, 40, 50]
    for i, (m, start) in enumerate(zip(minutes, starts, strict=True)):
        path = tmp_path / "results/box/resnet" / f"result_{i}.txt"
        write_run(path, system="box", seed=i, minutes=m, t0=T0 + start * 3_600_000)
    (s,) = collect([tmp_path])
    (bench,) = s.benchmarks
    # in start order the minutes are 0.5 1 1.5 2 2.5 4.5 4: windows of 5 score 1.5, 2 and 8.5/3; the median is 2
    assert bench.score.valid and bench.score.minutes == pytest.approx(2.0)
    assert [bench.runs[i].index for i in bench.score.window_runs] == [3, 4, 5, 6, 0]
    assert bench.score.note == ("median of 3 windows of 5 consecutive runs (ordered by run_start time): runs 2-6 of 7")
    assert len(bench.runs) == 7 and bench.score.runs == 7
    summary = section(render_html([s], price_per_hour=None), "summary")
    assert "median of 3 windows" in summary and "runs 2-6 of 7" in summary and "7/7" in summary


def test_success_is_re_derived_from_the_logged_evaluations(tmp_path):
    write_system(tmp_path, "box")
    for i in range(5):
        qualities = (0.5, 0.7, 0.86) if i == 2 else None  # result_2 says success but never reaches 0.88
        path = tmp_path / "results/box/resnet" / f"result_{i}.txt"
        write_run(path, system="box", seed=i, minutes=1.0 + i, qualities=qualities)
    (s,) = collect([tmp_path])
    (bench,) = s.benchmarks
    run = bench.runs[2]
    assert run.status == "success" and not run.success and run.reached_target is False
    assert run.counted_status == "failed (target not reached)"
    assert bench.score.successes == 4 and bench.score.valid
    assert bench.score.minutes == pytest.approx((2.0 + 4.0 + 5.0) / 3)  # result_2 (3 min) is dropped as the slowest
    assert "result_2.txt of resnet: run_stop says status 'success'" in run.note and "(best: 0.86)" in run.note
    assert "top1 >= 0.88" in run.note and "counted as failed" in run.note
    assert bench.run_notes == [run.note]
    summary = section(render_html([s], price_per_hour=None), "summary")
    assert "counted as failed" in summary and "4/5" in summary


# --- the report never writes over (or among) what it reads; bad records are clear errors -----------------
@pytest.mark.parametrize(
    "target",
    [
        "summary.json",
        "trainperf.json",
        "results/cpu-box/resnet/report.html",
        "results/report.html",
        "systems/cpu-box.json",
        "systems/new.html",
    ],
)
def test_report_refuses_to_write_over_or_among_its_inputs(folders, tmp_path, target):
    root = folders[0]
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    with pytest.raises(ResultsError, match="input files") as err:
        write_report(folders, root / target)
    assert "choose another -o" in str(err.value)
    with pytest.raises(ResultsError, match="input files"):
        write_report(folders, tmp_path / "ok.html", markdown=root / target)
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    assert not (tmp_path / "ok.html").exists()


def test_report_resolves_links_before_comparing_and_the_cli_says_why(folders, tmp_path, capsys):
    from trainperf.cli import main

    link = tmp_path / "report.html"
    link.symlink_to(folders[0] / "summary.json")
    before = (folders[0] / "summary.json").read_text()
    with pytest.raises(ResultsError, match="one of the input files"):
        write_report(folders, link)
    assert main(["report", str(folders[0]), "-o", str(folders[0] / "summary.json"), "--history-round", "none"]) == 2
    assert "summary.json is one of the input files" in capsys.readouterr().err
    assert (folders[0] / "summary.json").read_text() == before


def set_record(path: Path, key: str, **fields) -> None:
    """Change fields of the first ``key`` record of a result file."""
    lines = path.read_text().splitlines()
    i = next(j for j, ln in enumerate(lines) if json.loads(ln.removeprefix(":::MLLOG "))["key"] == key)
    lines[i] = ":::MLLOG " + json.dumps({**json.loads(lines[i].removeprefix(":::MLLOG ")), **fields})
    path.write_text("\n".join(lines) + "\n")


BAD_RECORDS = [
    ("run_stop", {"metadata": ["success"]}, "run_stop at line 10 has metadata ['success']; it must be an object"),
    ("run_stop", {"metadata": "success"}, "run_stop at line 10 has metadata 'success'; it must be an object"),
    ("run_stop", {"metadata": {"status": 1}}, "run_stop at line 10 has status 1 in its metadata; it must be a string"),
    ("eval_accuracy", {"metadata": "x"}, "eval_accuracy at line 7 has metadata 'x'; it must be an object"),
    ("eval_accuracy", {"value": "high"}, "eval_accuracy at line 7 has value 'high'; it must be a number"),
    ("eval_accuracy", {"metadata": {"epoch_num": "one"}}, "eval_accuracy at line 7 has epoch_num 'one'"),
    ("eval_accuracy", {"time_ms": "later"}, "eval_accuracy at line 7 has time_ms 'later', not a finite number"),
    ("trainperf_scale", {"value": ["mini"]}, "trainperf_scale at line 4 has value ['mini']; it must be a string"),
]


@pytest.mark.parametrize("key, fields, words", BAD_RECORDS)
def test_a_bad_record_is_a_clear_error_naming_file_line_and_fix(tmp_path, key, fields, words):
    root = tmp_path / "in"
    write_system(root, "box")
    path = root / "results/box/resnet/result_0.txt"
    write_run(path, system="box", seed=1, minutes=1.0)
    set_record(path, key, **fields)
    with pytest.raises(ResultsError) as err:
        write_report([root], tmp_path / "out" / "report.html")
    text = str(err.value)
    assert text.startswith(f"{path}: ") and words in text, text
    assert "move it away and redo the run" in text and not (tmp_path / "out").exists()


@pytest.mark.parametrize("nodes", ["²", "١", "1.5", "-1", ""])
def test_a_node_count_that_is_not_plain_digits_is_a_clear_error(tmp_path, nodes):
    write_system(tmp_path, "box", nodes=nodes)
    write_run(tmp_path / "results/box/resnet/result_0.txt", system="box", seed=1, minutes=1.0)
    with pytest.raises(ResultsError, match=re.escape(f"box.json: field 'number_of_nodes' is {nodes!r}")) as err:
        collect([tmp_path])
    assert "digits 0-9" in str(err.value) and "trainperf system -o" in str(err.value)


# --- published packages as they are (mlcommons/training_results_v2.0): quirks reproduced by hand ----------
def test_a_whole_json_number_of_nodes_is_read_and_a_fraction_is_refused(tmp_path):
    # MosaicML's published v2.0 systems write "number_of_nodes": 1.0 (a JSON number)
    write_system(tmp_path, "box", accelerators="8")
    desc = json.loads((tmp_path / "systems/box.json").read_text())
    (tmp_path / "systems/box.json").write_text(json.dumps({**desc, "number_of_nodes": 1.0}))
    write_run(tmp_path / "results/box/resnet/result_0.txt", system="box", seed=1, minutes=1.0)
    [system] = collect([tmp_path])
    assert (system.nodes, system.accelerators) == (1, 8)
    (tmp_path / "systems/box.json").write_text(json.dumps({**desc, "number_of_nodes": 1.5}))
    with pytest.raises(ResultsError, match="'number_of_nodes' is 1.5"):
        collect([tmp_path])


def test_result_files_named_with_an_id_are_runs_and_two_sets_in_one_folder_are_refused(tmp_path):
    # HazyResearch's published v2.0 bert results are result_<timestamp id>_<1..10>.txt
    write_system(tmp_path, "box")
    for i, m in enumerate([1.0, 2.0, 3.0, 4.0, 5.0], start=1):
        write_run(tmp_path / f"results/box/resnet/result_2205201007_{i}.txt", system="box", seed=i, minutes=m)
    [bench] = collect([tmp_path])[0].benchmarks
    assert [r.index for r in bench.runs] == [1, 2, 3, 4, 5]
    assert bench.score.valid and bench.score.minutes == pytest.approx(3.0)
    write_run(tmp_path / "results/box/resnet/result_9999_1.txt", system="box", seed=9, minutes=0.1)
    with pytest.raises(ResultsError, match=r"result_2205201007_1\.txt and result_9999_1\.txt are both run 1"):
        collect([tmp_path])


def test_a_published_folder_numbering_each_jobs_runs_is_one_set_in_name_order(tmp_path):
    # v4.0's smc-ac-power resnet: result_<job>-<id>_<n>.txt, runs 1 and 3 twice, 5 files as the round asks
    write_system(tmp_path, "box")
    names = ["5759-2405_2", "5762-2405_3", "5797-2405_1", "5800-2405_1", "5800-2405_3"]
    for name, m in zip(names, [1.0, 2.0, 3.0, 4.0, 5.0], strict=True):
        write_run(tmp_path / f"results/box/resnet/result_{name}.txt", system="box", seed=int(m), minutes=m)
    [system] = collect([tmp_path])
    [bench] = system.benchmarks
    assert [r.path.name for r in bench.runs] == [f"result_{n}.txt" for n in names]
    assert [r.index for r in bench.runs] == [0, 1, 2, 3, 4]
    assert bench.score.valid and bench.score.minutes == pytest.approx(3.0)
    assert any("repeat a run number" in n for n in system.notes), system.notes
    write_run(tmp_path / "results/box/resnet/result_9999-1_1.txt", system="box", seed=9, minutes=0.1)
    with pytest.raises(ResultsError, match=r"holds 6 result files where resnet needs 5"):
        collect([tmp_path])


def test_a_log_that_ends_before_run_stop_counts_as_not_converged_and_its_evaluations_do_not_count(tmp_path):
    # A published Lenovo v2.0 unet3d run ends mid-block, without run_stop; the published score counts it as failed.
    # The attack it must not open: a truncated log whose evaluation reaches the target buys no success.
    write_system(tmp_path, "box")
    for i, m in enumerate([1.0, 2.0, 3.0, 4.0, 5.0]):
        write_run(tmp_path / f"results/box/resnet/result_{i}.txt", system="box", seed=i, minutes=m)
    cut = tmp_path / "results/box/resnet/result_0.txt"
    cut.write_text("\n".join(ln for ln in cut.read_text().splitlines() if '"run_stop"' not in ln) + "\n")
    system = collect([tmp_path])[0]
    [bench] = system.benchmarks
    run = bench.runs[0]
    assert run.status == "aborted" and not run.success and run.minutes == pytest.approx(1.0)
    assert bench.score.valid and bench.score.successes == 4
    assert bench.score.minutes == pytest.approx(4.0)  # mean of 3, 4, 5: the cut run is dropped as the slowest
    assert any("ends before run_stop" in n for n in system.notes)
    (tmp_path / "results/box/resnet/result_1.txt").write_text(mllog("seed", 1, t=T0) + "\n")
    with pytest.raises(ResultsError, match=r"result_1\.txt is not a run \(no run_start\)"):
        collect([tmp_path])


def test_one_figure_per_chart_section_whatever_the_number_of_benchmarks(tmp_path):
    write_system(tmp_path, "box")
    for key in ("resnet", "dlrm", "bert"):
        for i in range(2):
            path = tmp_path / f"results/box/{key}/result_{i}.txt"
            write_run(path, system="box", seed=i, minutes=1.0 + i)
            path.write_text(path.read_text().replace('"resnet"', f'"{key}"'))
    page = render_html(collect([tmp_path]), price_per_hour=None)
    for sid in ("time-to-train", "spread", "convergence"):
        assert len(re.findall(r'src="data:image/png;base64,', section(page, sid))) == 1, sid
    assert 'id="published"' not in page  # mini results are never placed among the published ones


def test_a_reference_score_is_placed_among_its_rounds_published_results(tmp_path):
    write_system(tmp_path, "box", accelerators="8")
    for i, m in enumerate([30.0, 31.0, 32.0, 33.0, 34.0]):
        path = tmp_path / f"results/box/resnet/result_{i}.txt"
        write_run(path, system="box", seed=i, minutes=m, qualities=(0.70, 0.76))
        path.write_text(path.read_text().replace('"mini"', '"reference"'))
    page = render_html(collect([tmp_path]), price_per_hour=None, history_round="v2.0")
    from trainperf.history import query

    p = query.place(query.load_results(), "resnet", 32.0, round="v2.0")
    placed = section(page, "published")
    assert f"{p.rank} of {p.count + 1}" in placed and "v2.0" in placed and "32.000" in placed
    assert len(re.findall(r'src="data:image/png;base64,', placed)) == 1


def test_two_systems_get_a_comparison_with_the_ratio_interval_and_p_value_of_trainperf_compare(page, systems):
    from trainperf.report.compare import compare_systems

    body = section(page, "compare")
    cpu, evil = (expected_score(name).minutes for name in RUNS)
    assert "<td>resnet</td>" in body and f"{cpu / evil:.3f}" in body  # cpu-box / the GPU system's olympic scores
    (c,) = compare_systems(*systems)
    assert c.ratio == pytest.approx(cpu / evil) and c.ci[0] <= c.ratio <= c.ci[1]
    assert f"{c.p_value:.3g}" in body and html_escaped(c.verdict) in body
    assert "<script" not in body  # the GPU system's name is escaped in the verdict too
    one = render_html(systems[:1], price_per_hour=None)
    assert 'id="compare"' not in one  # one system: nothing to compare


def test_a_one_run_cpu_suite_leaves_out_the_sections_that_would_repeat_or_show_nothing(tmp_path):
    write_system(tmp_path, "box")
    write_run(tmp_path / "results/box/resnet/result_0.txt", system="box", seed=1, minutes=1.0)
    page = render_html(collect([tmp_path]), price_per_hour=None)
    assert 'id="spread"' not in page  # one run: no spread
    assert 'id="per-accelerator"' not in page  # one processor: the summary's scores again
    assert 'id="summary"' in page and 'id="convergence"' in page


def test_markdown_shows_link_and_image_syntax_from_a_file_as_text(tmp_path):
    # a system's folder name is shown as its label: Markdown syntax in it must not become a link or an image
    name = "![x](http:evil.png)[click](http:evil)"
    write_system(tmp_path, name)
    write_run(tmp_path / "results" / name / "resnet" / "result_0.txt", system=name, seed=1, minutes=1.0)
    md = render_markdown(collect([tmp_path]))
    assert "](" not in md and "![" not in md
    assert r"\!\[x\]\(http:evil.png\)\[click\]\(http:evil\)" in md


def test_results_are_grouped_by_round_in_the_report_the_markdown_and_compare(tmp_path, capsys):
    """A suite of both rounds: each benchmark carries its round (trainperf's logs by their benchmark's), the summary
    and the Markdown list v2.0 before v6.1 whatever the folder order, and compare says each row's round."""
    from trainperf.report.compare import cmd_compare

    for side in ("a", "b"):
        root = tmp_path / side
        write_system(root, "box")
        for key, qualities in (("llama31_8b", (6.5, 5.9, 5.5)), ("resnet", None)):
            for i in range(registry.get_spec(key, "mini").runs_required):
                path = root / f"results/box/{key}/result_{i}.txt"
                write_run(path, system="box", seed=i, minutes=1.0 + 0.1 * i, qualities=qualities, t0=T0 + i * 600_000)
                path.write_text(path.read_text().replace('"resnet"', f'"{key}"'))
    systems = collect([tmp_path / "a"])
    assert {b.benchmark: b.round for b in systems[0].benchmarks} == {"resnet": "v2.0", "llama31_8b": "v6.1"}
    summary = section(render_html(systems, price_per_hour=None), "summary")
    assert "<th>round</th>" in summary and summary.index("v2.0") < summary.index("v6.1")
    assert summary.index("resnet") < summary.index("llama31_8b")
    md = render_markdown(systems).splitlines()
    assert md[0].startswith("| system | round | benchmark |")
    assert [line.split(" | ")[1] for line in md[2:]] == ["v2.0", "v6.1"]
    args = argparse.Namespace(
        a=tmp_path / "a", b=tmp_path / "b", benchmark=None, system_a=None, system_b=None, allow_different="",
        alpha=0.05, confidence=0.95, resamples=1000, seed=0, json=True,
    )  # fmt: skip
    assert cmd_compare(args) == 0
    assert sorted((c["benchmark"], c["a"]["round"]) for c in json.loads(capsys.readouterr().out)) == [
        ("llama31_8b", "v6.1"),
        ("resnet", "v2.0"),
    ]


def test_compare_refuses_one_benchmark_of_two_rounds_unless_allowed(tmp_path):
    """bert of v2.0 against bert of v2.1 (a package in training_results_v2.1): another round's rules, refused unless
    --allow-different round."""
    from trainperf.report.compare import compare_paths

    for side, repo in (("a", "trainperf-out"), ("b", "training_results_v2.1/org")):
        root = tmp_path / side / repo
        write_system(root, "box")
        for i in range(5):
            path = root / f"results/box/resnet/result_{i}.txt"
            write_run(path, system="box", seed=i, minutes=1.0 + 0.1 * i, t0=T0 + i * 600_000)
            if side == "b":  # a published log: no trainperf_* key
                path.write_text(path.read_text().replace("trainperf_scale", "submission_division"))
    a, b = tmp_path / "a" / "trainperf-out", tmp_path / "b" / "training_results_v2.1/org"
    with pytest.raises(UsageError, match=r"differ in round \(v2.0 against v2.1\).*--allow-different round"):
        compare_paths(a, b)
    with pytest.raises(UsageError, match=r"differ in round \(v2.0 against v2.1\)"):
        compare_paths(a, b, allow=("scale", "target"))  # a published log is reference-scale, with its target
    [c] = compare_paths(a, b, allow=("round", "scale", "target"))
    assert (c.a.round, c.b.round, c.differences[0]) == ("v2.0", "v2.1", "round")
