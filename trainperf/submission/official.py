"""The official MLCommons submission tools, run in subprocesses, and their verdicts read back as data.

``package_checker``, ``rcp_checker`` and ``result_summarizer`` (mlperf-logging 4.1.68) run as
``python -m mlperf_logging.<tool>`` with their working folder in a temporary directory: they write log
files and ``summary.json`` into the working folder, and the package checker and the summarizer write
``scaling.json`` into result folders of closed-division packages. So they are only ever run on a private
copy of a package (see :mod:`trainperf.submission.review`), after :mod:`trainperf.rules.gate` has kept out
every file whose values would lead them to other files, and each runs confined where the machine allows
it (:mod:`trainperf.confine`: no network; with bubblewrap, only its own folders writable). trainperf never
evaluates their output; it reads log lines and a CSV. A review runs a package's tools in one confined process
(:mod:`trainperf.submission.tool_plan`): while its plan is registered, the functions here take their results from it.

Quirks of 4.1.68 that this module works around:

- ``package_checker FOLDER training 2.0.0`` takes the organization folder (the one holding ``systems/``
  and ``results/``), exits 0 even when it finds errors, and says so only in its last verdict line
  (``PACKAGE CHECKER FOUND ERRORS`` / ``FOUND NO ERRORS``); its seed and RCP checks run only for
  ``closed`` systems, and it accepts one non-compliant result file per benchmark "under olympic scoring".
- ``rcp_checker DIR`` defaults to ruleset 6.0.0 (so ``--rcp_version`` must be given); it exits 1 on a
  failed check; with ``--custom_rcps`` it matches records by batch size alone, whatever their
  ``Benchmark``; it crashes (``KeyError: None``) when the logs lack or disagree on
  ``submission_benchmark``.
- ``result_summarizer FOLDER training 2.0.0`` prints no table: it writes ``summary.json`` into its
  working folder, and without ``--csv`` the detailed table overwrites the plain one; with ``--csv`` the
  plain table is in that CSV at full precision (its JSON rounds to 10 digits). Rows name the system by
  ``system_name`` from the JSON; the row's ``details_url`` ends in the folder name.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainperf.confine import confinement, output_so_far, run_confined
from trainperf.spec import MLPERF_RULESET

USAGE = "training"
TOOL_TIMEOUT_S = 900
_RECORD = re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL) - ?(.*)$")
_TRACEBACK = "Traceback (most recent call last)"


@dataclass(frozen=True, kw_only=True)
class ToolRun:
    """One run of an official tool: its command line, exit code (None: timed out) and output."""

    tool: str
    rc: int | None
    out: str
    err: str
    log: str = ""  # its --log_output file, where it has one
    confinement: str = ""  # "confined: ..." or "not confined: <why>"

    @property
    def raw(self) -> str:
        return "\n".join(part for part in (self.out, self.err) if part)

    @property
    def crashed(self) -> bool:
        """It timed out, or stopped on an error (a traceback and a non-zero exit). A traceback it printed and went
        on from, exiting 0, is not a crash: 4.x's result_summarizer prints one for every benchmark whose v2.0 RCP
        data it lacks ("RCP/GBS computation failed for ...") and still writes every score."""
        has_traceback = _TRACEBACK in self.err or _TRACEBACK in self.out
        return self.rc is None or (has_traceback and self.rc != 0)

    def failure(self) -> str:
        """Why the tool did not finish, in a sentence (its last error line for a crash)."""
        if self.rc is None:
            return f"the official {self.tool} did not finish within {TOOL_TIMEOUT_S} s"
        lines = [ln for ln in self.err.strip().splitlines() if ln.strip()]
        last = lines[-1].strip() if lines else f"exit code {self.rc}"
        return f"the official {self.tool} stopped with an error ({last})"


def _run(tool: str, args: list[str], *, workdir: Path, writes: Path, log_output: bool = True) -> ToolRun:
    """Run ``tool`` in ``workdir``, confined; it may write there and under ``writes`` (the folder it checks)."""
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / f"{tool}.log"
    cmd = [sys.executable, "-m", f"mlperf_logging.{tool}", *args]
    if log_output:
        cmd += ["--log_output", str(log)]
    env = {"PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
    confined = confinement(writable=[workdir, writes])
    try:
        proc = run_confined(confined, cmd, cwd=workdir, timeout_s=TOOL_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired as exc:
        out, err = output_so_far(exc)
        return ToolRun(tool=tool, rc=None, out=out, err=err, confinement=confined.note)
    text = log.read_text(encoding="utf-8", errors="replace") if log_output and log.exists() else ""
    return ToolRun(tool=tool, rc=proc.returncode, out=proc.stdout, err=proc.stderr, log=text, confinement=confined.note)


def _records(text: str) -> list[tuple[str, str]]:
    """``(level, message)`` of a Python-logging text with the format ``LEVEL - message``."""
    records: list[tuple[str, str]] = []
    for line in text.splitlines():
        m = _RECORD.match(line)
        if m:
            records.append((m[1], m[2].strip()))
        elif records:  # a continuation line of a multi-line message
            level, msg = records[-1]
            records[-1] = (level, f"{msg}\n{line}")
    return records


# --- package_checker ------------------------------------------------------------------------------
@dataclass(kw_only=True)
class PackageCheck:
    ran: ToolRun
    finished: bool  # printed its final verdict line
    found_errors: bool
    general: list[str] = field(default_factory=list)  # errors outside any benchmark (system descriptions)
    errors: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # (system, benchmark) -> errors
    warnings: dict[tuple[str, str], list[str]] = field(default_factory=dict)


# Warnings of the package checker worth passing on; the per-file compliance messages are not (trainperf's
# own compliance step explains each file's failures in plain words).
_PACKAGE_WARNINGS = ("does not comply", "do not comply", "Unknown files", "do not conform", "Skipping benchmark")


def run_package_checker(org_dir: Path, workdir: Path, ruleset: str = MLPERF_RULESET) -> PackageCheck:
    """``python -m mlperf_logging.package_checker ORG_DIR training RULESET``, its log split per benchmark."""
    ran = _planned(org_dir, "package_checker")
    if ran is None:
        ran = _run("package_checker", [str(org_dir), USAGE, ruleset], workdir=workdir, writes=org_dir)
    return _read_package_check(ran, org_dir)


def _read_package_check(ran: ToolRun, org_dir: Path) -> PackageCheck:
    text = ran.log or ran.err
    check = PackageCheck(
        ran=ran,
        finished="PACKAGE CHECKER FOUND" in text,
        found_errors="PACKAGE CHECKER FOUND NO ERRORS" not in text,
    )
    prefix = str(org_dir) + "/"
    section: tuple[str, str] | None = None
    for level, msg in _records(text):
        msg = msg.replace(prefix, "")  # name paths inside the package, not inside our copy
        if m := re.match(r"Running compliance checks in dir (?:results/)?([^/]+)/([^/\s]+)$", msg):
            section = (m[1], m[2])
            continue
        if level in ("ERROR", "CRITICAL"):
            if section is None:
                check.general.append(msg)
            else:
                check.errors.setdefault(section, []).append(msg)
        elif level == "WARNING" and section is not None and any(w in msg for w in _PACKAGE_WARNINGS):
            check.warnings.setdefault(section, []).append(msg)
    return check


# --- rcp_checker ----------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class RcpCheck:
    ran: ToolRun
    passed: bool
    message: str  # the checker's own words: "RCP found", "Missing RCP, please submit RCP with BS = 96", ...
    submission_epochs: float | None = None  # olympic mean of the runs' epochs to converge
    rcp_mean: float | None = None
    min_epochs: float | None = None  # the fastest convergence the RCP accepts
    rcp_runs: int | None = None


def _number_after(label: str, text: str) -> float | None:
    m = re.search(rf"'{label}': (?:np\.float64\()?([-+\d.eE]+|nan|inf)", text)
    return float(m[1]) if m else None


def run_rcp_checker(
    benchmark_dir: Path,
    workdir: Path,
    *,
    custom_rcps: Path | None = None,
    samples_flag: str = "",
    ruleset: str = MLPERF_RULESET,
) -> RcpCheck:
    """``python -m mlperf_logging.rcp_checker DIR --rcp_version RULESET [--custom_rcps FILE] [SAMPLES_FLAG]``
    (the last, a benchmark's ``rcp_train_samples_flag``: its samples to converge read from ``train_samples``
    rather than ``epoch_num``)."""
    args = [str(benchmark_dir), "--rcp_usage", USAGE, "--rcp_version", ruleset, "--rcp_pass", "pruned_rcps"]
    if custom_rcps is not None:
        args += ["--custom_rcps", str(custom_rcps)]
    if samples_flag:
        args.append(samples_flag)
    ran = _run("rcp_checker", args, workdir=workdir, writes=benchmark_dir)
    return _read_rcp(ran)


def _read_rcp(ran: ToolRun) -> RcpCheck:
    """The verdict of one rcp_checker run, read from its log."""
    text = ran.log or ran.err
    verdict = re.search(r"^(?:INFO|ERROR) - (.*), RCP test (PASSED|FAILED)", text, re.MULTILINE)
    if ran.crashed or verdict is None:
        return RcpCheck(ran=ran, passed=False, message=ran.failure())
    record = re.search(r"RCP Record: (\{.*\})", text)
    mean = re.search(r"Submission mean epochs: ([-+\d.eE]+|nan)", text)
    runs = None
    if record and (listed := re.search(r"'Epochs to converge': \[([^\]]*)\]", record[1])):
        runs = len([x for x in listed[1].split(",") if x.strip()])
    return RcpCheck(
        ran=ran,
        passed=verdict[2] == "PASSED",
        message=verdict[1].strip(),
        submission_epochs=float(mean[1]) if mean else None,
        rcp_mean=_number_after("RCP Mean", record[1]) if record else None,
        min_epochs=_number_after("Min Epochs", record[1]) if record else None,
        rcp_runs=runs,
    )


_BATCH_RCP = Path(__file__).with_name("_batch_rcp.py")


@dataclass(frozen=True)
class RcpJob:
    """One folder for :func:`run_rcp_checkers`: what :func:`run_rcp_checker` is given."""

    benchmark_dir: Path
    workdir: Path
    custom_rcps: Path | None = None
    samples_flag: str = ""


def run_rcp_checkers(jobs: list[RcpJob], workdir: Path, writes: Path, ruleset: str = MLPERF_RULESET) -> list[RcpCheck]:
    """:func:`run_rcp_checker` of every job, in order, in one confined process (:mod:`._batch_rcp`: the checker's
    ``check_directory`` and ``main``'s verdict line, as the tool runs them) rather than one per folder; a job the
    batch does not report on (its time limit, or a crash of the batch) is run alone. ``writes``: a folder holding
    every job's folder."""
    if not jobs:
        return []
    from_plan = _planned(writes, "rcp", _rcp_specs(jobs, ruleset))
    if from_plan is not None:
        return [
            _read_rcp(ran) if ran is not None else _rcp_alone(job, ruleset)
            for ran, job in zip(from_plan, jobs, strict=True)
        ]
    workdir.mkdir(parents=True, exist_ok=True)
    spec = workdir / "rcp_jobs.json"
    results = workdir / "rcp_results.jsonl"
    specs = _rcp_specs(jobs, ruleset)
    spec.write_text(json.dumps(specs), encoding="utf-8")
    env = {"PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
    confined = confinement(writable=[workdir, writes])
    cmd = [sys.executable, str(_BATCH_RCP), "--out", str(results), str(spec)]
    try:
        run_confined(confined, cmd, cwd=workdir, timeout_s=TOOL_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        pass  # the folders it finished are in results; the others are run alone
    reported: list[RcpCheck] = []
    if results.is_file():
        for line in results.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
                ran = ToolRun(
                    tool="rcp_checker",
                    rc=int(rec["rc"]),
                    out=str(rec["out"]),
                    err=str(rec["err"]),
                    log=str(rec["log"]),
                    confinement=confined.note,
                )
            except (ValueError, KeyError, TypeError):
                break  # a line cut by the time limit: the rest is run alone
            reported.append(_read_rcp(ran))
    return reported + [_rcp_alone(job, ruleset) for job in jobs[len(reported) :]]


def _rcp_alone(job: RcpJob, ruleset: str) -> RcpCheck:
    return run_rcp_checker(
        job.benchmark_dir, job.workdir, custom_rcps=job.custom_rcps, samples_flag=job.samples_flag, ruleset=ruleset
    )


def _rcp_specs(jobs: list[RcpJob], ruleset: str) -> list[dict[str, Any]]:
    return [
        {
            "dir": str(job.benchmark_dir),
            "version": ruleset,
            "custom_rcps": str(job.custom_rcps) if job.custom_rcps is not None else None,
            "train_samples": bool(job.samples_flag),  # the benchmark's rcp_train_samples_flag given
            "log": str(job.workdir / "rcp_checker.log"),
        }
        for job in jobs
    ]


# --- result_summarizer ----------------------------------------------------------------------------
@dataclass(kw_only=True)
class Summary:
    ran: ToolRun
    scores: dict[tuple[str, str], float | None]  # (system folder, benchmark) -> minutes; None: no score
    notices: list[str]  # what it printed about dropped runs and wrong tables, paths inside the package
    energy: dict[tuple[str, str], float] = field(default_factory=dict)  # (system folder, benchmark) -> joules


def run_result_summarizer(
    org_dir: Path, workdir: Path, benchmarks: list[str], ruleset: str = MLPERF_RULESET
) -> Summary:
    """``python -m mlperf_logging.result_summarizer ORG_DIR training RULESET --csv FILE``, its scores read back."""
    table = workdir / "summary.csv"
    ran = _planned(org_dir, "result_summarizer")
    if ran is not None:
        ran, table = ran
    else:
        for written in org_dir.glob("results/*/*/scaling.json"):  # the package checker's, in the private copy
            written.unlink()
        ran = _run(
            "result_summarizer",
            [str(org_dir), USAGE, ruleset, "--csv", str(table)],
            workdir=workdir,
            writes=org_dir,
            log_output=False,
        )
    scores: dict[tuple[str, str], float | None] = {}
    if table.exists():
        with table.open(newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                system = (row.get("details_url") or "").rsplit("/", 1)[-1].removesuffix(".json")
                for bench in benchmarks:
                    value = (row.get(bench) or "").strip()
                    try:
                        scores[(system, bench)] = float(value) if value else None
                    except ValueError:
                        scores[(system, bench)] = None
    prefix = str(org_dir) + "/"
    energy = _energy_scores(table.with_name(table.stem + "_detailed.csv"), benchmarks)
    notices = [
        line.replace(prefix, "").strip()
        for line in ran.out.splitlines()
        if line.startswith(("NOTICE", "CRITICAL ERROR", "** CRITICAL ERROR", "ERROR", "WARNING"))
        or re.search(r" in \S*results/", line)
    ]
    return Summary(ran=ran, scores=scores, notices=notices, energy=energy)


def _energy_scores(detailed: Path, benchmarks: list[str]) -> dict[tuple[str, str], float]:
    """The summarizer's energy scores (its detailed table's ``<benchmark>:Energy``, joules), where it gave one."""
    energy: dict[tuple[str, str], float] = {}
    if not detailed.exists():
        return energy
    with detailed.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            system = (row.get("details_url") or "").rsplit("/", 1)[-1].removesuffix(".json")
            for bench in benchmarks:
                try:
                    value = float((row.get(f"{bench}:Energy") or "").strip())
                except ValueError:
                    continue
                if math.isfinite(value):
                    energy[(system, bench)] = value
    return energy


# The plans registered for packages under review (trainperf.submission.tool_plan runs a package's tools in one
# process and registers itself here; this module does not import it)
_PLANS: dict[Path, Any] = {}
_PLANS_LOCK = threading.Lock()


@contextlib.contextmanager
def planned(plan: Any) -> Iterator[Any]:
    """Register ``plan`` (a :class:`trainperf.submission.tool_plan.ToolPlan`: its ``org_dir`` and ``result(name,
    spec)``) for its package's tool runs while in the block: the functions here then take their results from it."""
    key = plan.org_dir.resolve()
    with _PLANS_LOCK:
        _PLANS[key] = plan
    try:
        yield plan
    finally:
        with _PLANS_LOCK:
            _PLANS.pop(key, None)


def result_for(org_dir: Path, name: str, spec: Any = None) -> Any:
    """The result of the registered plan of ``org_dir`` for the tool ``name`` (the plan run on the first request),
    or None when no plan is registered for it or the plan's process did not report on it."""
    with _PLANS_LOCK:
        plan = _PLANS.get(Path(org_dir).resolve())
    return plan.result(name, spec) if plan is not None else None


def _planned(org_dir: Path, name: str, spec: Any = None) -> Any:
    """The result of a tool run that a registered plan made for the package at ``org_dir`` (all of them in one
    process), or None: run it alone."""
    return result_for(org_dir, name, spec)
