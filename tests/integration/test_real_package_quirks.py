"""`trainperf review` on what published MLPerf v2.0 packages really hold, reproduced by hand (no copy of a real log):
each quirk is a warning, not an error, as MLCommons accepted it; and each relaxation still stops the attack that
the old, stricter check stopped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from untrusted import ORG, SYSTEM, foreign_log, make_package, system_description

from trainperf.submission.cli import format_review
from trainperf.submission.layout import copy_package
from trainperf.submission.official import ToolRun
from trainperf.submission.review import (
    _Bench,
    _check_seeds_and_consistency,
    _lacks_round_data,
    _package_checker_errors,
    _Run,
    review,
)

pytest.importorskip("mlperf_logging")
ESC = "\x1b"


def quirky_package(root: Path) -> Path:
    """The quirks of published packages: a description with a float node count and a software stack object holding
    Python's two-line version (MosaicML), logs naming the org in other letters (Samsung's 'SAMSUNG') and a platform
    other than the folder (Google's 'tpu-v4-2048' in cloud-tpu-v4-2048-TF)."""
    logs = {i: {"submission_org": ORG.upper(), "submission_platform": f"{SYSTEM}-8x"} for i in range(5)}
    org = make_package(root, logs)
    desc = system_description(number_of_nodes=1.0)  # type: ignore[arg-type]
    desc["other_software_stack"] = {"python_version": "3.9.12 (main)\n[GCC 9.4.0]", "cuda": "11.3"}  # type: ignore
    (org / "systems" / f"{SYSTEM}.json").write_text(json.dumps(desc), encoding="utf-8")
    return org


@pytest.fixture(scope="module")
def quirky(tmp_path_factory):
    return review(quirky_package(tmp_path_factory.mktemp("quirky")))


def test_a_package_with_the_published_quirks_is_accepted_with_warnings(quirky):
    (verdict,) = quirky.verdicts
    assert quirky.passed and verdict.passed, verdict.problems
    assert verdict.summarizer_minutes == pytest.approx(verdict.score.minutes, rel=1e-9)
    text = "\n".join(verdict.warnings)
    assert "field 'number_of_nodes' is a JSON float" in text
    assert "field 'other_software_stack' is a JSON dict" in text
    assert "submission_org is 'ACME', but the package folder is 'acme'" in text
    assert f"submission_platform is '{SYSTEM}-8x', but it is in results/{SYSTEM}" in text


def test_the_verdicts_are_the_same_whatever_the_number_of_jobs(quirky, tmp_path):
    """--jobs runs the official tools at once (the package checker, the summarizer, each benchmark's compliance
    checks, the RCP check); what review finds, and in which order, does not depend on it."""
    from trainperf.submission.review import review_json

    seen = []
    parallel = review(quirky_package(tmp_path), jobs=4, progress=lambda done, total: seen.append((done, total)))
    assert review_json(parallel)["verdicts"] == review_json(quirky)["verdicts"]
    assert parallel.problems == quirky.problems and parallel.warnings == quirky.warnings
    # the package checker, the summarizer, the benchmark's compliance checks and its RCP check, each counted once
    assert sorted(done for done, _ in seen) == list(range(1, 5)) and max(seen) == (4, 4)


def test_a_log_with_one_seed_per_rank_is_a_warning():
    """NVIDIA's v2.0 logs hold a seed line per rank; the round's seed checker only warned about it."""
    runs = [
        _Run(name=f"result_{i}.txt", path=Path("x"), logged=None, records=[_seed(10 * i + r, rank=r) for r in range(2)])
        for i in range(5)
    ]
    bench = _Bench(system=SYSTEM, benchmark="resnet", runs=runs)
    _check_seeds_and_consistency(bench, ORG, None)
    assert bench.problems == []
    assert "result_1.txt: logs several different seeds (10, 11), one per rank or per generator" in bench.warnings


def _seed(value: int, rank: int) -> dict:
    return {"key": "seed", "value": value, "metadata": {"file": "train.py", "lineno": 7, "rank": rank}}


def test_a_system_description_with_an_escape_is_still_kept_from_the_tools(tmp_path):
    """The attack the string-only rule stopped: a description field that would print a terminal escape."""
    org = make_package(tmp_path / "pkg")
    desc = system_description()
    desc["other_software_stack"] = {"python_version": f"3.9\n{ESC}]0;owned{ESC}\\"}  # type: ignore[assignment]
    (org / "systems" / f"{SYSTEM}.json").write_text(json.dumps(desc), encoding="utf-8")
    layout = copy_package(org, tmp_path / "copy" / ORG)
    assert SYSTEM in layout.unusable_systems
    (problem,) = layout.system_problems[SYSTEM]
    assert "holds the control character U+001B" in problem and ESC not in problem


def test_a_system_name_with_a_slash_is_a_name_not_a_path(tmp_path):
    """Lenovo's published v2.0 system_name holds '80GB/500W'. No official tool of mlperf-logging 4.1.68 opens a path
    made from system_name (the summarizer's link takes the description's file name), so it is accepted; the attack
    the old refusal stopped, a name leading the scores to another system or a file outside the copy, still fails:
    the score is read back for the system's own folder and nothing is written outside the private copy."""
    org = make_package(tmp_path / "pkg")
    desc = system_description(system_name="../../Server 80GB/500W A100")
    (org / "systems" / f"{SYSTEM}.json").write_text(json.dumps(desc), encoding="utf-8")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    result = review(org)
    (verdict,) = result.verdicts
    assert result.passed and verdict.system == SYSTEM, verdict.problems
    assert verdict.summarizer_minutes == pytest.approx(verdict.score.minutes, rel=1e-9)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("field", ["submitter", "division", "system_name"])
def test_the_fields_that_become_paths_must_still_be_strings(tmp_path, field):
    org = make_package(tmp_path / "pkg")
    desc = system_description()
    desc[field] = {"a": "../x"}  # type: ignore[assignment]
    (org / "systems" / f"{SYSTEM}.json").write_text(json.dumps(desc), encoding="utf-8")
    layout = copy_package(org, tmp_path / "copy" / ORG)
    assert SYSTEM in layout.unusable_systems
    assert any(f"field {field!r} must be a string, not dict" in p for p in layout.system_problems[SYSTEM])


def test_a_name_that_is_a_path_is_still_refused_whatever_the_folder(tmp_path):
    """submission_org is compared with the folder no more; a value that is a path is still refused by the gate."""
    org = make_package(tmp_path / "pkg", {1: {"submission_org": "../acme"}})
    (verdict,) = review(org).verdicts
    assert not verdict.passed
    assert any(p.startswith("result_1.txt: refused") and "'../acme'" in p for p in verdict.problems)


def test_two_runs_with_the_same_seed_from_the_same_line_still_fail(tmp_path):
    org = make_package(tmp_path / "pkg", {2: {"seed": 1}})
    (verdict,) = review(org).verdicts
    assert not verdict.passed
    assert any("result_0.txt and result_2.txt log the same seed 1" in p for p in verdict.problems)


def test_a_run_without_a_seed_beside_runs_with_one_fails_and_none_logging_one_warns(tmp_path):
    org = make_package(tmp_path / "pkg")
    log = org / "results" / SYSTEM / "resnet" / "result_3.txt"
    log.write_text("".join(ln for ln in log.read_text().splitlines(True) if '"key": "seed"' not in ln))
    (verdict,) = review(org).verdicts
    assert any(p.startswith("result_3.txt: logs no seed, but result_0.txt does") for p in verdict.problems)


def test_the_later_rounds_no_seed_error_of_the_package_checker_is_a_warning():
    no_seed = [
        "Seed checker failed and found the following errors: Result file results/box/bert/result_0.txt logs no "
        "seed.\nResult file results/box/bert/result_1.txt logs no seed.",
        "Seed checker failed",
    ]
    errors, warnings = _package_checker_errors(no_seed)
    assert errors == [] and len(warnings) == 2 and "not a rule of the v2.0 round" in warnings[0]
    same = "Result file a logs seed 3 on t.py:1. However, result file b already logs the same seed on the same line."
    errors, warnings = _package_checker_errors(
        [
            f"Seed checker failed and found the following errors: {same}",
            "Seed checker failed",
            "RCP Test Failed: RCP found",
        ]
    )
    assert (
        errors
        == [
            f"Seed checker failed and found the following errors: {same}",
            "RCP Test Failed: RCP found",
            "Seed checker failed",
        ]
        and warnings == []
    )


# --- scaling.json and runs short of the target ----------------------------------------------------------
def test_the_committees_scaling_factor_is_shown_apart_and_one_run_short_of_the_target_is_dropped(tmp_path):
    """Google's v2.0 ssd package holds the committee's scaling.json (1.023), and a published Google resnet run
    stopped 'success' just below the target: MLCommons accepted both (the package checker accepts one
    non-compliant file under olympic scoring). The short run is the slowest, which the summarizer drops too (it
    counts that run's minutes; trainperf counts it as failed)."""
    org = make_package(tmp_path / "pkg")
    _short_of_the_target(org, 4)
    (org / "results" / SYSTEM / "resnet" / "scaling.json").write_text('{"scaling_factor": 1.023}\n')
    result = review(org)
    (verdict,) = result.verdicts
    assert verdict.passed, verdict.problems
    assert verdict.scaling == 1.023 and verdict.scaled_minutes == pytest.approx(verdict.score.minutes * 1.023)
    assert verdict.summarizer_minutes == pytest.approx(verdict.score.minutes, rel=1e-9)  # the raw score
    assert any("result_4.txt stopped without reaching the target" in w for w in verdict.warnings)
    assert any("scaling factor 1.023 applies to the published score" in w for w in verdict.warnings)
    text = "\n".join(format_review(result))
    assert f"x1.023 (scaling.json) = {verdict.scaled_minutes:.4f} min as published" in text
    out = tmp_path / "review.json"
    rc = subprocess.run(
        [sys.executable, "-m", "trainperf", "review", str(org), "--json", str(out)], capture_output=True, timeout=300
    ).returncode
    data = json.loads(out.read_text())
    assert rc == 0 and data["passed"] and data["verdicts"][0]["scaling_factor"] == 1.023
    assert data["verdicts"][0]["scaled_minutes"] == pytest.approx(verdict.scaled_minutes)
    assert {w["kind"] for w in data["verdicts"][0]["warnings"]} >= {"scaling.json", "aborted runs"}


def _short_of_the_target(org: Path, i: int) -> None:
    """Run i's last evaluation below the mini target; it still stops with status 'success'."""
    log = org / "results" / SYSTEM / "resnet" / f"result_{i}.txt"
    text = log.read_text(encoding="utf-8")
    assert text.count('"value": 0.95,') == 1
    log.write_text(text.replace('"value": 0.95,', '"value": 0.5,'), encoding="utf-8")


@pytest.mark.parametrize("factor", ["0.5", "0", "true", '"1.5"', "1e400"])
def test_a_scaling_factor_that_would_shorten_the_time_is_refused(tmp_path, factor):
    """The attack the refusal of every scaling.json stopped: a package scaling its own score down."""
    org = make_package(tmp_path / "pkg")
    (org / "results" / SYSTEM / "resnet" / "scaling.json").write_text(f'{{"scaling_factor": {factor}}}')
    layout = copy_package(org, tmp_path / "copy" / ORG)
    (problem,) = layout.problems_of[(SYSTEM, "resnet")]
    assert "scaling.json scales the result_summarizer's score" in problem and layout.scaling == {}


def _cut_before_run_stop(org: Path, i: int) -> None:
    """Run i's log ends before its run_stop line (Lenovo's published v2.0 unet3d result_40: a run that never ended)."""
    log = org / "results" / SYSTEM / "resnet" / f"result_{i}.txt"
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    stop = next(n for n, ln in enumerate(lines) if '"key": "run_stop"' in ln)
    log.write_text("".join(lines[:stop]), encoding="utf-8")


def test_one_run_whose_log_ends_before_run_stop_is_dropped_and_two_failed_runs_fail(tmp_path):
    org = make_package(tmp_path / "pkg")
    _cut_before_run_stop(org, 2)
    (verdict,) = review(org).verdicts
    assert verdict.passed, verdict.problems
    assert any("result_2.txt stopped without reaching the target" in w for w in verdict.warnings)
    _short_of_the_target(org, 3)
    (verdict,) = review(org).verdicts
    assert not verdict.passed
    assert any("2 runs stopped without reaching the target (result_2.txt, result_3.txt)" in p for p in verdict.problems)


def test_a_tool_without_the_rounds_data_for_a_benchmark_is_a_warning_and_any_other_crash_an_error():
    """mlperf-logging 4.1.68's package checker, rcp checker and summarizer stop on Google's v2.0 dlrm with
    KeyError: 'dlrm' (no v2.0 dlrm entry in their run counts)."""
    crash = "Traceback (most recent call last):\n  ...\nKeyError: 'dlrm'\n"
    benches = {("research-tpu-v4-256-TF", "dlrm"): None}
    assert _lacks_round_data(ToolRun(tool="package_checker", rc=1, out="", err=crash), benches)
    other = crash.replace("KeyError: 'dlrm'", "KeyError: 'submission_benchmark'")
    assert not _lacks_round_data(ToolRun(tool="package_checker", rc=1, out="", err=other), benches)
    assert not _lacks_round_data(ToolRun(tool="package_checker", rc=None, out="", err=crash), benches)


def test_the_later_tools_batch_size_comparison_crash_is_a_gap_of_the_tool():
    """Dell's published v2.0 32-node maskrcnn has one run at global_batch_size 128 beside four at 256; the v2.0
    rcp_checker read the batch size without comparing files, while 4.1.68's says "Batch sizes in files do not
    match." and then stops on KeyError: None. That crash is a warning; a KeyError: None without it is not."""
    benches = {("32xXE8545x4A100-SXM-40GB", "maskrcnn"): None}
    err = "WARNING -  Batch sizes in files do not match.\nTraceback (most recent call last):\n  ...\nKeyError: None\n"
    assert _lacks_round_data(ToolRun(tool="package_checker", rc=1, out="", err=err), benches)
    alone = err.replace("WARNING -  Batch sizes in files do not match.\n", "")
    assert not _lacks_round_data(ToolRun(tool="package_checker", rc=1, out="", err=alone), benches)


def test_a_traceback_the_tool_went_on_from_is_not_a_crash():
    """4.1.68's result_summarizer prints a traceback for each benchmark whose v2.0 RCP data it lacks ("RCP/GBS
    computation failed for ...: 'dlrm'"), goes on and exits 0 with every score written (Inspur, H3C v2.0)."""
    caught = "Traceback (most recent call last):\n  ...\nKeyError: 'dlrm'\nWARNING: RCP/GBS computation failed\n"
    assert not ToolRun(tool="result_summarizer", rc=0, out="", err=caught).crashed
    assert ToolRun(tool="result_summarizer", rc=1, out="", err=caught).crashed
    assert ToolRun(tool="result_summarizer", rc=None, out="", err="").crashed  # timed out


def _rcp_check(bench, copy, work, layout):
    """Review's step (d) alone: the RCP checker's run(s) made (each job of a batch by ``run_rcp_checker``, which the
    tests replace), then their findings taken."""
    from unittest import mock

    from trainperf.submission import official
    from trainperf.submission import review as review_module

    def each(jobs, workdir, writes, ruleset="2.0.0"):
        return [
            official.run_rcp_checker(
                j.benchmark_dir, j.workdir, custom_rcps=j.custom_rcps, samples_flag=j.samples_flag, ruleset=ruleset
            )
            for j in jobs
        ]

    key = (bench.system, bench.benchmark)
    with mock.patch.object(official, "run_rcp_checkers", each):
        ran = review_module._run_rcps({key: review_module._plan_rcp(bench, copy, work)}, copy, work, bench.ruleset)
    review_module._check_rcp(bench, layout, {}, [], ran[key])


def test_bert_samples_given_in_train_samples_are_counted_so_when_epoch_num_fails(monkeypatch, tmp_path):
    """Baidu's v2.0 bert logs epoch_num 1 and its samples in train_samples: the rcp checker fails it counting
    epoch_num and passes it with --bert_train_samples, as the round's package checker does with
    --rcp_bert_train_samples. The package checker's own RCP failure then becomes a warning."""
    from trainperf.submission import official

    calls = []

    def fake(folder, workdir, *, custom_rcps=None, samples_flag="", ruleset="2.0.0"):
        calls.append(samples_flag)
        ran = ToolRun(tool="rcp_checker", rc=0, out="", err="")
        return official.RcpCheck(ran=ran, passed=bool(samples_flag), message="RCP Interpolation")

    monkeypatch.setattr(official, "run_rcp_checker", fake)
    records = [{"key": "submission_benchmark", "value": "bert"}, {"key": "global_batch_size", "value": 448}]
    runs = [_Run(name=f"result_{i}.txt", path=Path("x"), logged=None, records=records) for i in range(10)]
    bench = _Bench(system=SYSTEM, benchmark="bert", runs=runs)
    bench.problems.append("package_checker: RCP Test Failed: RCP Interpolation")
    layout = copy_package(make_package(tmp_path / "pkg"), tmp_path / "copy" / ORG)
    _rcp_check(bench, tmp_path / "copy" / ORG, tmp_path / "work", layout)
    assert calls == ["", "--bert_train_samples"]
    assert bench.rcp.startswith("passed") and "--bert_train_samples" in bench.rcp
    assert bench.problems == []
    assert any(w.startswith("package_checker: RCP Test Failed") and "passes" in w for w in bench.warnings)

    calls.clear()
    monkeypatch.setattr(
        official,
        "run_rcp_checker",
        lambda *a, **k: (
            calls.append(1)
            or official.RcpCheck(
                ran=ToolRun(tool="rcp_checker", rc=1, out="", err=""), passed=False, message="RCP found"
            )
        ),
    )
    bench = _Bench(system=SYSTEM, benchmark="bert", runs=runs)
    layout.divisions[SYSTEM] = "closed"
    _rcp_check(bench, tmp_path / "copy" / ORG, tmp_path / "work", layout)
    assert len(calls) == 2 and bench.rcp.startswith("failed") and any("RCP check failed" in p for p in bench.problems)


# --- a package of another round -------------------------------------------------------------------------------
def test_a_package_of_another_round_is_reviewed_by_that_rounds_tools(tmp_path):
    """A published v1.1 package names its round nowhere in its files (no version in the logs or the system
    description): review infers v1.1 from its runs' dates (October 2021) and its benchmarks, says so, and gives the
    official tools ruleset 1.1.0; in a folder named like the results repository, the round is the repository's."""
    org = make_package(tmp_path / "round")
    for i, log in enumerate(sorted((org / "results" / SYSTEM / "resnet").glob("result_*.txt"))):
        foreign_log(log, {"seed": i + 1}, run=i)
    r = review(org)
    assert r.ruleset == "1.1.0" and r.passed, [v.problems for v in r.verdicts]
    assert any(
        w.startswith("reviewed by the MLPerf Training v1.1 rules (1.1.0): inferred from the logs") for w in r.warnings
    )
    (verdict,) = r.verdicts
    assert verdict.summarizer_minutes == pytest.approx(verdict.score.minutes, rel=1e-9)
    assert "the official v1.1 RCPs" in verdict.rcp
    assert "ruleset 1.1.0" in format_review(r)[0]


def test_the_installed_checkers_not_accepted_folder_is_a_warning_where_v1_1_only_warned():
    """4.1.68's package checker counts Baidu's v1.1 PaddlePaddle resnet runs, which log no weights_initialization,
    as non-compliant ("5 files do not comply, directory cannot be accepted"); the v1.1 round's checker only warned."""
    from trainperf.submission.review import _round_compliance

    refused = "package_checker: 5 files do not comply, directory cannot be accepted"
    bench = _Bench(system=SYSTEM, benchmark="resnet", problems=[refused], ruleset="1.1.0")
    _round_compliance(bench, [f"result_{i}.txt" for i in range(4)], dropped=1)
    assert bench.problems == [] and bench.warnings[0].startswith(refused) and "round's own checker" in bench.warnings[0]
    bench = _Bench(system=SYSTEM, benchmark="resnet", problems=[refused], ruleset="1.1.0")
    _round_compliance(bench, ["result_0.txt", "result_1.txt", "result_2.txt"], dropped=1)  # two fail otherwise
    assert bench.problems == [refused]


def test_the_rcp_checks_of_a_package_in_one_process_say_what_one_process_per_folder_says(tmp_path):
    """review runs the rcp_checker once for all the package's benchmark folders: each folder's verdict, numbers
    and log are those of ``python -m mlperf_logging.rcp_checker`` on it alone, a crash included (a folder without
    result files), and the batch goes on after it."""
    from trainperf.submission import official
    from trainperf.submission.package import mini_rcp_path

    org = make_package(tmp_path / "pkg")
    folder = org / "results" / SYSTEM / "resnet"
    empty = org / "results" / SYSTEM / "bert"
    empty.mkdir()
    jobs = [
        official.RcpJob(folder, tmp_path / "a", custom_rcps=mini_rcp_path("resnet")),
        official.RcpJob(empty, tmp_path / "b"),
        official.RcpJob(folder, tmp_path / "c"),
    ]
    batch = official.run_rcp_checkers(jobs, tmp_path / "batch", org)
    alone = [official.run_rcp_checker(j.benchmark_dir, j.workdir, custom_rcps=j.custom_rcps) for j in jobs]
    assert batch[1].ran.crashed and alone[1].ran.crashed
    for one, each in zip(batch, alone, strict=True):
        assert (one.passed, one.message, one.submission_epochs, one.min_epochs) == (
            each.passed,
            each.message,
            each.submission_epochs,
            each.min_epochs,
        )
        assert (one.ran.rc, one.ran.log, one.ran.failure()) == (each.ran.rc, each.ran.log, each.ran.failure())
