"""Review a submission package: the official MLCommons tools plus trainperf's own checks, one verdict per benchmark.

In this order: (a) the official ``package_checker``; (b) the compliance checker on every result file
(:func:`trainperf.rules.compliance.check_log`: mini logs against trainperf's mini rules); (c) seeds
distinct across a benchmark's runs, and each log's org, system and values consistent with the package;
(d) the official ``rcp_checker`` (the official v2.0 RCPs at the reference scale, trainperf's own table
``trainperf/rules/rcps/mini/rcps_<benchmark>.json`` at the mini scale); (e) the official
``result_summarizer``, whose score is shown beside trainperf's olympic score.

A package is untrusted. Nothing in it is executed or evaluated by trainperf; the official tools (which
write into the folders they check and into their working folder) run on a private copy with their
working folder in a temporary directory, so nothing is written inside the package under review. The
copy (:func:`trainperf.submission.layout.copy_package`) holds only the system descriptions and result
files, under size caps, read without following any link (a link refuses the package), and only those
that pass :mod:`trainperf.rules.gate`: mlperf-logging's v2.0 rule files turn logged values into paths of
YAML files whose code they execute, so a file with such a value is kept out of the copy and its verdict
says why. The tools run confined where the machine allows it (:mod:`trainperf.confine`), and the review
says how. The official package checker tolerates one non-compliant file per benchmark; this
review tolerates only runs that are logged as stopped without reaching the target (``aborted``), as
many as olympic scoring drops, and fails any other non-compliant file.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
import threading
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlperf_logging.benchmark_meta import get_result_file_counts

from trainperf import registry
from trainperf.errors import NotAvailableError, TrainperfError, UsageError
from trainperf.registry import BENCHMARKS as _BENCHMARK_NAMES
from trainperf.results import LoggedRun, parse_run
from trainperf.rules import gate, rulesets
from trainperf.rules.compliance import TARGET_PROBLEM, check_logs
from trainperf.run_checks import impossible_quality
from trainperf.scoring import Score, score_results
from trainperf.spec import MLPERF_RULESET
from trainperf.submission import official
from trainperf.submission.layout import Layout, copy_package, find_org_dir
from trainperf.submission.package import mini_rcp_path

_STATUS_PROBLEM = "the run stopped with status"  # compliance's words for a run that did not succeed
# a log that ends before the run does: the checker's count and compliance's status sentence
_NO_RUN_STOP = ("the log must contain exactly one 'run_stop' line but has 0", "the run has no run_stop line")
_REASONS_SHOWN = 5  # reasons listed for a refused file before "and N more"


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """The review of one benchmark of one system: passed when it has no problems."""

    system: str
    benchmark: str
    scale: str
    runs: int
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    rcp: str = "not checked"
    score: Score | None = None  # trainperf's olympic score
    summarizer_minutes: float | None = None  # the official result_summarizer's score
    scaling: float | None = None  # the review committee's factor (scaling.json); None: none

    @property
    def scaled_minutes(self) -> float | None:
        """trainperf's score as MLCommons publishes it: the raw olympic score times scaling.json's factor."""
        if self.score is None or self.score.minutes is None:
            return None
        return self.score.minutes * (self.scaling or 1.0)

    @property
    def passed(self) -> bool:
        return not self.problems


@dataclass(frozen=True, kw_only=True)
class Review:
    package: Path
    org: str
    verdicts: list[Verdict]
    problems: list[str] = field(default_factory=list)  # about the package as a whole
    warnings: list[str] = field(default_factory=list)  # about the package as a whole
    raw: dict[str, str] = field(default_factory=dict)  # each official tool's output
    confinement: str = ""  # how the official tools ran: "confined: ..." or "not confined: <why>"; "" if none ran
    ruleset: str = MLPERF_RULESET  # the MLPerf Training ruleset the package was reviewed by (its round's)
    ruleset_source: str = ""  # where that ruleset comes from, in words

    @property
    def passed(self) -> bool:
        return bool(self.verdicts) and not self.problems and all(v.passed for v in self.verdicts)


@dataclass(kw_only=True)
class _Run:
    name: str
    path: Path  # in the private copy (absent for a file refused by the gate)
    records: list[dict[str, Any]]
    logged: LoggedRun | None
    compliant: bool = False


@dataclass(kw_only=True)
class _Bench:
    system: str
    benchmark: str
    scale: str = "reference"
    runs: list[_Run] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    rcp: str = "not checked"
    ruleset: str = MLPERF_RULESET


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

    ``jobs`` official-tool processes run at once (four, each for the whole package: the package checker, the
    summarizer, the compliance checks of every result file, the RCP checks of every benchmark); the findings are
    gathered in the same order whatever ``jobs`` is. ``progress(done, total)`` is called as the tools finish.
    """
    org_dir = find_org_dir(Path(package_dir))
    org = org_dir.name
    with tempfile.TemporaryDirectory(prefix="trainperf-review-") as tmp, ThreadPoolExecutor(max(1, jobs)) as pool:
        copy = Path(tmp) / "package" / org
        layout = copy_package(org_dir, copy)
        work = Path(tmp) / "work"
        benches = {key: _Bench(system=key[0], benchmark=key[1]) for key in layout.benchmarks}
        for key, bench in benches.items():
            bench.problems += layout.system_problems.get(key[0], []) + layout.problems_of.get(key, [])
            bench.warnings += layout.system_warnings.get(key[0], []) + layout.warnings_of.get(key, [])
        problems = list(layout.problems)
        raw: dict[str, str] = {}
        notes: list[str] = []
        notes_later: list[str] = []  # package-level findings of later rounds' rules: warnings
        checkable = [k for k in benches if k[0] not in layout.unusable_systems and layout.benchmarks[k]]
        tasks = _Tasks(pool, progress)

        read_problems: dict[tuple[str, str], list[str]] = {}  # reported after the package checker's, as read
        for key, bench in benches.items():
            before = len(bench.problems)
            files = layout.benchmarks[key]
            bench.runs = [_read_run(layout.folder(key) / name, bench, layout) for name in files]
            bench.runs += [
                _refused_run(layout.folder(key) / name, bench, why) for name, why in layout.refused.get(key, {}).items()
            ]
            bench.runs.sort(key=lambda r: r.name)
            scales = {r.logged.scale for r in bench.runs if r.logged and r.records}
            bench.scale = scales.pop() if len(scales) == 1 else bench.scale
            if len(scales) > 1:
                bench.problems.append(f"the result files mix scales ({', '.join(sorted(scales))}); keep one scale")
            read_problems[key], bench.problems[before:] = bench.problems[before:], []

        # the package's round: every official tool is given its ruleset
        chosen, source, inferred = _package_ruleset(org_dir, benches, ruleset)
        if inferred:
            notes_later.append(
                f"reviewed by the MLPerf Training {rulesets.round_name(chosen)} rules ({chosen}): {source}"
            )
        for key, bench in benches.items():
            bench.ruleset = chosen
            if key[1] not in rulesets.benchmarks(chosen):
                read_problems[key].append(
                    f"{key[1]} is not a benchmark of MLPerf Training {rulesets.round_name(chosen)} "
                    f"({', '.join(rulesets.benchmarks(chosen))}; ruleset {chosen}: {source})"
                )

        # every tool run is started first; its findings are taken in order below
        pc = tasks.submit(official.run_package_checker, copy, work / "package_checker", chosen) if checkable else None
        summary_run = (
            tasks.submit(
                official.run_result_summarizer,
                copy,
                work / "result_summarizer",
                sorted({k[1] for k in benches}),
                chosen,
            )
            if checkable
            else None
        )
        checks = tasks.submit(_check_many, benches, chosen)  # every benchmark's files in one checker process
        plans = {k: _plan_rcp(b, copy, work) for k, b in benches.items() if k[0] not in layout.unusable_systems}
        rcps = tasks.submit(_run_rcps, plans, copy, work, chosen)  # every RCP check in one process

        # (a) the official package checker
        if pc is not None:
            pc = pc.result()
            raw["package_checker"] = pc.ran.log or pc.ran.raw
            notes.append(pc.ran.confinement)
            if pc.ran.crashed or not pc.finished:
                (notes_later if _lacks_round_data(pc.ran, benches, chosen) else problems).append(_crash(pc.ran, chosen))
            for msg in pc.general:  # system descriptions: "System description checker failed for <name> : ..."
                owners = [b for (s, _), b in benches.items() if f"failed for {s} " in msg + " "]
                for b in owners:
                    b.problems.append(f"package_checker: {msg}")
                problems += [] if owners else [f"package_checker: {msg}"]
            for key, msgs in pc.errors.items():
                target = benches.get(key)
                errors, later = _package_checker_errors(msgs, chosen)
                (target.problems if target else problems).extend(f"package_checker: {m}" for m in errors)
                (target.warnings if target else notes_later).extend(f"package_checker: {m}" for m in later)
            for key, msgs in pc.warnings.items():
                if key in benches:
                    benches[key].warnings.extend(f"package_checker: {m}" for m in msgs)

        for key, bench in benches.items():
            bench.problems += read_problems[key]
            _check_count(bench)
            _check_compliance(bench, checks.result()[key])  # (b)
            _check_seeds_and_consistency(bench, org, layout.divisions.get(key[0]), chosen)  # (c)
            if key[0] in layout.unusable_systems:
                bench.rcp = "not checked, nor are the official package checker and summarizer run on this system"
            else:
                _check_rcp(bench, layout, raw, notes, rcps.result()[key])  # (d)

        # (e) the official result summarizer
        summary = None
        if summary_run is not None:
            summary = summary_run.result()
            raw["result_summarizer"] = summary.ran.raw
            notes.append(summary.ran.confinement)
            if summary.ran.crashed:
                gap = _lacks_round_data(summary.ran, benches, chosen)
                (notes_later if gap else problems).append(_crash(summary.ran, chosen))
        verdicts = [_verdict(bench, summary, layout.scaling.get(k)) for k, bench in benches.items()]
    return Review(
        package=org_dir,
        org=org,
        verdicts=verdicts,
        problems=problems,
        warnings=notes_later,
        raw=raw,
        confinement="; ".join(dict.fromkeys(n for n in notes if n)),
        ruleset=chosen,
        ruleset_source=source,
    )


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
    """The review's tool runs on a thread pool (each waits on its own confined subprocess), counted for progress."""

    def __init__(self, pool: ThreadPoolExecutor, progress: Callable[[int, int], None] | None) -> None:
        self.pool, self.progress = pool, progress
        self.total = self.done = 0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        with self._lock:
            self.total += 1
        future = self.pool.submit(fn, *args)
        future.add_done_callback(self._finished)
        return future

    def _finished(self, _: Future) -> None:
        with self._lock:
            self.done += 1
            done, total = self.done, self.total
        if self.progress is not None:
            self.progress(done, total)


# --- the steps ----------------------------------------------------------------------------------------
_PC_RCP_FAILED = "package_checker: RCP Test Failed"
_LACKS = (
    " (the installed mlperf-logging has no data for this benchmark in this round: a gap of the tool, not a rule "
    "the package breaks; trainperf's own checks stand)"
)
_BATCH_SIZES_DIFFER = "Batch sizes in files do not match."
_LATER_BATCH_CHECK = (
    " (the installed mlperf-logging compares global_batch_size across a benchmark's result files and stops where "
    "they differ; the {round} round's rcp_checker read the batch size without comparing the files (mlcommons/logging "
    "@ 065e4ce, rcp_checker.py get_submission_epochs; the comparison came with 74c310b, for v3.0): a check of later "
    "rounds, and its crash a gap of the tool; trainperf's own checks stand)"
)


def _round_gap(ran: official.ToolRun, benches: dict[tuple[str, str], Any], ruleset: str = MLPERF_RULESET) -> str:
    """Why an official tool's crash is a gap of the installed tool rather than a rule of the package's round (the
    text added to the finding), or "" when it is not known to be one:

    - ``KeyError: '<benchmark>'`` for a benchmark of the package: mlperf-logging 4.1.68 has no v2.0 dlrm entry in
      its run counts, and its package checker, rcp checker and summarizer stop there;
    - ``KeyError: None`` after "Batch sizes in files do not match.": 4.x's rcp_checker returns no benchmark name
      for runs of different batch sizes (published v2.0 results hold such runs: Dell's 32-node maskrcnn) and then
      looks that name up; a gap only for a ruleset before v3.0, whose tools did not compare the files.
    """
    if ran.rc is None:
        return ""
    last = (ran.err.strip().splitlines() or [""])[-1].strip()
    if any(last == f"KeyError: {b!r}" for _, b in benches):
        return _LACKS
    if (
        last == "KeyError: None"
        and rulesets.later_check(ruleset, "batch sizes compared")
        and any(_BATCH_SIZES_DIFFER in text for text in (ran.err, ran.out, ran.log))
    ):
        return _LATER_BATCH_CHECK.format(round=rulesets.round_name(ruleset))
    return ""


def _lacks_round_data(
    ran: official.ToolRun, benches: dict[tuple[str, str], Any], ruleset: str = MLPERF_RULESET
) -> bool:
    """True when a tool's crash is a gap of the installed tool (:func:`_round_gap`), not a rule of the round."""
    return bool(_round_gap(ran, benches, ruleset))


def _crash(ran: official.ToolRun, ruleset: str = MLPERF_RULESET) -> str:
    names = {*_BENCHMARK_NAMES, *rulesets.benchmarks(ruleset)}
    return ran.failure() + _round_gap(ran, {("", b): None for b in names}, ruleset)


_NO_SEED = re.compile(r"Result file \S+ logs no seed\.$")
_SEED_FAILED = "Seed checker failed"


def _package_checker_errors(msgs: list[str], ruleset: str = MLPERF_RULESET) -> tuple[list[str], list[str]]:
    """(errors, warnings) of the installed package checker's errors for one benchmark, by the round's rules.

    mlperf-logging 4.x (commit ac0096c, September 2024) fails a run that logs no seed; the v2.0 round's seed
    checker failed it only when another run of the benchmark logs one, which :func:`_check_seeds_and_consistency`
    checks. So "logs no seed" is a warning for a ruleset before 4.1.0, and the summary line "Seed checker failed"
    goes with it when the seed checker found nothing else; from 4.1.0 on it is the round's own rule, an error.
    """
    if not rulesets.later_check(ruleset, "seed required"):
        return [m for m in msgs if m != _SEED_FAILED] + [m for m in msgs if m == _SEED_FAILED][:1], []
    errors, later = [], []
    seed_errors_left = False
    for msg in msgs:
        if msg.startswith(_SEED_FAILED + " and found the following errors:"):
            body = msg.split(":", 1)[1].strip().splitlines()
            kept = [ln for ln in body if not _NO_SEED.match(ln.strip())]
            later += [
                f"{ln.strip()} ({rulesets.later_note(ruleset, 'seed required')})"
                for ln in body
                if _NO_SEED.match(ln.strip())
            ]
            if kept:
                seed_errors_left = True
                errors.append(f"{_SEED_FAILED} and found the following errors: " + "\n".join(kept))
        elif msg != _SEED_FAILED:
            errors.append(msg)
    if seed_errors_left or (_SEED_FAILED in msgs and not later):
        errors += [m for m in msgs if m == _SEED_FAILED][:1]
    return errors, later


def _read_run(path: Path, bench: _Bench, layout: Layout) -> _Run:
    try:
        logged = parse_run(path, evaluated_after_stop=registry.evaluated_after_run_stop())
        records = [rec for _, rec in logged.lines]  # the file read once
    except (TrainperfError, ValueError, TypeError, KeyError) as e:
        bench.problems.append(f"{path.name}: cannot be read as a run ({layout.relative(str(e))})")
        return _Run(name=path.name, path=path, records=[], logged=None)
    if not records:
        bench.problems.append(f"{path.name}: has no MLLOG lines; it is not the log of a run")
    return _Run(name=path.name, path=path, records=records, logged=logged)


def _refused_run(path: Path, bench: _Bench, why: list[str]) -> _Run:
    """A result file kept out of the private copy by the gate: counted, never read by an official tool."""
    more = f" (and {len(why) - _REASONS_SHOWN} more)" if len(why) > _REASONS_SHOWN else ""
    name = path.name if gate.name_problem(path.name) is None else gate.shown(path.name)
    bench.problems.append(
        f"{name}: refused before the official tools read it: {'; '.join(why[:_REASONS_SHOWN])}{more}; "
        "fix the file (the official tools run only on files that pass)"
    )
    return _Run(name=path.name, path=path, records=[], logged=None)


def _spec(bench: _Bench) -> Any:
    try:
        return registry.get_spec(bench.benchmark, bench.scale)
    except (NotAvailableError, UsageError):
        return None


def _runs_required(bench: _Bench) -> tuple[int, int]:
    spec = _spec(bench)
    if spec is not None:
        return spec.runs_required, spec.runs_dropped
    if bench.benchmark not in _BENCHMARK_NAMES:  # a benchmark of another round: the official tools' counts
        return rulesets.result_files(bench.benchmark), rulesets.RUNS_DROPPED_OTHERS
    _, dropped = registry.mlperf_runs(bench.benchmark)
    return get_result_file_counts(official.USAGE)[bench.benchmark], dropped


def _check_count(bench: _Bench) -> None:
    need, _ = _runs_required(bench)
    have = [r.name for r in bench.runs]
    if len(have) != need:
        missing = [f"result_{i}.txt" for i in range(need) if f"result_{i}.txt" not in have]
        bench.problems.append(
            f"results/{bench.system}/{bench.benchmark} holds {len(have)} result files, but a {bench.benchmark} "
            f"score needs exactly {need} runs (MLPerf Training {rulesets.round_name(bench.ruleset)})"
            + (f"; missing: {', '.join(missing)}" if missing else "")
        )


def _check_many(benches: dict[tuple[str, str], _Bench], ruleset: str = MLPERF_RULESET) -> dict[Any, dict[str, Any]]:
    """check_log of every benchmark's result files (the official checker started once for them all), by benchmark
    and file name: each result, or the TrainperfError it raised (kept for the verdict)."""
    runs = [(key, r) for key, bench in benches.items() for r in bench.runs if r.records]
    checked = check_logs([r.path for _, r in runs], keys=[key[1] for key, _ in runs], ruleset=ruleset)
    by_bench: dict[Any, dict[str, Any]] = {key: {} for key in benches}
    for (key, run), result in zip(runs, checked, strict=True):
        by_bench[key][run.name] = result
    return by_bench


def _check_compliance(bench: _Bench, checked: dict[str, Any]) -> None:
    """(b) check_log's result on every file (``checked``: by file name, from :func:`_check_many`); runs logged as
    aborted are tolerated up to olympic scoring's drop count."""
    _, dropped = _runs_required(bench)
    aborted: list[str] = []
    lenient: list[str] = []  # compliant by the round's own checker, not by the installed one (round_only)
    for run in bench.runs:
        if not run.records:
            continue
        res = checked[run.name]
        if isinstance(res, TrainperfError):
            bench.problems.append(f"{run.name}: {str(res).replace(str(run.path), run.name)}")
            continue
        run.compliant = res.passed
        bench.warnings.extend(f"{run.name}: {w}" for w in res.warnings)  # the official checker's own warnings
        if res.passed:
            if res.round_only:
                lenient.append(run.name)
            continue
        rules = "trainperf's mini rules" if res.scale == "mini" else f"the official v{res.ruleset} rules"
        if run.logged and all(p.startswith((TARGET_PROBLEM, _STATUS_PROBLEM, *_NO_RUN_STOP)) for p in res.problems):
            # a run that stopped short of the target (aborted, or stopped 'success' below it, as a published
            # Google v2.0 resnet run did), or whose log ends before run_stop (Lenovo's v2.0 unet3d result_40),
            # counts as a failed run, which olympic scoring drops: the v2.0 package checker accepts one
            # non-compliant file "under olympic scoring" (unet3d: four)
            aborted.append(run.name)
            continue
        bench.problems.extend(f"{run.name} ({rules}): {p}" for p in res.problems)
    _round_compliance(bench, lenient, dropped)
    if len(aborted) > dropped:
        bench.problems.append(
            f"{len(aborted)} runs stopped without reaching the target ({', '.join(aborted)}); olympic scoring "
            f"drops at most {dropped}"
        )
    elif aborted:
        bench.warnings.append(
            f"{', '.join(aborted)} stopped without reaching the target; counted as the slowest, which olympic "
            "scoring drops"
        )


_NOT_ACCEPTED = re.compile(r"package_checker: (\d+) files do not comply, directory cannot be accepted$")


def _round_compliance(bench: _Bench, lenient: list[str], dropped: int) -> None:
    """The installed package checker's "N files do not comply, directory cannot be accepted" where ``lenient`` of
    those files fail only rules the round's own compliance checker did not apply (a v1.1 weights_initialization, a key
    renamed after v2.1): a warning when what is left is as many as the round's package checker accepted under olympic
    scoring (one; four for unet3d)."""
    if not lenient:
        return
    for text in list(bench.problems):
        if (m := _NOT_ACCEPTED.match(text)) and int(m[1]) - len(lenient) <= dropped:
            bench.problems.remove(text)
            bench.warnings.append(
                f"{text} (by the installed checker; {_short_list(lenient)} fail(s) only rules that the "
                f"{rulesets.round_name(bench.ruleset)} round's own checker did not apply: see their warnings)"
            )


def _short_list(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _first(records: list[dict[str, Any]], key: str) -> Any:
    return next((r.get("value") for r in records if r.get("key") == key), None)


def _seed_records(run: _Run) -> set[tuple[Any, Any, str]]:
    """The run's seeds as the round's seed checker tells them apart: (source file, line, value)."""
    out = set()
    for r in run.records:
        if r.get("key") == "seed":
            md = r.get("metadata") if isinstance(r.get("metadata"), dict) else {}
            out.add((json.dumps(md.get("file")), json.dumps(md.get("lineno")), json.dumps(r.get("value"))))
    return out


def _check_seeds_and_consistency(bench: _Bench, org: str, division: str | None, ruleset: str = MLPERF_RULESET) -> None:
    """(c) distinct seeds across the runs; org, system and quality values that fit the package.

    The seed rules are those of the v2.0 round's seed checker (mlperf-logging 2.0.0, seed_checker.py): two runs
    logging the same seed from the same source line, or a run logging no seed where another run logs one, is an
    error; a run logging several seeds (one per rank, say) is a warning, and so is a benchmark none of whose runs
    logs a seed; from ruleset 4.1.0 on (mlcommons/logging ac0096c), a run logging no seed is an error whatever the
    others log. ``submission_org`` and ``submission_platform`` are names: the gate has already refused any that
    could be read as a path, and MLCommons compares neither with the folders, so a mismatch is a warning.
    """
    by_seed: dict[tuple[Any, Any, str], list[str]] = defaultdict(list)
    spec = _spec(bench)
    logs_seeds = [r.name for r in bench.runs if r.records and _seed_records(r)]
    for run in bench.runs:
        if not run.records:
            continue
        seeds = _seed_records(run)
        if not seeds and logs_seeds:
            bench.problems.append(
                f"{run.name}: logs no seed, but {logs_seeds[0]} does; every run must log the seed it used "
                "(seed checker, mlperf-logging 2.0.0)"
            )
        elif not seeds and not rulesets.later_check(ruleset, "seed required"):
            bench.problems.append(
                f"{run.name}: logs no seed; every run must log the seed it used (seed checker, ruleset {ruleset})"
            )
        elif not seeds:
            bench.warnings.append(f"{run.name}: logs no seed ({rulesets.later_note(ruleset, 'seed required')})")
        elif len({s[2] for s in seeds}) > 1:
            values = sorted({s[2] for s in seeds})
            shown = ", ".join(values[:3]) + (f", ... ({len(values)} in all)" if len(values) > 3 else "")
            bench.warnings.append(f"{run.name}: logs several different seeds ({shown}), one per rank or per generator")
        for s in seeds:
            by_seed[s].append(run.name)
        if (found := _first(run.records, "submission_org")) != org:
            bench.warnings.append(f"{run.name}: submission_org is {found!r}, but the package folder is {org!r}")
        if (found := _first(run.records, "submission_platform")) != bench.system:
            bench.warnings.append(f"{run.name}: submission_platform is {found!r}, but it is in results/{bench.system}")
        for r in run.records:
            if r.get("key") != "eval_accuracy":
                continue
            bad = impossible_quality(r.get("value"), higher_is_better=spec is not None and spec.higher_is_better)
            if bad is not None:
                epoch = (r.get("metadata") or {}).get("epoch_num") if isinstance(r.get("metadata"), dict) else None
                bench.problems.append(
                    f"{run.name}: eval_accuracy {bad:g} (epoch {epoch}) is not a possible "
                    f"{spec.metric if spec else 'quality'} value (0 to 1)"
                )
                break
    declared = {_first(r.records, "submission_division") for r in bench.runs if r.records}
    if division is not None and declared - {division}:
        bench.warnings.append(
            f"the logs declare MLPerf division {', '.join(sorted(map(str, declared)))} but systems/{bench.system}.json "
            f"says {division!r}: the official tools take the division from the system description (its RCP and seed "
            "checks), the compliance checker from the logs (their rules)"
        )
    for (_, _, seed), names in sorted(by_seed.items()):
        if len(names) > 1:
            bench.problems.append(
                f"{' and '.join(names)} log the same seed {seed}: the runs of a benchmark must use distinct "
                "seeds (seed checker, mlperf-logging 2.0.0; trainperf gives run i the seed --seed + i)"
            )


@dataclass(kw_only=True)
class _RcpRuns:
    custom: Path | None  # trainperf's mini RCP table, or None: the official v2.0 RCPs
    provisional: bool
    note: str
    first: official.RcpCheck
    samples: official.RcpCheck | None = None  # again, counting train_samples (the benchmark's rcp_train_samples_flag)


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

    flag = registry.benchmark(bench.benchmark).rcp_train_samples_flag if known else ""
    job = official.RcpJob(folder, where, custom_rcps=custom)
    return _RcpRuns(custom=custom, provisional=provisional, note=note, first=None), job, flag  # type: ignore[arg-type]


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
        return
    bench.rcp = f"failed ({rcp.message}, {note}){detail}"
    advice = (
        "; a recipe that converges faster than the reference runs needs its own RCPs (MLPerf: submit RCPs for "
        "this batch size), or use the reference hyperparameters"
    )
    if provisional or division != "closed":
        why = "the RCP is provisional" if provisional else f"RCPs bind closed-division runs only (this is {division})"
        bench.warnings.append(f"RCP check {bench.rcp}{advice} (a warning, not a failure: {why})")
    else:
        bench.problems.append(f"RCP check {bench.rcp}{advice}")


def _verdict(bench: _Bench, summary: official.Summary | None, scaling: float | None = None) -> Verdict:
    need, dropped = _runs_required(bench)
    results = [
        (True, r.logged.minutes)
        if r.compliant and r.logged and r.logged.success and r.logged.minutes is not None
        else (False, math.inf)
        for r in bench.runs
    ]
    starts = [r.logged.start_ms if r.logged else None for r in bench.runs]
    ours = score_results(results, runs_required=need, dropped=dropped, start_times=starts) if results else None
    theirs = summary.scores.get((bench.system, bench.benchmark)) if summary else None
    warnings = list(bench.warnings)
    if summary:
        where = f"{bench.system}/{bench.benchmark}"
        warnings += [f"result_summarizer: {n}" for n in summary.notices if where in n]
    a = ours.minutes if ours else None
    if summary and ((a is None) != (theirs is None) or (a is not None and not math.isclose(a, theirs, rel_tol=1e-9))):
        why = _why_scores_differ(bench, ours, summary)
        warnings.append(
            f"trainperf's score ({minutes_text(a)}) differs from result_summarizer's ({minutes_text(theirs)})"
            + (f": {why}" if why else "")
        )
    return Verdict(
        system=bench.system,
        benchmark=bench.benchmark,
        scale=bench.scale,
        runs=len(bench.runs),
        problems=list(dict.fromkeys(bench.problems)),
        warnings=list(dict.fromkeys(warnings)),
        rcp=bench.rcp,
        score=ours,
        summarizer_minutes=theirs,
        scaling=scaling,
    )


def _why_scores_differ(bench: _Bench, ours: Score | None, summary: official.Summary) -> str:
    reasons = []
    if ours is not None and not ours.valid:
        reasons.append(f"trainperf's is a {ours.label} ({ours.note})")
    dropped = " ".join(n for n in summary.notices if "Compliance check failed" in n)
    kept = [r for r in bench.runs if r.records and not r.compliant and f"/{r.name}" not in dropped]
    aborted = [r.name for r in kept if r.logged and r.logged.status == "aborted"]
    other = [r.name for r in kept if r.name not in aborted]
    if aborted:
        reasons.append(
            f"the summarizer counts the minutes of {', '.join(aborted)}, which stopped with status 'aborted' "
            f"(the {rulesets.round_name(bench.ruleset)} open rules do not check run_stop's status); trainperf counts "
            "them as the slowest"
        )
    if other:
        reasons.append(
            f"the summarizer counts {', '.join(other)}, which fail(s) trainperf's checks above but pass(es) the "
            "official rules it applies; trainperf does not count them"
        )
    return "; ".join(reasons)


def minutes_text(m: float | None) -> str:
    return "no score" if m is None else f"{m:.4f} min"


def finding_kind(text: str) -> str:
    """A short name for the kind of a finding (an error or a warning), for tables: its source and rule."""
    kinds = (
        ("package_checker: Seed checker", "package_checker seeds"),
        ("package_checker: RCP", "package_checker RCP"),
        ("package_checker: System description", "package_checker system description"),
        ("package_checker:", "package_checker"),
        ("result_summarizer:", "result_summarizer"),
        ("RCP check", "RCP"),
        ("systems/", "system description"),
        ("trainperf's score", "score differs from the summarizer's"),
    )
    for prefix, kind in kinds:
        if text.startswith(prefix):
            return kind
    for words, kind in (
        ("refused before the official tools", "gate"),
        ("can be ignored for 1.1.0", "weights_initialization (v1.1: a warning)"),
        ("logs no seed", "seeds"),
        ("seeds", "seeds"),
        ("same seed", "seeds"),
        ("submission_org is", "submission_org vs folder"),
        ("submission_platform is", "submission_platform vs folder"),
        ("scaling.json", "scaling.json"),
        ("rules):", "compliance"),
        ("is logged", "compliance (repeated key)"),
        ("stopped without reaching the target", "aborted runs"),
        ("result files, but a", "result count"),
        ("not a result file", "file not a result"),
    ):
        if words in text:
            return kind
    return "other"


def review_json(r: Review) -> dict[str, Any]:
    """The review as JSON-ready data: one entry per (system, benchmark), findings classified by kind."""

    def findings(texts: list[str]) -> list[dict[str, str]]:
        return [{"kind": finding_kind(t), "text": t} for t in texts]

    return {
        "package": str(r.package),
        "org": r.org,
        "ruleset": r.ruleset,
        "ruleset_source": r.ruleset_source,
        "passed": r.passed,
        "errors": findings(r.problems),
        "warnings": findings(r.warnings),
        "confinement": r.confinement,
        "verdicts": [
            {
                "system": v.system,
                "benchmark": v.benchmark,
                "scale": v.scale,
                "runs": v.runs,
                "accepted": v.passed,
                "score_minutes": v.score.minutes if v.score else None,
                "score_valid": bool(v.score and v.score.valid),
                "scaling_factor": v.scaling,
                "scaled_minutes": v.scaled_minutes,
                "summarizer_minutes": v.summarizer_minutes,
                "rcp": v.rcp,
                "errors": findings(v.problems),
                "warnings": findings(v.warnings),
            }
            for v in r.verdicts
        ],
    }
