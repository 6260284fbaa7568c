"""Step (d) of a package review (:mod:`trainperf.submission.review`): the official rcp_checker planned, run and read
for every benchmark, against the official (reference) or trainperf's (mini) RCPs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainperf import registry
from trainperf.registry import BENCHMARKS as _BENCHMARK_NAMES
from trainperf.rules import rulesets
from trainperf.spec import MLPERF_RULESET
from trainperf.submission import official
from trainperf.submission.bench_checks import (
    _PC_RCP_FAILED,
    _Bench,
    _first,
    _round_gap,
    _runs_required,
)
from trainperf.submission.layout import Layout
from trainperf.submission.package import mini_rcp_path


@dataclass(kw_only=True)
class _RcpRuns:
    custom: Path | None  # trainperf's mini RCP table, or None: the official v2.0 RCPs
    provisional: bool
    note: str
    first: official.RcpCheck
    samples: official.RcpCheck | None = None  # again, counting train_samples (the benchmark's rcp_train_samples_flag)
    in_samples: bool = False  # unet3d's epochs read as samples (:func:`_epochs_counted`)


def _plan_rcp(bench: _Bench, copy: Path, work: Path) -> tuple[_RcpRuns, official.RcpJob, str] | str:
    """(d), planned: the RCP checker's run for ``bench`` (its :class:`_RcpRuns` to fill, the job, the benchmark's
    train-samples flag), or why it is not run (a str: ``bench.rcp``'s text)."""
    need, _ = _runs_required(bench)
    known = bench.benchmark in _BENCHMARK_NAMES
    if known and not registry.benchmark(bench.benchmark).mlperf_rcps:
        return f"not applicable (MLPerf has no RCPs for {bench.benchmark})"
    if len(bench.runs) != need or any(
        not r.records
        or _first(r.records, "submission_benchmark") != bench.benchmark
        or _first(r.records, "global_batch_size") is None
        for r in bench.runs
    ):
        return f"not checked: it needs the {need} runs, each logging submission_benchmark and global_batch_size"
    custom, provisional, note = None, False, f"the official {rulesets.round_name(bench.ruleset)} RCPs"
    if bench.scale == "mini":
        custom = mini_rcp_path(bench.benchmark)
        if not custom.is_file():
            bench.warnings.append(f"RCP not checked: trainperf has no mini RCPs for {bench.benchmark} yet")
            return f"not checked: trainperf has no mini RCPs for {bench.benchmark} yet"
        table = json.loads(custom.read_text(encoding="utf-8"))  # trainperf's own file, not the package's
        provisional = any(rec.get("Provisional") for rec in table.values())
        runs = max(len(rec.get("Epochs to converge", [])) for rec in table.values())
        note = f"trainperf's mini RCPs ({'provisional, ' if provisional else ''}{runs} reference runs)"
    folder = copy / "results" / bench.system / bench.benchmark
    where = work / f"rcp_{bench.system}_{bench.benchmark}"
    per_epoch = _epochs_counted(bench) if custom is None else None
    if per_epoch is not None:
        folder = _in_samples(folder, work / f"rcp_samples_{bench.system}_{bench.benchmark}", per_epoch)
        note += f", epochs read as samples ({per_epoch} an epoch, the rules' samples_per_epoch)"

    flag = registry.benchmark(bench.benchmark).rcp_train_samples_flag if known else ""
    job = official.RcpJob(folder, where, custom_rcps=custom)
    runs = _RcpRuns(custom=custom, provisional=provisional, note=note, first=None, in_samples=per_epoch is not None)  # type: ignore[arg-type]
    return runs, job, flag


def _run_rcps(
    plans: dict[tuple[str, str], Any], copy: Path, work: Path, ruleset: str = MLPERF_RULESET
) -> dict[tuple[str, str], Any]:
    """(d), run: every planned RCP check in one rcp_checker process (:func:`official.run_rcp_checkers`), then,
    in a second, each failed bert check again counting train_samples. By benchmark: its :class:`_RcpRuns`, or
    why it was not run."""
    jobs = {k: plan for k, plan in plans.items() if not isinstance(plan, str)}
    firsts = official.run_rcp_checkers([job for _, job, _ in jobs.values()], work / "rcp_checker", copy, ruleset)
    for (runs, _, _), first in zip(jobs.values(), firsts, strict=True):
        runs.first = first
    # bert counts samples to converge; a log may give them in train_samples rather than epoch_num, which the
    # round's tools read with --rcp_bert_train_samples (Baidu's v2.0 bert passes the v2.0 package checker so)
    again = {
        k: official.RcpJob(job.benchmark_dir, Path(f"{job.workdir}_samples"), samples_flag=flag)
        for k, (runs, job, flag) in jobs.items()
        if flag and not runs.first.passed and not runs.first.ran.crashed and runs.custom is None
    }
    seconds = official.run_rcp_checkers(list(again.values()), work / "rcp_checker_samples", copy, ruleset)
    for k, second in zip(again, seconds, strict=True):
        jobs[k][0].samples = second
    return {k: plan if isinstance(plan, str) else plan[0] for k, plan in plans.items()}


def _check_rcp(bench: _Bench, layout: Layout, raw: dict[str, str], notes: list[str], started: Any) -> None:
    """(d) the official rcp_checker against the official (reference) or trainperf's (mini) RCPs: the findings of
    the run(s) :func:`_start_rcp` started."""
    if isinstance(started, str):
        bench.rcp = started
        return
    runs: _RcpRuns = started
    rcp, note, provisional = runs.first, runs.note, runs.provisional
    if bench.scale == "mini":
        division = _first(bench.runs[0].records, "trainperf_division") or "open"
    else:
        division = layout.divisions.get(bench.system, "open")
    raw[f"rcp_checker {bench.system}/{bench.benchmark}"] = rcp.ran.log or rcp.ran.raw
    notes.append(rcp.ran.confinement)
    if runs.samples is not None:
        again = runs.samples
        flag = registry.benchmark(bench.benchmark).rcp_train_samples_flag
        raw[f"rcp_checker {flag} {bench.system}/{bench.benchmark}"] = again.ran.log or again.ran.raw
        if again.passed:
            rcp, note = again, f"{note}, {bench.benchmark}'s samples read from train_samples ({flag})"
            moved = [p for p in bench.problems if p.startswith(_PC_RCP_FAILED)]
            bench.problems = [p for p in bench.problems if p not in moved]
            bench.warnings += [
                f"{p} (counting epoch_num; with the rcp_checker's {flag} the RCP check passes, see RCP)" for p in moved
            ]
    if rcp.ran.crashed:
        bench.rcp = f"could not be checked: {rcp.message}"
        gap = _round_gap(rcp.ran, {(bench.system, bench.benchmark): bench}, bench.ruleset)
        (bench.warnings if gap else bench.problems).append(f"RCP check {bench.rcp}{gap}")
        return
    detail = ""
    if rcp.submission_epochs is not None and rcp.min_epochs is not None:
        detail = (
            f": the runs' mean epochs to converge (olympic) is {rcp.submission_epochs:.3f}; the RCP's mean is "
            f"{rcp.rcp_mean:.3f} and the fastest it accepts is {rcp.min_epochs:.3f}"
        )
    if rcp.passed:
        bench.rcp = f"passed ({rcp.message}, {note}){detail}"
        if runs.in_samples:  # the package checker read the epochs as samples
            moved = [p for p in bench.problems if p.startswith(_PC_RCP_FAILED)]
            bench.problems = [p for p in bench.problems if p not in moved]
            bench.warnings += [
                f"{p} (it reads the logged epochs as samples; in samples the RCP check passes)" for p in moved
            ]
        return
    bench.rcp = f"failed ({rcp.message}, {note}){detail}"
    advice = (
        "; a recipe that converges faster than the reference runs needs its own RCPs (MLPerf: submit RCPs for "
        "this batch size), or use the reference hyperparameters"
    )
    if provisional or division != "closed":
        why = "the RCP is provisional" if provisional else f"RCPs bind closed-division runs only (this is {division})"
        bench.warnings.append(f"RCP check {bench.rcp}{advice} (a warning, not a failure: {why})")
    elif (bypass := _bypass_recorded(rcp, layout.scaling.get((bench.system, bench.benchmark)))) is not None:
        moved = [p for p in bench.problems if p.startswith(_PC_RCP_FAILED)]
        bench.problems = [p for p in bench.problems if p not in moved]
        bench.warnings += [f"{p} ({bypass})" for p in moved] + [f"RCP check {bench.rcp}: {bypass}"]
    else:
        bench.problems.append(f"RCP check {bench.rcp}{advice}")


# The rcp_checker's outcomes its --rcp_bypass lets through for the review committee (rcp_checker.py check_directory)
_BYPASSABLE = ("RCP found", "RCP Interpolation", "Missing RCP")


def _bypass_recorded(rcp: official.RcpCheck, factor: float | None) -> str | None:
    """Why a failed RCP check is the review committee's bypass the package records (None: it is not): the
    rcp_checker lets the failure through with --rcp_bypass, and the package's scaling.json normalizes the score by at
    least the RCP's mean over the runs' mean epochs to converge, the factor the rcp_checker gives a run faster than the
    RCP mean. Published v3.1 packages (Dell, GigaComputing, Lenovo, NVIDIA, QCT, Supermicro: 11 pairs) hold
    exactly that factor; a failure without it (Graphcore's v1.1 and v2.0 bert) stays an error."""
    if factor is None or not rcp.message.startswith(_BYPASSABLE) or not rcp.submission_epochs or not rcp.rcp_mean:
        return None
    norm = rcp.rcp_mean / rcp.submission_epochs
    # The checker prints the runs' mean to 4 places, and the committee writes its factor to 6: Dell's v3.1
    # XE8640x4H100 unet3d holds 1.182625 for 380,846.667 / 322,035 = 1.18262508 (half a unit of the sixth place)
    if factor < rcp.rcp_mean / (rcp.submission_epochs + 5e-5) - 5e-7:
        return None
    return (
        f"accepted as the review committee's RCP bypass (rcp_checker --rcp_bypass), which the package records: its "
        f"scaling.json factor {factor} normalizes the score by the RCP's mean over the runs' ({norm:.6g}); the "
        "published score is the scaled one"
    )


# unet3d counts its progress in samples from v3.1 on, and so do its RCPs (mlcommons/logging 7966690, 2023-09-27, tag
# 3.1.0-rc3; rc2's table counted epochs). Published v3.1 logs of QCT (D74H-7U) and xFusion (L40, A30) still count
# epochs, which the committee read at the rules' samples_per_epoch, CEILING(168 / global_batch_size) *
# global_batch_size (KiTS19's 168 training cases): their scaling.json factors are the RCP's mean over the samples so
# counted (380,846.667 / (2,016.25 * 168) = 1.124337, QCT's).


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value


def _epochs_counted(bench: _Bench) -> int | None:
    """The rules' samples_per_epoch where every run of a benchmark whose logs may count the rules' evaluation schedule
    in epochs (:attr:`trainperf.spec.Benchmark.rcp_epochs_as_samples`: unet3d of v3.1 on) does (the first at
    CEILING(1000 * 168 / samples_per_epoch), then every CEILING(20 * 168 / samples_per_epoch): 1000, 1020, ... at
    batch 56), else None (samples, as the rules ask: 168000, 171360, ...)."""
    if bench.benchmark not in registry.available():
        return None
    fact = registry.benchmark(bench.benchmark).rcp_epochs_as_samples
    if fact is None or rulesets.version(bench.ruleset) < rulesets.version(fact.since):
        return None
    batches = {json.dumps(_first(r.records, "global_batch_size")) for r in bench.runs}
    batch = _first(bench.runs[0].records, "global_batch_size") if len(batches) == 1 else None
    if not _number(batch) or batch != int(batch) or batch < 1:
        return None
    per_epoch = -(-fact.dataset // int(batch)) * int(batch)
    first, every = -(-fact.first * fact.dataset // per_epoch), -(-fact.every * fact.dataset // per_epoch)
    for run in bench.runs:
        evals = [
            r["metadata"].get("epoch_num")
            for r in run.records
            if r.get("key") == "eval_accuracy" and isinstance(r.get("metadata"), dict)
        ]
        if not evals or not all(_number(e) for e in evals) or evals[0] != first:
            return None
        if any(b - a != every for a, b in zip(evals, evals[1:], strict=False)):
            return None
    return per_epoch


def _in_samples(folder: Path, dest: Path, per_epoch: int) -> Path:
    """``dest``: copies of ``folder``'s result files (the private copy's, through the gate) for the rcp_checker, each
    eval_accuracy's epoch_num times ``per_epoch``; every other line as it is."""
    dest.mkdir(parents=True, exist_ok=True)
    for path in sorted(folder.glob("result_*.txt")):
        lines = path.read_text(encoding="latin-1").splitlines(keepends=True)
        for i, line in enumerate(lines):
            if _TOKEN not in line or "eval_accuracy" not in line:
                continue
            try:
                rec = json.loads(line[line.rindex(_TOKEN) + len(_TOKEN) :])
            except ValueError:
                continue
            meta = rec.get("metadata") if isinstance(rec, dict) else None
            if rec.get("key") == "eval_accuracy" and isinstance(meta, dict) and _number(meta.get("epoch_num")):
                meta["epoch_num"] *= per_epoch
                lines[i] = _TOKEN + json.dumps(rec) + "\n"
        (dest / path.name).write_text("".join(lines), encoding="latin-1")
    return dest


_TOKEN = ":::MLLOG "
