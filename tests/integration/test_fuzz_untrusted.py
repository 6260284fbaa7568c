"""Fuzzing untrusted input (Hypothesis): mutated MLLOG logs and system descriptions fed to the parser, `check`,
`review` and `report`'s reader. Never a traceback (only TrainperfError subclasses or verdicts), never code executed
(a planted rule file's marker never appears, and every file an official tool is given holds no value that the
tools turn into a path), never a negative or non-finite score, never a raw control character printed.

The official tools take a second or more to start, so the 1,000 examples run against trainperf's own code with
the tools replaced by stand-ins that check what they were given (the oracle, :mod:`fuzzing`, reads files as the
tools do; trainperf's reader must read each line the gate lets through as the oracle does, a run's minutes
must be the exact difference of its logged milliseconds, and no run in a report has an evaluation that no metric
takes); a few dozen examples then go end to end through the
real tools and the command line. The profile (tests/conftest.py) is derandomized and database-free, so CI sees the
same examples every time.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import mock

import cli_capture
import fuzzing
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from untrusted import ORG, PATH_KEYS, SYSTEM, log_lines, plant, rules_dir, run_lines, system_description

from trainperf import system as system_mod
from trainperf.confine import Confinement
from trainperf.errors import TrainperfError
from trainperf.report.collect import collect
from trainperf.results import mllog_lines, parse_run, read_mllog_lines
from trainperf.rules import compliance, gate
from trainperf.run_checks import impossible_quality
from trainperf.submission import official
from trainperf.submission import review as review_mod
from trainperf.system import check_system_file

pytest.importorskip("mlperf_logging")

IN_PROCESS_EXAMPLES = int(os.environ.get("TRAINPERF_FUZZ_EXAMPLES", "1000"))
END_TO_END_CHECKS = int(os.environ.get("TRAINPERF_FUZZ_CHECKS", "25"))
END_TO_END_REVIEWS = 2
COMMAND_LINE_CHECKS = 3
SYSTEM_CHECKS = 8
CLEAN_LOG = ("\n".join(log_lines()) + "\n").encode()
CLEAN_SYSTEM = json.dumps(system_description(), indent=2).encode()
NOT_RUN = "not confined: a stand-in for the official tool (fuzz test)"


# Rule files planted inside a package's folder, as an attacker would: a logged value of `../` segments from the
# official rule folder reaches them (the same value for the three keys; see tests/untrusted.py).
PLANT_ROOT = Path(tempfile.gettempdir()) / f"trainperf-fuzz-{os.getpid()}"
PACKAGE = PLANT_ROOT / "pkg" / ORG
PLANTED_DIR = PACKAGE / "benchmarks" / "planted"
PLANTED = os.path.relpath(PLANTED_DIR / "evil", rules_dir())
MARKERS = [PLANTED_DIR / f"EXECUTED_{key}" for key in PATH_KEYS]
LOGS = fuzzing.mllog_files(extra_values=[PLANTED])
SYSTEMS = fuzzing.system_files(extra_values=[PLANTED])


@pytest.fixture(scope="module", autouse=True)
def planted():
    for key in PATH_KEYS:
        assert plant(PLANTED_DIR, key)[0] == PLANTED
    yield
    shutil.rmtree(PLANT_ROOT, ignore_errors=True)


def no_code_ran() -> None:
    assert not [m.name for m in MARKERS if m.exists()]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """Where the examples' files go; temporary folders (review's private copies too) on a tmpfs where there is one:
    creating and removing folders on the CI machine's disk costs milliseconds each, thousands of times."""
    shm = Path("/dev/shm")
    fast = shm.is_dir() and os.access(shm, os.W_OK)
    with mock.patch.object(tempfile, "tempdir", str(shm) if fast else tempfile.gettempdir()):
        folder = Path(tempfile.mkdtemp(prefix="trainperf-fuzz-"))
        yield folder
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def trees(workdir):
    """(a trainperf output folder, a package's <org> folder), each with four clean runs (result_1-4); each example
    writes its log as result_0.txt and its system description as systems/box.json."""
    out, org = workdir / "out", workdir / "pkg" / ORG
    for top in (out, org):
        for i in range(1, 5):
            fuzzing.write(top / "results" / SYSTEM / "resnet" / f"result_{i}.txt", _clean_run(i))
    return out, org


@pytest.fixture(scope="module", autouse=True)
def plain_terminal():
    """Output as a user's pipe gets it: rich adds no colours of its own, so any escape would come from the input."""
    saved = {k: os.environ.pop(k) for k in ("FORCE_COLOR", "TTY_COMPATIBLE", "CLICOLOR_FORCE") if k in os.environ}
    os.environ["COLUMNS"] = os.environ.get("COLUMNS", "200")
    yield
    os.environ.update(saved)


# --- what every example must show -----------------------------------------------------------------------
def assert_clean_text(text: str) -> None:
    """Printable as the terminal gets it: no raw control character, and encodable as strict UTF-8."""
    assert not fuzzing.control_characters(text), repr(text[:500])
    text.encode("utf-8")  # a lone surrogate would raise here, as it would on a UTF-8 terminal


def run_cli(argv: list[str]) -> tuple[int, str]:
    """``trainperf <argv>`` in this process: an exit code of the CLI's, and output a terminal can show as it is."""
    rc, text = cli_capture.run_cli(argv)
    assert rc in (0, 1, 2), (rc, text[-2000:])
    assert_clean_text(text)
    return rc, text


def assert_score(minutes: float | None) -> None:
    assert minutes is None or (math.isfinite(minutes) and minutes >= 0), minutes


def assert_safe_for_the_tools(folder: Path) -> None:
    """What an official tool is about to read leads it nowhere: no link, no path value (the oracle, not the gate)."""
    for p in folder.rglob("*"):
        assert not p.is_symlink(), p
        if p.is_file() and p.name.startswith("result_"):
            assert not fuzzing.path_values_reaching_the_tools(p.read_bytes()), p
        elif p.is_file() and p.suffix == ".json" and p.parent.name == "systems":
            assert not fuzzing.system_path_values(p.read_bytes()), p


@contextlib.contextmanager
def official_tools_replaced(calls: list[str]):
    """The official tools replaced by stand-ins that check what they are given and report a plain pass."""

    def checker(data: bytes, name: str, config: Path | None, ruleset: str = "2.0.0"):
        assert not fuzzing.path_values_reaching_the_tools(data)
        calls.append("compliance_checker")
        return 0, "", "", Confinement((), NOT_RUN)

    def batch(
        items: list, config: Path | None, ruleset: str = "2.0.0"
    ) -> list:  # review checks a benchmark's files in one process
        return [checker(item.data, item.path.name, config) for item in items]

    def package_checker(org_dir: Path, workdir: Path, ruleset: str = "2.0.0") -> official.PackageCheck:
        assert_safe_for_the_tools(org_dir)
        calls.append("package_checker")
        ran = official.ToolRun(
            tool="package_checker", rc=0, out="", err="", log="INFO - PACKAGE CHECKER FOUND NO ERRORS"
        )
        return official.PackageCheck(ran=ran, finished=True, found_errors=False)

    def rcp_checker(
        benchmark_dir: Path, workdir: Path, *, custom_rcps: Path | None = None, ruleset: str = "2.0.0"
    ) -> official.RcpCheck:
        assert_safe_for_the_tools(benchmark_dir)
        calls.append("rcp_checker")
        return official.RcpCheck(
            ran=official.ToolRun(tool="rcp_checker", rc=0, out="", err=""), passed=True, message="RCP found"
        )

    def rcp_checkers(jobs: list, workdir: Path, writes: Path, ruleset: str = "2.0.0") -> list[official.RcpCheck]:
        return [rcp_checker(job.benchmark_dir, job.workdir, custom_rcps=job.custom_rcps) for job in jobs]

    def summarizer(org_dir: Path, workdir: Path, benchmarks: list[str], ruleset: str = "2.0.0") -> official.Summary:
        assert_safe_for_the_tools(org_dir)
        calls.append("result_summarizer")
        return official.Summary(
            ran=official.ToolRun(tool="result_summarizer", rc=0, out="", err=""), scores={}, notices=[]
        )

    def system_desc_checker(path: Path, contents: dict, where: str) -> list[str]:
        calls.append("system_desc_checker")
        return []

    with (
        mock.patch.object(system_mod, "_official_problems", system_desc_checker),
        mock.patch.object(compliance, "_run_checker", checker),
        mock.patch.object(compliance, "_run_batch", batch),
        mock.patch.object(official, "run_package_checker", package_checker),
        mock.patch.object(official, "run_rcp_checker", rcp_checker),
        mock.patch.object(official, "run_rcp_checkers", rcp_checkers),
        mock.patch.object(official, "run_result_summarizer", summarizer),
    ):
        yield


@contextlib.contextmanager
def reviews_kept(into: list):
    """``review`` as the CLI calls it, each Review kept for the test to look at."""
    real = review_mod.review

    def keep(package_dir: Path, **options):
        into.append(real(package_dir, **options))
        return into[-1]

    with mock.patch.object(review_mod, "review", keep):
        yield


def _clean_run(i: int) -> bytes:
    """Run ``i`` of a package, distinct from the others (a package of copies is refused whatever the example)."""
    return ("\n".join(run_lines(i)) + "\n").encode()


# --- 1,000 examples through trainperf's own code ----------------------------------------------------------
@settings(max_examples=IN_PROCESS_EXAMPLES, suppress_health_check=[HealthCheck.data_too_large, HealthCheck.too_slow])
@given(log=LOGS, system=SYSTEMS)
def test_fuzzed_logs_and_system_descriptions_in_process(log, system, trees):
    out, org = trees
    for top in (out, org):
        fuzzing.write(top / "results" / SYSTEM / "resnet" / "result_0.txt", log)
        fuzzing.write(top / "systems" / f"{SYSTEM}.json", system)
    path = out / "results" / SYSTEM / "resnet" / "result_0.txt"

    # the parser: a LoggedRun with a possible duration, exact to the millisecond, or a ResultsError naming the line
    with contextlib.suppress(TrainperfError):
        read_mllog_lines(path)
    try:
        run = parse_run(path)
    except TrainperfError as e:
        assert_clean_text(gate.printable(str(e)))
    else:
        assert_score(run.minutes)
        if run.minutes is not None:
            assert run.minutes == fuzzing.exact_minutes(log)

    # the gate: what it lets through holds no value the tools turn into a path, and trainperf reads each of its
    # lines as the tools do (the oracle)
    if not gate.screen_log(log):
        assert not fuzzing.path_values_reaching_the_tools(log)
        assert [(ln.text, ln.record is not None) for ln in mllog_lines(log)] == [
            (payload, isinstance(record, dict)) for payload, record in fuzzing.tools_view(log)
        ]
    try:
        desc = json.loads(system.decode("utf-8"))
    except (ValueError, RecursionError):
        desc = None
    if isinstance(desc, dict) and not gate.screen_system(desc):
        assert not fuzzing.system_path_values(system)

    calls: list[str] = []
    reviews: list = []
    with official_tools_replaced(calls), reviews_kept(reviews):
        run_cli(["check", str(path)])  # `trainperf check`: the compliance path
        rc, _ = run_cli(["review", str(org)])  # `trainperf review`: the package path
        for problem in check_system_file(out / "systems" / f"{SYSTEM}.json"):  # trainperf's own checks of it
            assert_clean_text(gate.printable(problem))
    if rc != 2:
        (result,) = reviews
        for verdict in result.verdicts:
            assert_score(verdict.score.minutes if verdict.score else None)

    # `trainperf report`'s reader: scores from parsed runs, and the system description's counts
    try:
        systems = collect([out])
    except TrainperfError as e:
        assert_clean_text(gate.printable(str(e)))
    else:
        for s in systems:
            assert s.nodes >= 1 and s.accelerators >= 0
            for bench in s.benchmarks:
                assert_score(bench.score.minutes)
                for r in bench.runs:
                    assert_score(r.minutes)
                    assert not [v for v in r.evaluations if impossible_quality(v, higher_is_better=True) is not None]
    no_code_ran()


# --- end to end through the official tools ----------------------------------------------------------------
def crafted(key: str) -> bytes:
    """A clean log whose ``key`` points at the planted rule file."""
    return ("\n".join(log_lines({**PATH_KEYS[key][1], key: PLANTED})) + "\n").encode()


MILD_LOGS = fuzzing.mllog_files(extra_values=[PLANTED], max_mutations=2)  # most of them reach the checker


@settings(max_examples=END_TO_END_CHECKS, suppress_health_check=[HealthCheck.data_too_large, HealthCheck.too_slow])
@example(log=CLEAN_LOG)  # the checker runs and passes it
@example(log=crafted("submission_division"))
@example(log=crafted("submission_benchmark"))
@example(log=crafted("opt_name"))
@given(log=MILD_LOGS)
def test_fuzzed_logs_through_the_official_checker(log, workdir):
    path = fuzzing.write(Path(tempfile.mkdtemp(dir=workdir)) / "result_0.txt", log)
    rc, text = run_cli(["check", str(path)])
    no_code_ran()
    event("the official checker ran" if "official checker: " in text else "refused before the official checker")
    assert text.startswith("PASS") == (rc == 0), text
    if log == CLEAN_LOG:
        assert rc == 0, text


@settings(max_examples=COMMAND_LINE_CHECKS, suppress_health_check=[HealthCheck.data_too_large, HealthCheck.too_slow])
@example(log=crafted("submission_division"))
@given(log=MILD_LOGS)
def test_the_check_command_on_fuzzed_logs(log, workdir):
    path = fuzzing.write(Path(tempfile.mkdtemp(dir=workdir)) / "result_0.txt", log)
    r = subprocess.run([sys.executable, "-m", "trainperf", "check", str(path)], capture_output=True, timeout=300)
    text = (r.stdout + r.stderr).decode("utf-8")
    assert r.returncode in (0, 1, 2) and "Traceback" not in text, text[-3000:]
    assert_clean_text(text)
    no_code_ran()


@settings(max_examples=END_TO_END_REVIEWS, suppress_health_check=[HealthCheck.data_too_large, HealthCheck.too_slow])
@example(log=crafted("submission_division"), system=CLEAN_SYSTEM)
@given(log=MILD_LOGS, system=SYSTEMS)
def test_fuzzed_packages_through_the_official_tools(log, system):
    """`trainperf review` with the real package_checker, rcp_checker and result_summarizer, on a package holding the
    planted rule files (its benchmarks/ folder) and a fuzzed result file and system description."""
    for part in ("results", "systems"):
        shutil.rmtree(PACKAGE / part, ignore_errors=True)
    fuzzing.write(PACKAGE / "systems" / f"{SYSTEM}.json", system)
    for i in range(5):
        fuzzing.write(PACKAGE / "results" / SYSTEM / "resnet" / f"result_{i}.txt", log if i == 0 else _clean_run(i))
    reviews: list = []
    with reviews_kept(reviews):
        rc, text = run_cli(["review", str(PACKAGE)])
    no_code_ran()
    assert rc in (0, 1), text
    for verdict in reviews[0].verdicts:
        assert_score(verdict.score.minutes if verdict.score else None)
        assert_score(verdict.summarizer_minutes)


@settings(max_examples=SYSTEM_CHECKS, suppress_health_check=[HealthCheck.data_too_large, HealthCheck.too_slow])
@example(system=CLEAN_SYSTEM)
@given(system=SYSTEMS)
def test_fuzzed_system_descriptions_through_the_official_checker(system, workdir):
    path = fuzzing.write(Path(tempfile.mkdtemp(dir=workdir)) / "box.json", system)
    problems = check_system_file(path)
    for p in problems:
        assert_clean_text(gate.printable(p))
