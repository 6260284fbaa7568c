"""Review a submission package: the official MLCommons tools plus trainperf's own checks, one verdict per benchmark.

In this order: (a) the official ``package_checker``; (b) the compliance checker on every result file
(:func:`trainperf.rules.compliance.check_log`: mini logs against trainperf's mini rules); (c) seeds
distinct across a benchmark's runs, the runs themselves distinct (:mod:`trainperf.distinct`: one run copied under
several result files is refused, whatever its seeds say), and each log's org, system and values consistent with the
package;
(d) the official ``rcp_checker`` (the official v2.0 RCPs at the reference scale, trainperf's own table
``trainperf/rules/rcps/mini/rcps_<benchmark>.json`` at the mini scale); (e) the official
``result_summarizer``, whose score is shown beside trainperf's olympic score; where the package has power logs, the
energy score beside it, trainperf's and the summarizer's (:mod:`trainperf.submission.power`).

A package is untrusted. Nothing in it is executed or evaluated by trainperf; the official tools (which
write into the folders they check and into their working folder) run on a private copy with their
working folder in a temporary directory, so nothing is written inside the package under review. The
copy (:func:`trainperf.submission.layout.copy_package`) holds only the system descriptions, result files and
power logs, under size caps, read without following any link (a link refuses the package), and only those
that pass :mod:`trainperf.rules.gate`: mlperf-logging's v2.0 rule files turn logged values into paths of
YAML files whose code they execute, so a file with such a value is kept out of the copy and its verdict
says why. The tools run confined where the machine allows it (:mod:`trainperf.confine`), and the review
says how, all four of a package's in one process (:mod:`trainperf.submission.tool_plan`), which makes the work they
repeat once; trainperf's own work that waits for none of their findings (the power logs the copy leaves out whatever
they hold, the compliance steps up to the checker's output) is made while they run. The official package checker
tolerates one non-compliant file per benchmark (four for unet3d); so does this review, for files that fail the
official rules alone and runs logged as stopped without reaching the target, together as many as olympic scoring
drops, scored as failed runs; a file that breaks the timeline rule fails the benchmark. Findings of checks the
installed tools make but the package's round's tools did not are warnings naming the later rule
(:mod:`trainperf.submission.round_rules`).
"""

from __future__ import annotations

import math
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainperf import distinct
from trainperf.rules import rulesets
from trainperf.submission import official, power, round_rules
from trainperf.submission.bench_checks import (  # noqa: F401 - names the tests and callers import from here
    _Bench,
    _check_compliance,
    _check_count,
    _check_many,
    _check_seeds_and_consistency,
    _crash,
    _lacks_round_data,
    _package_checker_errors,
    _prepare_many,
    _read_run,
    _refused_run,
    _round_compliance,
    _round_gap,
    _Run,
    _runs_required,
    compliance_groups,
)
from trainperf.submission.layout import Layout, copy_package, find_org_dir
from trainperf.submission.official import planned
from trainperf.submission.rcp_review import _check_rcp, _plan_rcp, _RcpRuns, _run_rcps  # noqa: F401
from trainperf.submission.tool_plan import ToolPlan
from trainperf.submission.verdicts import Review, Verdict, _verdict, finding_kind, minutes_text, review_json  # noqa: F401


@dataclass(kw_only=True)
class _Findings:
    """What the steps find about the package as a whole, and the tools' output."""

    problems: list[str]
    raw: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # how each tool ran (confinement)
    later: list[str] = field(default_factory=list)  # package-level findings of later rounds' rules: warnings


def review(
    package_dir: Path,
    *,
    jobs: int = 1,
    progress: Callable[[int, int], None] | None = None,
    ruleset: str | None = None,
) -> Review:
    """Review the package at ``package_dir`` (its ``<org>`` folder, or a folder holding exactly one).

    ``ruleset`` (``1.1.0``, ``v1.1``) is the MLPerf Training round whose rules and official tools judge it; by
    default the package's own (:func:`trainperf.rules.rulesets.package_ruleset`: v2.0 for trainperf's packages).

    The official tools run in one process (:mod:`trainperf.submission.tool_plan`); at most ``jobs`` tool processes run
    at once where more are needed (a tool run alone after that process stopped, bert's RCP check again counting
    train_samples); the findings come in the same order whatever ``jobs`` is. ``progress(done, total)``: as tools end.
    """
    org_dir = find_org_dir(Path(package_dir))
    with tempfile.TemporaryDirectory(prefix="trainperf-review-") as tmp, ThreadPoolExecutor(max(1, jobs)) as pool:
        copy, work = Path(tmp) / "package" / org_dir.name, Path(tmp) / "work"
        layout = copy_package(org_dir, copy, defer_power=True)  # its power logs the tools never read: below
        benches, read_problems = _read_package(layout)
        found = _Findings(problems=list(layout.problems), later=_same_files_under_two_systems(benches))
        chosen, source = _choose_ruleset(org_dir, benches, ruleset, read_problems, found)
        checkable = any(k[0] not in layout.unusable_systems and layout.benchmarks[k] for k in benches)
        rcp_plans = {k: _plan_rcp(b, copy, work) for k, b in benches.items() if k[0] not in layout.unusable_systems}
        tasks = _Tasks(pool, progress)
        plan = ToolPlan(
            org_dir=copy,
            workdir=work / "tools",
            ruleset=chosen,
            package_checker=checkable,
            summarizer=checkable,
            compliance=compliance_groups(benches, chosen),
            rcp=[job for p in rcp_plans.values() if not isinstance(p, str) for _, job, _ in [p]],
            progress=tasks.step,
        )
        with planned(plan):
            pc = (
                tasks.submit(official.run_package_checker, copy, work / "package_checker", chosen)
                if checkable
                else None
            )
            names, summarized_in = sorted({k[1] for k in benches}), work / "result_summarizer"
            summary_run = (
                tasks.submit(official.run_result_summarizer, copy, summarized_in, names, chosen) if checkable else None
            )
            rcps = tasks.submit(_run_rcps, rcp_plans, copy, work, chosen)
            prepared = _while_tools_run(layout, benches, chosen)  # trainperf's own work, while the tools run
            if pc is not None:
                _take_package_checker(pc.result(), benches, found, chosen, layout)  # (a)
            rcp_results = rcps.result()
            checks = _check_many(benches, chosen, plan if plan.results is not None else None, prepared)  # (b)
        for key, bench in benches.items():
            bench.problems += read_problems[key]
            _check_count(bench)
            _check_compliance(bench, checks[key])  # (b)
            _check_seeds_and_consistency(bench, org_dir.name, layout.divisions.get(key[0]), chosen)  # (c)
            bench.warnings += round_rules.resubmitted(_run_dates(bench), chosen)
            _check_power(bench, layout.power_logs.get(key), chosen, layout.power_withheld.get(key))
            if key[0] in layout.unusable_systems:
                bench.rcp = "not checked, nor are the official package checker and summarizer run on this system"
            else:
                _check_rcp(bench, layout, found.raw, found.notes, rcp_results[key])  # (d)
            _unused_bypass(bench)
        summarized = summary_run.result() if summary_run is not None else None
        summary = _take_summary(summarized, benches, found, chosen) if summarized is not None else None  # (e)
        verdicts = [_verdict(bench, summary, layout.scaling.get(k)) for k, bench in benches.items()]
        tasks.finish()
    return Review(
        package=org_dir,
        org=org_dir.name,
        verdicts=verdicts,
        problems=found.problems,
        warnings=found.later,
        raw=found.raw,
        confinement="; ".join(dict.fromkeys(n for n in found.notes if n)),
        ruleset=chosen,
        ruleset_source=source,
    )


_BYPASS_FILE = "package_checker_params bypasses the official seed or RCP checks"
_BYPASSED = ("seeds", "package_checker seeds", "RCP", "package_checker RCP")


def _unused_bypass(bench: _Bench) -> None:
    """A ``package_checker_params`` file is left out of the copy, so the official tools check the benchmark without its
    bypass: where no seed or RCP check then fails, the file changed nothing, and it is a warning (GigaComputing's
    published v4.1 G593-ZD1 stable_diffusion holds 'rcp-bypass' and passes the RCP check); else an error beside the
    failure it would have bypassed."""
    held = [p for p in bench.problems if _BYPASS_FILE in p]
    if not held or any(finding_kind(p) in _BYPASSED for p in bench.problems):
        return
    bench.problems = [p for p in bench.problems if p not in held]
    bench.warnings += [f"{p}: the seed and RCP checks pass without it, so it bypasses nothing here" for p in held]


def _check_distinct(bench: _Bench) -> None:
    """(c) runs are distinct runs (:mod:`trainperf.distinct`): one run copied within the result set is an error, runs
    overlapping in time on the system a warning."""
    runs = [(r.name, r.logged.lines) for r in bench.runs if r.logged is not None]
    bench.problems += distinct.same_run_problems(runs)
    bench.warnings += distinct.overlapping_runs(bench.system, runs)


def _same_files_under_two_systems(benches: dict[tuple[str, str], _Bench]) -> list[str]:
    """Warnings of the package (:mod:`trainperf.distinct`): result files with the same bytes under two systems."""
    return distinct.identical_across_systems({k: [r.path for r in b.runs if r.records] for k, b in benches.items()})


def _while_tools_run(layout: Layout, benches: dict[tuple[str, str], _Bench], chosen: str) -> Any:
    """trainperf's own work that needs no official tool's finding, made while they run (on the other core): the power
    logs the copy leaves out whatever they hold, and (b) up to the official checker's output (:func:`_prepare_many`)."""
    _finish_power(layout, benches)
    return _prepare_many(benches, chosen)


def _finish_power(layout: Layout, benches: dict[tuple[str, str], _Bench]) -> None:
    """The power logs that the copy leaves out whatever they hold, read (:meth:`Layout.finish_power`), each
    benchmark's warnings about them where the copy would have put them: after its other warnings of the layout."""
    before = {key: len(layout.warnings_of.get(key, [])) for key in benches}
    layout.finish_power()
    for key, bench in benches.items():
        at = len(layout.system_warnings.get(key[0], [])) + before[key]
        bench.warnings[at:at] = layout.warnings_of.get(key, [])[before[key] :]


def _read_package(layout: Layout) -> tuple[dict[tuple[str, str], _Bench], dict[tuple[str, str], list[str]]]:
    """Every benchmark of the private copy with its runs read (the gate's refused files among them), and the
    problems found reading them (reported after the package checker's)."""
    benches = {key: _Bench(system=key[0], benchmark=key[1]) for key in layout.benchmarks}
    read_problems: dict[tuple[str, str], list[str]] = {}
    for key, bench in benches.items():
        bench.problems += layout.system_problems.get(key[0], []) + layout.problems_of.get(key, [])
        bench.warnings += layout.system_warnings.get(key[0], []) + layout.warnings_of.get(key, [])
        before = len(bench.problems)
        bench.runs = [_read_run(layout.folder(key) / name, bench, layout) for name in layout.benchmarks[key]]
        bench.runs += [
            _refused_run(layout.folder(key) / name, bench, why) for name, why in layout.refused.get(key, {}).items()
        ]
        bench.runs.sort(key=lambda r: r.name)
        scales = {r.logged.scale for r in bench.runs if r.logged and r.records}
        bench.scale = scales.pop() if len(scales) == 1 else bench.scale
        if len(scales) > 1:
            bench.problems.append(f"the result files mix scales ({', '.join(sorted(scales))}); keep one scale")
        _check_distinct(bench)  # (c)
        read_problems[key], bench.problems[before:] = bench.problems[before:], []
    return benches, read_problems


def _choose_ruleset(
    org_dir: Path,
    benches: dict[tuple[str, str], _Bench],
    given: str | None,
    read_problems: dict[tuple[str, str], list[str]],
    found: _Findings,
) -> tuple[str, str]:
    """The package's round, which every official tool is given: (ruleset, where it comes from); each benchmark
    gets it, and one that is not a benchmark of that round a problem."""
    chosen, source, inferred = _package_ruleset(org_dir, benches, given)
    if inferred:
        found.later.append(f"reviewed by the MLPerf Training {rulesets.round_name(chosen)} rules ({chosen}): {source}")
    for key, bench in benches.items():
        bench.ruleset = chosen
        if key[1] not in rulesets.benchmarks(chosen):
            read_problems[key].append(
                f"{key[1]} is not a benchmark of MLPerf Training {rulesets.round_name(chosen)} "
                f"({', '.join(rulesets.benchmarks(chosen))}; ruleset {chosen}: {source})"
            )
    return chosen, source


def _take_package_checker(
    pc: official.PackageCheck, benches: dict[tuple[str, str], _Bench], found: _Findings, chosen: str, layout: Layout
) -> None:
    """(a) the official package checker's findings, each where it belongs; a system description's failure that only
    a later round's rule makes is a warning (:mod:`trainperf.submission.round_rules`)."""
    found.raw["package_checker"] = pc.ran.log or pc.ran.raw
    found.notes.append(pc.ran.confinement)
    if pc.ran.crashed or not pc.finished:
        (found.later if _lacks_round_data(pc.ran, benches, chosen) else found.problems).append(_crash(pc.ran, chosen))
    names = {s: str(d.get("system_name", s)) for s, d in layout.descriptions.items()}
    failed = later = 0
    for msg in pc.general:  # system descriptions: "System description checker failed for <system_name> : ..."
        if msg == round_rules.SUMMARY_FAILED:
            continue
        system = round_rules.system_owner(msg, names)
        failed += system is not None
        why = round_rules.later_status(msg, layout.descriptions.get(system or ""), chosen)
        later += why is not None
        text = f"package_checker: {msg}" + (f" ({why})" if why else "")
        owners = [b for (s, _), b in benches.items() if s == system]
        for b in owners:
            (b.warnings if why else b.problems).append(text)
        if not owners:
            (found.later if why else found.problems).append(text)
    if round_rules.SUMMARY_FAILED in pc.general:
        summary = f"package_checker: {round_rules.SUMMARY_FAILED}"
        (found.later if failed and later == failed else found.problems).append(summary)
    for key, msgs in pc.errors.items():
        target = benches.get(key)
        errors, later = _package_checker_errors(msgs, chosen)
        (target.problems if target else found.problems).extend(f"package_checker: {m}" for m in errors)
        (target.warnings if target else found.later).extend(f"package_checker: {m}" for m in later)
    for key, msgs in pc.warnings.items():
        if key in benches:
            benches[key].warnings.extend(f"package_checker: {m}" for m in msgs)


def _take_summary(
    summary: official.Summary, benches: dict[tuple[str, str], _Bench], found: _Findings, chosen: str
) -> official.Summary:
    """(e) the official result summarizer: its output kept, a crash reported."""
    found.raw["result_summarizer"] = summary.ran.raw
    found.notes.append(summary.ran.confinement)
    if summary.ran.crashed:
        gap = _lacks_round_data(summary.ran, benches, chosen)
        (found.later if gap else found.problems).append(_crash(summary.ran, chosen))
    return summary


def _check_power(
    bench: _Bench, logs: dict[str, power.RunPower] | None, chosen: str, withheld: list[str] | None = None
) -> None:
    """The power rules on each run's logs (warnings naming the file and the rule) and the energy score as the
    official summarizer of the package's round computes it (:mod:`trainperf.submission.power`), over the runs the
    time score keeps. ``withheld``: why the installed tools cannot read the logs, kept out of their copy; the energy
    score is then given only where the round's own summarizer read them (v4.0's: its formula and no numbering rule);
    where the installed summarizer reads them, its formula (the review's energy is compared with its score)."""
    if logs is None:
        return
    # the round's own formula where the installed summarizer cannot read the logs; where it can, its energy stands
    # (the same as v4.0's on logs in time order without a reading before the start)
    formula = power.formula_of(chosen) if withheld else power.INSTALLED
    where = f"results/{bench.system}/{bench.benchmark}/{power.FOLDER}"
    bench.warnings += withheld or []
    unread = [
        f"{where}/{run}/{why}" for run, p in logs.items() for n in p.nodes if (why := power.unreadable(n, formula))
    ]
    if unread or (withheld and formula == power.INSTALLED):
        bench.warnings += [w for w in unread if w not in (withheld or [])]
        bench.warnings.append(
            f"{where} is left out of the check: no energy score (the official summarizer cannot read it)"
        )
        return
    if withheld:
        bench.power_withheld = True
        bench.warnings.append(
            f"{where} is kept from the installed result_summarizer, which cannot read it; the energy score is the one "
            f"{rulesets.round_name(chosen)}'s summarizer computed (lines in file order, the measurement stopping at "
            "its last reading: mlcommons/logging 4054425, in tag 4.0.0-rc3-rcp-prunning), which MLCommons published"
        )
    bench.has_power = True
    if rulesets.version(chosen) < rulesets.version(power.FIRST_ROUND):
        bench.warnings.append(
            f"power logs in a {rulesets.round_name(chosen)} package: power submissions came with "
            f"{rulesets.round_name(power.FIRST_ROUND)}; the energy score is shown as the summarizer computes it"
        )
    runs: list[tuple[float, float | None]] = []
    for r in bench.runs:
        start, stop = power.first_ms(r.records, "run_start"), power.first_ms(r.records, "run_stop")
        logs_of = logs.get(r.name.removesuffix(".txt"))
        counted = r.compliant and r.logged is not None and r.logged.success and r.logged.minutes is not None
        joules = None
        if logs_of is not None:
            bench.warnings += power.rule_findings(logs_of, r.name.removesuffix(".txt"), start, stop, formula)
            if logs_of.logs and start is not None and stop is not None:
                joules = power.run_joules(logs_of, stop - start, formula)
        runs.append((r.logged.minutes if counted and r.logged and r.logged.minutes is not None else math.inf, joules))
    _, dropped = _runs_required(bench)
    bench.energy_joules = power.olympic_joules(runs, dropped)


def _run_dates(bench: _Bench) -> list[tuple[str, Any]]:
    """(file name, run_start date) of each run of ``bench`` that logs a run_start."""
    return [(r.name, rulesets.log_date(r.logged.start_ms)) for r in bench.runs if r.logged and r.logged.start_ms]


def _package_ruleset(org_dir: Path, benches: dict[tuple[str, str], _Bench], given: str | None) -> tuple[str, str, bool]:
    """(ruleset, where it comes from, whether it is inferred) of the package:
    :func:`trainperf.rules.rulesets.package_ruleset` on its logs (their latest run_start, whether trainperf wrote
    them) and the benchmarks it holds."""
    records = [r.records for b in benches.values() for r in b.runs if r.records]
    dates = [
        d
        for recs in records
        for rec in recs
        if rec.get("key") == "run_start" and (d := rulesets.log_date(rec.get("time_ms"))) is not None
    ]
    chosen, source, inferred = rulesets.package_ruleset(
        given=given,
        path=org_dir,
        trainperf_logs=any(rulesets.is_trainperf_log(recs) for recs in records),
        latest=max(dates) if dates else None,
        held={k[1] for k in benches},
    )
    return chosen, source, inferred


class _Tasks:
    """The review's tool runs on a thread pool (each waits on a confined subprocess), counted for progress with the
    tasks of the package's one tool process (:meth:`step`)."""

    def __init__(self, pool: ThreadPoolExecutor, progress: Callable[[int, int], None] | None) -> None:
        self.pool, self.progress = pool, progress
        self.total = self.done = 0
        self.steps = self.steps_total = 0
        self._lock = threading.Lock()

    def step(self, done: int, total: int) -> None:
        """The package's tool process finished ``done`` of its ``total`` tasks: the progress from then on."""
        with self._lock:
            self.steps, self.steps_total = done, total
        self._report()

    def finish(self) -> None:
        with self._lock:
            left = self.steps < self.steps_total
            self.steps = self.steps_total
        if left:
            self._report()

    def _report(self) -> None:
        with self._lock:
            done, total = (self.steps, self.steps_total) if self.steps_total else (self.done, self.total)
        if self.progress is not None and total:
            self.progress(done, total)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        with self._lock:
            self.total += 1
        future = self.pool.submit(fn, *args)
        future.add_done_callback(self._finished)
        return future

    def _finished(self, _: Future) -> None:
        with self._lock:
            self.done += 1
            counted = not self.steps_total  # counted by the package's tool process's tasks where it ran
        if counted:
            self._report()
