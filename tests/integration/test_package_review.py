"""Five real mini dlrm runs, packaged for MLCommons and reviewed with the official tools; tampering is caught.

The five runs are made once per session and shared with the end-to-end dlrm test (tests/conftest.py,
``package_runs``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trainperf import registry
from trainperf.errors import ResultsError
from trainperf.submission.cli import add_parser, format_review
from trainperf.submission.package import build_package, mini_rcp_path
from trainperf.submission.review import Review, review

pytestmark = pytest.mark.slow

ORG = "testorg"
BENCHMARK = "dlrm"
MLLOG = ":::MLLOG "


@pytest.fixture(scope="session")
def run_folder(package_runs) -> Path:
    """The 5 real mini dlrm runs of org testorg (tests/conftest.py)."""
    return package_runs


@pytest.fixture(scope="module")
def package(run_folder, tmp_path_factory) -> Path:
    return build_package([run_folder], tmp_path_factory.mktemp("pkg") / "submission", org=ORG)


def _snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    return {
        str(p.relative_to(root)): (p.lstat().st_mtime_ns, p.lstat().st_size, p.lstat().st_mode)
        for p in [root, *root.rglob("*")]
    }


@pytest.fixture(scope="module")
def clean(package, tmp_path_factory) -> tuple[Review, dict, dict, list[str]]:
    """The review of the untouched package, run from an empty working folder, with snapshots around it."""
    cwd = tmp_path_factory.mktemp("cwd")
    before = _snapshot(package)
    here = os.getcwd()
    os.chdir(cwd)
    try:
        result = review(package)
    finally:
        os.chdir(here)
    return result, before, _snapshot(package), sorted(p.name for p in cwd.iterdir())


def _system(package: Path) -> str:
    (system,) = [p.name for p in (package / "results").iterdir()]
    return system


def _results(package: Path) -> Path:
    return package / "results" / _system(package) / BENCHMARK


def _edit(path: Path, key: str, change, *, last: bool = False) -> None:
    """Apply ``change`` to the first (or last) MLLOG record ``key`` of a log; ``change`` returning None deletes it."""
    lines = path.read_text().splitlines(keepends=True)
    hits = [i for i, ln in enumerate(lines) if ln.startswith(MLLOG) and json.loads(ln[len(MLLOG) :])["key"] == key]
    i = hits[-1] if last else hits[0]
    record = change(json.loads(lines[i][len(MLLOG) :]))
    lines[i] = "" if record is None else MLLOG + json.dumps(record) + "\n"
    path.write_text("".join(lines))


def _seed(path: Path) -> int:
    return next(json.loads(ln[len(MLLOG) :])["value"] for ln in path.read_text().splitlines() if '"key": "seed"' in ln)


# --- the package ------------------------------------------------------------------------------------------
def test_package_has_the_mlcommons_layout_and_the_code_used(package, run_folder):
    system = _system(package)
    assert package.name == ORG and json.loads((package / "systems" / f"{system}.json").read_text())["submitter"] == ORG
    for i in range(5):
        copied = _results(package) / f"result_{i}.txt"
        assert copied.read_bytes() == (run_folder / "results" / system / BENCHMARK / f"result_{i}.txt").read_bytes()
    impl = package / "benchmarks" / BENCHMARK / "implementations" / "trainperf"
    import trainperf
    from trainperf.workloads.dlrm import MINI_RECIPE

    assert f"trainperf {trainperf.__version__}" in (impl / "README.md").read_text()
    assert json.loads((impl / "spec.json").read_text())["mini"]["target"] == registry.get_spec(BENCHMARK, "mini").target
    recipe = json.loads((impl / "recipe.json").read_text())[system]["hyperparameters"]
    assert recipe["global_batch_size"] == MINI_RECIPE.global_batch_size and recipe["opt_name"] == MINI_RECIPE.opt_name
    assert recipe["dense_learning_rate"] == MINI_RECIPE.dense_learning_rate  # the benchmark's own key, logged
    assert (impl / f"mini_rules_{BENCHMARK}.yaml").is_file()
    # the mini RCPs travel with the package exactly when trainperf has them (resnet's; none yet for dlrm)
    assert (impl / f"rcps_{BENCHMARK}.json").is_file() == mini_rcp_path(BENCHMARK).is_file()
    assert (impl / "trainperf" / "workloads" / BENCHMARK / "workload.py").is_file()
    assert not (impl / "trainperf" / "history").exists()
    assert not [p for p in package.parent.iterdir() if p.name != ORG]  # no temporary folder left behind


def test_package_checks_the_org_and_never_overwrites(package, run_folder, tmp_path):
    with pytest.raises(ResultsError, match=r"submission_org is 'testorg'.*--org testorg"):
        build_package([run_folder], tmp_path / "other", org="someone-else")
    assert not (tmp_path / "other" / "someone-else").exists()
    with pytest.raises(ResultsError, match="already exists and is not empty"):
        build_package([run_folder], package.parent, org=ORG)


def test_the_official_package_checker_passes(package, tmp_path):
    copy = tmp_path / ORG
    shutil.copytree(package, copy)
    r = subprocess.run(
        [sys.executable, "-m", "mlperf_logging.package_checker", str(copy), "training", "2.0.0"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "PACKAGE CHECKER FOUND NO ERRORS" in r.stderr, r.stderr


# --- the review of the untouched package ---------------------------------------------------------------
def test_review_passes(clean):
    result = clean[0]
    text = "\n".join(format_review(result))
    assert result.passed, text
    (verdict,) = result.verdicts
    assert verdict.benchmark == BENCHMARK and verdict.scale == "mini" and verdict.runs == 5
    assert not verdict.problems, text
    if mini_rcp_path(BENCHMARK).is_file():
        assert verdict.rcp.startswith("passed"), text
    else:  # said, not passed over: the verdict and a warning name what was not checked
        assert verdict.rcp == f"not checked: trainperf has no mini RCPs for {BENCHMARK} yet", text
        assert f"RCP not checked: trainperf has no mini RCPs for {BENCHMARK} yet" in verdict.warnings, text
    assert text.startswith("Review of") and f"PASS {BENCHMARK}" in text and text.endswith("PASSED: 1 benchmark(s)")


def test_our_score_equals_the_summarizer_score(clean, run_folder):
    (verdict,) = clean[0].verdicts
    assert verdict.score is not None and verdict.score.valid
    assert verdict.summarizer_minutes == pytest.approx(verdict.score.minutes, rel=1e-12)
    summary = json.loads((run_folder / "summary.json").read_text())["benchmarks"][0]
    assert summary["score_minutes"] == pytest.approx(verdict.score.minutes, rel=1e-12)


def test_nothing_is_written_inside_the_package_or_the_working_folder(clean):
    _, before, after, cwd_files = clean
    assert after == before
    assert cwd_files == []


# --- tampered packages ------------------------------------------------------------------------------------
def _lower_last_accuracy(pkg: Path) -> tuple[str, ...]:
    # one run short of the target is a failed run that olympic scoring drops (see the test below); two are not
    for name in ("result_1.txt", "result_2.txt"):
        _edit(_results(pkg) / name, "eval_accuracy", lambda r: {**r, "value": 0.5}, last=True)
    return ("result_1.txt", "result_2.txt", "stopped without reaching the target", "drops at most 1")


def _delete_run_stop(pkg: Path) -> tuple[str, ...]:
    """Two runs that never ended: olympic scoring drops one non-converged run (a published Lenovo v2.0 unet3d log
    ends before its run_stop), not two."""
    _edit(_results(pkg) / "result_1.txt", "run_stop", lambda r: None)
    _edit(_results(pkg) / "result_3.txt", "run_stop", lambda r: None)
    return ("2 runs stopped without reaching the target", "result_1.txt", "result_3.txt")


def _duplicate_seed(pkg: Path) -> tuple[str, ...]:
    seed = _seed(_results(pkg) / "result_0.txt")
    _edit(_results(pkg) / "result_3.txt", "seed", lambda r: {**r, "value": seed})
    return ("result_0.txt and result_3.txt", f"same seed {seed}")


def _delete_a_run(pkg: Path) -> tuple[str, ...]:
    (_results(pkg) / "result_4.txt").unlink()
    return ("missing: result_4.txt", "exactly 5 runs")


def _break_system_json(pkg: Path) -> tuple[str, ...]:
    (pkg / "systems" / f"{_system(pkg)}.json").write_text('{"submitter": ')
    return (f"systems/{_system(pkg)}.json", "not valid JSON")


@pytest.mark.parametrize(
    "tamper", [_lower_last_accuracy, _delete_run_stop, _duplicate_seed, _delete_a_run, _break_system_json]
)
def test_tampered_package_fails_with_a_verdict_naming_file_and_rule(package, tmp_path, tamper):
    pkg = tmp_path / ORG
    shutil.copytree(package, pkg)
    expected = tamper(pkg)
    result = review(pkg)
    assert not result.passed
    (verdict,) = result.verdicts
    assert not verdict.passed
    assert any(all(word in p for word in expected) for p in verdict.problems), verdict.problems


def test_one_run_short_of_the_target_is_dropped_with_a_warning(package, tmp_path):
    """The v2.0 rules let olympic scoring drop one run that did not converge (a published Google v2.0 resnet run
    stopped 'success' below the target); review accepts the package and says which run it was."""
    pkg = tmp_path / ORG
    shutil.copytree(package, pkg)
    _edit(_results(pkg) / "result_2.txt", "eval_accuracy", lambda r: {**r, "value": 0.5}, last=True)
    result = review(pkg)
    (verdict,) = result.verdicts
    assert verdict.passed, verdict.problems
    assert any("result_2.txt" in w and "stopped without reaching the target" in w for w in verdict.warnings)


def test_review_command_exits_1_on_a_failing_package(package, tmp_path, capsys):
    pkg = tmp_path / ORG
    shutil.copytree(package, pkg)
    _delete_run_stop(pkg)
    parser = argparse.ArgumentParser(prog="trainperf")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["review", str(tmp_path)])  # the folder holding the package is accepted too
    assert args.func(args) == 1
    out = capsys.readouterr().out
    assert f"FAIL {BENCHMARK}" in out and "result_1.txt" in out and out.rstrip().endswith("1 of 1 benchmark(s) fail")


@pytest.mark.parametrize("link", ["absolute", "dotdot"])
def test_links_out_of_the_package_are_refused(package, tmp_path, link):
    pkg = tmp_path / "pkg" / ORG
    shutil.copytree(package, pkg)
    secret = tmp_path / "secret.txt"
    secret.write_text("not part of the package\n")
    victim = _results(pkg) / "result_4.txt"
    victim.unlink()
    target = str(secret) if link == "absolute" else os.path.relpath(secret, victim.parent)
    victim.symlink_to(target)
    with pytest.raises(ResultsError, match=rf"refused: results/.*/{BENCHMARK}/result_4\.txt") as err:
        review(pkg)
    assert ("absolute path" if link == "absolute" else "'..' components") in str(err.value)
