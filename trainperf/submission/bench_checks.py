"""The per-benchmark steps of a package review (:mod:`trainperf.submission.review`): reading the runs, their count,
trainperf's compliance findings, seeds and consistency, and the package checker's findings by the package's round."""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlperf_logging.benchmark_meta import get_result_file_counts

from trainperf import registry
from trainperf.confine import Confinement
from trainperf.errors import NotAvailableError, TrainperfError, UsageError
from trainperf.registry import BENCHMARKS as _BENCHMARK_NAMES
from trainperf.results import LoggedRun, parse_run
from trainperf.rules import gate, mini_rules, rulesets
from trainperf.rules.compliance import TARGET_PROBLEM, finish_logs, prepare_logs
from trainperf.run_checks import impossible_quality
from trainperf.spec import MLPERF_RULESET
from trainperf.submission import official
from trainperf.submission import tool_plan as tool_plan
from trainperf.submission.layout import Layout
from trainperf.timeline import first_past_budget, own_progress

_STATUS_PROBLEM = "the run stopped with status"  # compliance's words for a run that did not succeed
# a log that ends before the run does: the checker's count and compliance's status sentence
_NO_RUN_STOP = ("the log must contain exactly one 'run_stop' line but has 0", "the run has no run_stop line")
_REASONS_SHOWN = 5  # reasons listed for a refused file before "and N more"


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
    energy_joules: float | None = None  # the energy score from the package's power logs (None: none)
    has_power: bool = False  # whether its power logs were read
    power_withheld: bool = False  # read by its round's formula, kept from the installed summarizer (cannot read them)


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


_NO_SEED = re.compile(r"Result file .+ logs no seed\.$")  # a folder name may hold a space
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
        # any round's allowance of evaluations after run_stop: the compliance step applies the package's round's
        logged = parse_run(path, evaluated_after_stop=rulesets.evaluated_after_run_stop())
        records = [rec for _, rec in logged.lines]  # the file read once
    except (TrainperfError, ValueError, TypeError, KeyError) as e:
        bench.problems.append(f"{path.name}: cannot be read as a run ({layout.relative(str(e))})")
        return _Run(name=path.name, path=path, records=[], logged=None)
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


def compliance_groups(benches: dict[tuple[str, str], _Bench], ruleset: str) -> list[tool_plan.ComplianceGroup]:
    """The result files that :func:`_check_many` will have the official checker check, by rule file and ruleset as
    :func:`trainperf.rules.compliance.check_log` chooses them (mini logs: trainperf's mini rules on v2.0's; the
    others: the package's round), for a :class:`~trainperf.submission.tool_plan.ToolPlan`. A file declared under
    another rule file than the checker's is simply checked alone."""
    groups: dict[tuple[Path | None, str], list[Path]] = {}
    for (_, benchmark), bench in benches.items():
        mini = bench.scale == "mini" and benchmark in _BENCHMARK_NAMES
        config = mini_rules.shipped_rule_path(benchmark).resolve() if mini else None
        chosen = MLPERF_RULESET if mini else ruleset
        groups.setdefault((config, chosen), []).extend(r.path for r in bench.runs if r.records)
    return [tool_plan.ComplianceGroup(files, config, chosen) for (config, chosen), files in groups.items() if files]


def _prepare_many(benches: dict[tuple[str, str], _Bench], ruleset: str = MLPERF_RULESET) -> tuple[list[Any], list[Any]]:
    """The part of :func:`_check_many` made before the official checker runs (every file read and checked by
    trainperf's own rules: :func:`trainperf.rules.compliance.prepare_logs`), which a review makes while the official
    tools run: (the runs, what was prepared for each)."""
    runs = [(key, r) for key, bench in benches.items() for r in bench.runs if r.records]
    return runs, prepare_logs([r.path for _, r in runs], keys=[key[1] for key, _ in runs], ruleset=ruleset)


def _check_many(
    benches: dict[tuple[str, str], _Bench],
    ruleset: str = MLPERF_RULESET,
    plan: Any = None,
    prepared: tuple[list[Any], list[Any]] | None = None,
) -> dict[Any, dict[str, Any]]:
    """check_log of every benchmark's result files, by benchmark and file name: each result, or the TrainperfError it
    raised (kept for the verdict). The official checker's output on a file is taken from ``plan`` (a
    :class:`~trainperf.submission.tool_plan.ToolPlan` that ran) where it checked the very bytes trainperf's gate
    passed; the other files are checked in one checker process. ``prepared``: what :func:`_prepare_many` gave for
    ``benches`` (made here where not given)."""

    def ran(path: Path, data: bytes, config: Path | None, chosen: str) -> Any:
        rec = plan.compliance_outcome(path, config, chosen) if plan is not None else None
        if rec is None or rec.get("sha256") != hashlib.sha256(data).hexdigest():
            return None
        try:
            return int(rec["rc"]), str(rec["out"]), str(rec["err"]), Confinement((), plan.confinement)
        except (KeyError, TypeError, ValueError):
            return None

    runs, ready = prepared if prepared is not None else _prepare_many(benches, ruleset)
    checked = finish_logs([r.path for _, r in runs], ready, ran, keys=[key[1] for key, _ in runs], ruleset=ruleset)
    by_bench: dict[Any, dict[str, Any]] = {key: {} for key in benches}
    for (key, run), result in zip(runs, checked, strict=True):
        by_bench[key][run.name] = result
    return by_bench


def _check_compliance(bench: _Bench, checked: dict[str, Any]) -> None:
    """(b) check_log's result on every file (``checked``: by file name, from :func:`_check_many`); runs logged as
    aborted are tolerated up to olympic scoring's drop count."""
    _, dropped = _runs_required(bench)
    spec = _spec(bench)
    aborted: list[str] = []
    lenient: list[str] = []  # compliant by the round's own checker, not by the installed one (round_only)
    olympic: dict[str, list[str]] = {}  # failing the official rules alone: what the package checker tolerates
    for run in bench.runs:
        if not run.records:
            if run.logged is not None:  # read, but not a log: the official checker fails it, and it alone
                olympic[run.name] = [f"{run.name}: has no MLLOG lines; it is not the log of a run"]
            continue
        res = checked[run.name]
        if isinstance(res, TrainperfError):
            bench.problems.append(f"{run.name}: {str(res).replace(str(run.path), run.name)}")
            continue
        run.compliant = res.passed
        bench.warnings.extend(f"{run.name}: {w}" for w in res.warnings)  # the official checker's own warnings
        if res.passed and (over := _past_budget(run, spec)) is not None:
            run.compliant = False  # a target reached past the budget is not a success: a failed run
            bench.warnings.append(
                f"{run.name}: evaluated at epoch_num {over:g}, past the {spec.max_progress:g} {spec.unit} budget "
                "(timeline rule: the harness stops a run at its budget); counted as a run that did not reach the target"
            )
            aborted.append(run.name)
            continue
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
        found = [f"{run.name} ({rules}): {p}" for p in res.problems]
        if res.official_only:
            olympic[run.name] = found
        else:
            bench.problems.extend(found)
    _round_compliance(bench, lenient, dropped)
    _olympic(bench, olympic, len(aborted), dropped)
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


def _olympic(bench: _Bench, failed: dict[str, list[str]], aborted: int, dropped: int) -> None:
    """Files that fail the official rules alone (``failed``: name -> findings), beside ``aborted`` runs that did not
    reach the target: accepted and scored without them while they are as many as olympic scoring drops, as the official
    package checker accepts them ("accepting this under olympic scoring"; the summarizer drops them), else errors."""
    if not failed:
        return
    if len(failed) + aborted > dropped:
        bench.problems.extend(p for found in failed.values() for p in found)
        return
    for name, found in failed.items():
        more = f" (and {len(found) - 2} more)" if len(found) > 2 else ""
        bench.warnings.append(
            f"{'; '.join(found[:2])}{more}; accepted under olympic scoring, as the official package checker accepts "
            f"{dropped} non-compliant file(s) of a {bench.benchmark} benchmark: scored without {name}, counted as "
            "the slowest run, which olympic scoring drops"
        )


def _past_budget(run: _Run, spec: Any) -> Any:
    """The first epoch_num past the spec's progress budget in trainperf's own log (None: none, or no spec)."""
    if spec is None or run.logged is None:
        return None
    return first_past_budget(own_progress(run.logged.lines), spec.max_progress, spec.epoch_num_offset)


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
