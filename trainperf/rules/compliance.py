"""Run MLCommons' compliance checker on one MLLOG file and explain its verdict in plain words.

Reference-scale logs are checked against the official v2.0 rules as they are; mini-scale logs against
the shipped mini rule file of their benchmark (see :mod:`trainperf.rules.mini_rules`), which runs the
official ``common.yaml`` too. The checker runs in a subprocess (its rules are Python strings that it
evaluates, and it keeps global state between files); trainperf itself only json-parses the log to
pick the rules and to explain the checker's messages, and never evaluates anything from it.

A log is untrusted: the v2.0 rule files build rule-file paths from logged values and execute the file
they reach, so :mod:`trainperf.rules.gate` screens the log first and a log it refuses never reaches the
checker; the checker itself runs confined where the machine allows it (:mod:`trainperf.confine`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainperf import published, registry, rounds
from trainperf.confine import Confinement, confinement, output_so_far, run_confined
from trainperf.errors import DataError, NotAvailableError, TrainperfError, UsageError
from trainperf.registry import BENCHMARKS
from trainperf.rules import gate, mini_rules, rulesets
from trainperf.rules.explain import EXACTLY_ONE, TARGET_PROBLEM, explain, messages
from trainperf.rules.preflight import (
    CHECKER_MODULE,
    Line,
    checker_dir,
    first_value,
    preflight,
    read_bytes,
    read_log,
    records,
)
from trainperf.run_checks import ONCE, timing_problems
from trainperf.spec import MLPERF_RULESET, SCALES

__all__ = [
    "CHECKER_MODULE",
    "CHECKER_TIMEOUT_S",
    "GATE_PROBLEM",
    "TARGET_PROBLEM",
    "TIMING_PROBLEM",
    "CheckResult",
    "check_log",
    "check_logs",
    "is_target_only_failure",
]

CHECKER_TIMEOUT_S = 120
# every problem found by the gate (trainperf.rules.gate) starts with this
GATE_PROBLEM = "refused before the official checker read it"
# every problem with the run's timing starts with this (the official checker orders lines but never compares times)
TIMING_PROBLEM = (
    f"timing rule (MLPerf Training v{MLPERF_RULESET}: the result is run_stop - run_start, and every evaluation "
    "is on the clock)"
)
# how a weights_initialization problem reads (see rulesets.WEIGHTS_INIT_WARNED)
_WEIGHTS_INIT = ("the log must contain at least one 'weights_initialization' line", "weights_initialization:")


@dataclass(frozen=True, kw_only=True)
class CheckResult:
    """The official checker's verdict on one log, with each failure explained in plain words."""

    path: Path
    passed: bool
    scale: str
    benchmark: str | None
    ruleset: str
    config: Path | None  # the --config given to the checker; None: the official rules alone
    problems: list[str]
    raw: str  # the checker's full output (stdout and stderr)
    warnings: list[str] = field(default_factory=list)  # reported by the checker without failing; `check` prints them
    confinement: str = ""  # how the checker ran: "confined: ..." or "not confined: <why>"; "" when it did not run
    # the installed checker fails the log only by rules its round's own checker did not apply (then warnings)
    round_only: bool = False
    # it failed by the official checker's rules alone: no timing rule, no crash, nothing found before the checker ran
    # (the file the official package checker accepts one of "under olympic scoring")
    official_only: bool = False


def is_target_only_failure(result: CheckResult) -> bool:
    """True when the log failed and every problem is the quality target (e.g. a reference dry run)."""
    return not result.passed and bool(result.problems) and all(p.startswith(TARGET_PROBLEM) for p in result.problems)


# --- running the checker --------------------------------------------------------------------------
_STABLE_OUTPUT = {"PYTHONHASHSEED": "0"}  # the checker prints sets; keep its output stable


def _run_checker(
    data: bytes, name: str, config: Path | None, ruleset: str = MLPERF_RULESET
) -> tuple[int | None, str, str, Confinement]:
    """(exit code or None on timeout, stdout, stderr, how it was confined) of the checker on the log ``data``,
    which it reads from a temp dir (the bytes the gate passed, whatever happens to the file meanwhile); it runs
    there too, so nothing lands in the cwd."""
    with tempfile.TemporaryDirectory(prefix="trainperf-check-") as tmp:
        path = Path(tmp) / "log" / name
        path.parent.mkdir()
        path.write_bytes(data)
        confined = confinement(writable=[Path(tmp)])
        cmd = [
            sys.executable,
            "-m",
            CHECKER_MODULE,
            "--usage",
            "training",
            "--ruleset",
            ruleset,
            "--log_output",
            str(Path(tmp) / "compliance_checker.log"),
        ]
        if config is not None:
            cmd += ["--config", str(config)]
        cmd.append(str(path))
        try:
            proc = run_confined(confined, cmd, cwd=Path(tmp), timeout_s=CHECKER_TIMEOUT_S, env=_STABLE_OUTPUT)
        except subprocess.TimeoutExpired as exc:
            return None, *output_so_far(exc), confined
        return proc.returncode, proc.stdout, proc.stderr, confined


_BATCH_CHECKER = Path(__file__).with_name("_batch_checker.py")


def _run_batch(
    items: list[_Pending], config: Path | None, ruleset: str = MLPERF_RULESET
) -> list[tuple[int | None, str, str, Confinement] | None]:
    """:func:`_run_checker` of every item in one confined process (:mod:`trainperf.rules._batch_checker`), each
    file's (exit code, stdout, stderr, confinement) in order; None for a file it did not report on (the batch's
    time limit, CHECKER_TIMEOUT_S per file, ran out first)."""
    with tempfile.TemporaryDirectory(prefix="trainperf-check-") as tmp:
        files = []
        for i, item in enumerate(items):  # one folder each: two benchmarks' result_0.txt may be in one batch
            path = Path(tmp) / "log" / str(i) / item.path.name
            path.parent.mkdir(parents=True)
            path.write_bytes(item.data)
            files.append(str(path))
        results = Path(tmp) / "results.jsonl"
        confined = confinement(writable=[Path(tmp)])
        cmd = [sys.executable, str(_BATCH_CHECKER), "--usage", "training", "--ruleset", ruleset]
        cmd += ["--out", str(results)] + (["--config", str(config)] if config is not None else []) + files
        try:
            run_confined(confined, cmd, cwd=Path(tmp), timeout_s=CHECKER_TIMEOUT_S * len(items), env=_STABLE_OUTPUT)
        except subprocess.TimeoutExpired:
            pass  # the files it finished are in results; the others are checked alone
        reported: dict[str, tuple[int | None, str, str, Confinement]] = {}
        if results.is_file():
            for line in results.read_text(encoding="utf-8").splitlines():
                try:
                    rec = json.loads(line)
                    reported[rec["file"]] = (int(rec["rc"]), str(rec["out"]), str(rec["err"]), confined)
                except (ValueError, KeyError, TypeError):
                    break  # a line cut by the time limit: the rest is checked alone
        return [reported.get(f) for f in files]


def check_log(
    path: Path,
    *,
    scale: str | None = None,
    key: str | None = None,
    config: Path | None = None,
    ruleset: str | None = None,
) -> CheckResult:
    """Check one MLLOG file with the official checker and explain every failure.

    ``scale`` defaults to the log's ``trainperf_scale`` (``reference`` when absent); ``key`` (the
    benchmark) to its ``submission_benchmark``. Reference logs get the official v2.0 rules alone, mini
    logs the shipped mini rule file of their benchmark; ``config`` replaces that file (e.g. one written
    by :func:`trainperf.rules.mini_rules.write_mini_rules`). ``ruleset`` (e.g. ``1.1.0``) is the MLPerf Training
    ruleset a reference log is checked by; by default the log's own round (:mod:`trainperf.rules.rulesets`: v2.0
    for trainperf's logs).
    """
    prepared = _prepare(Path(path), scale=scale, key=key, config=config, ruleset=ruleset)
    if isinstance(prepared, CheckResult):
        return prepared
    return prepared.finish(*_run_checker(prepared.data, prepared.path.name, prepared.config, prepared.ruleset))


def check_logs(
    paths: list[Path], *, key: str | None = None, ruleset: str | None = None, keys: list[str | None] | None = None
) -> list[CheckResult | TrainperfError]:
    """:func:`check_log` of every path (its result, or the error it raised), in order; the official checker runs
    once for all the files that share a rule file (:mod:`trainperf.rules._batch_checker`) rather than once per
    file, with the same messages. A file the batch does not report on (its time limit) is checked alone.
    ``keys``, where given, is each path's benchmark (``key`` of :func:`check_log`), in place of ``key``."""
    prepared: list[CheckResult | TrainperfError | _Pending] = []
    for i, path in enumerate(paths):
        try:
            prepared.append(_prepare(Path(path), key=keys[i] if keys is not None else key, ruleset=ruleset))
        except TrainperfError as e:
            prepared.append(e)
    groups: dict[tuple[Path | None, str], list[int]] = {}
    for i, p in enumerate(prepared):
        if isinstance(p, _Pending):
            groups.setdefault((p.config, p.ruleset), []).append(i)
    done: list[Any] = list(prepared)
    for (config, chosen), indexes in groups.items():
        ran = _run_batch([prepared[i] for i in indexes], config, chosen)  # type: ignore[misc]
        for i, outcome in zip(indexes, ran, strict=True):
            pending = prepared[i]
            assert isinstance(pending, _Pending)
            if outcome is None:
                outcome = _run_checker(pending.data, pending.path.name, pending.config, pending.ruleset)
            done[i] = pending.finish(*outcome)
    return done


@dataclass(frozen=True)
class _Pending:
    """A log that passed every check made before the official checker runs: what to run it on, and how to read
    its output (``finish(rc, stdout, stderr, confinement)``)."""

    path: Path
    data: bytes
    config: Path | None
    finish: Callable[[int | None, str, str, Confinement], CheckResult]
    ruleset: str = MLPERF_RULESET


def _ruleset_of(path: Path, lines: list[Line], scale: str, given: str | None) -> tuple[str, list[str]]:
    """(the ruleset a log is checked by, a warning saying so where it was inferred): see
    :mod:`trainperf.rules.rulesets`. Mini logs are checked by trainperf's mini rules, built on v2.0's."""
    logged = first_value(lines, "submission_benchmark")
    if scale == "mini":
        own = rounds.of_benchmark(logged) if isinstance(logged, str) else None
        ruleset = own.ruleset if own is not None else MLPERF_RULESET
        if given is not None and rulesets.normalize(given) != ruleset:
            raise UsageError(
                f"a mini log is checked by trainperf's mini rules, which build on the v{ruleset} rules of its "
                f"benchmark's round; --ruleset {given} applies to reference-scale logs only"
            )
        return ruleset, []
    all_records = [ln.record for ln in lines if ln.record is not None]
    starts = [d for _, rec in records(lines, "run_start") if (d := rulesets.log_date(rec.get("time_ms")))]
    chosen, why, inferred = rulesets.package_ruleset(
        given=given,
        path=path,
        trainperf_logs=rulesets.is_trainperf_log(all_records),
        latest=max(starts) if starts else None,
        held={logged} if isinstance(logged, str) and logged in rulesets.all_benchmarks() else set(),
    )
    return chosen, [f"checked by the MLPerf Training {rulesets.round_name(chosen)} rules, {why}"] if inferred else []


def _prepare(
    path: Path,
    *,
    scale: str | None = None,
    key: str | None = None,
    config: Path | None = None,
    ruleset: str | None = None,
) -> CheckResult | _Pending:
    """Everything :func:`check_log` does before the official checker runs: a :class:`CheckResult` when the log
    fails before it (the gate, trainperf's preflight), else what the checker's run needs."""
    data = read_bytes(path)
    lines = read_log(path, data)
    scale = _scale_of(path, lines, scale)
    logged_benchmark = first_value(lines, "submission_benchmark")
    benchmark = key if key is not None else logged_benchmark
    if key is not None and key not in BENCHMARKS and key not in rulesets.all_benchmarks():
        raise UsageError(f"unknown benchmark {key!r}: the benchmarks are {', '.join(BENCHMARKS)}")
    chosen, noted = _ruleset_of(path, lines, scale, ruleset)
    config = _config_of(config, scale, benchmark)
    result = functools.partial(
        _result, path=path, scale=scale, benchmark=benchmark, ruleset=chosen, config=config, noted=noted
    )
    refused = gate.screen_log(data, known={*BENCHMARKS, *rulesets.benchmarks(chosen)})
    if refused:
        return result(
            False,
            [
                f"{GATE_PROBLEM}: {r}; fix the log (the official checker runs only on a log that passes)"
                for r in refused
            ],
            "(the official checker was not run: the log holds values that could lead it to other files)",
        )

    raw_timing, accepted = published.accepted(
        timing_problems(
            ((ln.lineno, ln.record) for ln in lines if ln.record is not None),
            after_stop=benchmark in rulesets.evaluated_after_run_stop(chosen),
        ),
        data,
    )  # a result file MLCommons published as it is keeps the timeline findings its round's tools accept
    result = functools.partial(result, noted=noted + accepted)
    fix = "the log is damaged or was edited: restore it, or redo the run"
    timing = [f"{TIMING_PROBLEM}: {p}; {fix}" for p in raw_timing]
    problems = preflight(lines, benchmark, chosen)
    if key is not None and logged_benchmark is not None and logged_benchmark != key:
        problems.insert(0, f"the log is for benchmark {logged_benchmark!r} (submission_benchmark), not {key!r}")
    if scale == "mini" and benchmark is None and config is None:
        problems.insert(
            0,
            "the log has no submission_benchmark line, so its mini rules cannot be chosen; "
            "log the benchmark or name it explicitly",
        )
    if problems:
        return result(False, problems + timing, "(the official checker was not run: fix the problems listed first)")

    checker_dir()  # a clear error when mlperf-logging is missing
    return _Pending(
        path=path,
        data=data,
        config=config,
        finish=lambda rc, out, err, confined: _finish(rc, out, err, confined, lines, benchmark, timing, result, chosen),
        ruleset=chosen,
    )


def _scale_of(path: Path, lines: list[Line], given: str | None) -> str:
    """The scale a log is checked at: ``given``, else its ``trainperf_scale`` (``reference`` when absent)."""
    if given is not None:
        if given not in SCALES:
            raise UsageError(f"unknown scale {given!r}: choose one of {', '.join(SCALES)}")
        return given
    logged = first_value(lines, "trainperf_scale")
    scale = "reference" if logged is None else logged
    if scale not in SCALES:
        raise DataError(
            f"{path}: trainperf_scale is {logged!r}, not one of {', '.join(SCALES)}; "
            "fix the log or choose the scale explicitly"
        )
    return scale


def _config_of(config: Path | None, scale: str, benchmark: str | None) -> Path | None:
    """The rule file given to the checker: ``config``, else a mini log's shipped mini rules (None: the official
    rules alone)."""
    if config is not None:
        config = Path(config).resolve()
        if not config.is_file():
            raise UsageError(f"rule file {config} does not exist")
    elif scale == "mini" and benchmark in BENCHMARKS:
        if not registry.benchmark(benchmark).available_at("mini"):
            raise NotAvailableError(
                f"the log says it is a mini-scale run of {benchmark!r}, which has no mini scale yet in trainperf: "
                "it is not a trainperf mini log; check it as a reference log with --scale reference"
            )
        config = mini_rules.shipped_rule_path(benchmark).resolve()
        if not config.is_file():
            raise NotAvailableError(
                f"no mini rule file for {benchmark!r} at {config}: regenerate the "
                "shipped files with `python -m trainperf.rules.mini_rules`"
            )
    return config


def _result(
    passed: bool,
    problems: list[str],
    raw: str,
    warnings: list[str] | None = None,
    confined: str = "",
    *,
    path: Path,
    scale: str,
    benchmark: str | None,
    ruleset: str,
    config: Path | None,
    noted: list[str],
) -> CheckResult:
    """A :class:`CheckResult`, each problem and warning once; ``noted``: the warnings that come first (the ruleset
    inferred)."""
    return CheckResult(
        path=path,
        passed=passed,
        scale=scale,
        benchmark=benchmark,
        ruleset=ruleset,
        config=config,
        problems=list(dict.fromkeys(problems)),
        raw=raw,
        warnings=list(dict.fromkeys(noted + (warnings or []))),
        confinement=confined,
    )


PLACEHOLDER_WARNING = "the official open rule"


def _finish(
    rc: int | None,
    out: str,
    err: str,
    confined: Confinement,
    lines: list[Line],
    benchmark: str | None,
    timing: list[str],
    result: Callable[..., CheckResult],
    ruleset: str = MLPERF_RULESET,
) -> CheckResult:
    """The check's result from the official checker's exit code and output."""
    raw = out + err
    if rc is None:
        return result(
            False, [f"the official checker did not finish within {CHECKER_TIMEOUT_S} s"], raw, confined=confined.note
        )
    problems, warnings = list(timing), []
    # the checker only warns about a second run_start or run_stop equal to the first; the timing rule fails
    # the log for it (its result would be ambiguous) and says so, so the checker's count is not repeated
    repeated = {key for key in ONCE if len(records(lines, key)) > 1}
    for msg in messages(err):
        if (m := EXACTLY_ONE.match(msg.splitlines()[0])) and m[1] in repeated:
            continue
        problem, warning = explain(msg, lines, benchmark, ruleset)
        problems += [problem] if problem else []
        warnings += [warning] if warning else []
    crashed = "Traceback (most recent call last)" in err
    if crashed and not any("does not exist" in p for p in problems):
        last = err.strip().splitlines()[-1] if err.strip() else "no output"
        problems.append(f"the official checker stopped with an error ({last}); its full output is in raw")
    moved = []
    if ruleset in rulesets.WEIGHTS_INIT_WARNED and not crashed:
        moved = [p for p in problems if p.startswith(_WEIGHTS_INIT)]
        warnings += [f"{p} ({rulesets.WEIGHTS_INIT_WARNED[ruleset]})" for p in moved]
    run_start = next((rec.get("time_ms") for _, rec in records(lines, "run_start")), None)
    for new, (old, why) in rulesets.renamed_keys(ruleset, run_start).items() if not crashed else ():
        text = f"the log must contain exactly one '{new}' line but has 0"
        if text in problems and len(records(lines, old)) == 1:
            moved.append(text)
            warnings.append(f"{text} ({why})")
    problems = [p for p in problems if p not in moved]
    # an open placeholder rule of the installed files no real log can pass (rulesets.OPEN_PLACEHOLDERS) warned about
    placeholder = any(w.startswith(PLACEHOLDER_WARNING) for w in warnings)
    if rc != 0 and not problems and not moved and not placeholder:
        problems.append(f"the official checker failed (exit code {rc}) without a message; see raw")
    passed = (rc == 0 or bool(moved) or placeholder) and not problems
    res = result(passed, problems, raw, warnings, confined.note)
    official_only = not passed and not timing and not crashed
    return dataclasses.replace(res, round_only=passed and rc != 0, official_only=official_only)


def check_logs_with(
    paths: list[Path],
    run: Callable[[Path, bytes, Path | None, str], tuple[int | None, str, str, Confinement] | None],
    *,
    keys: list[str | None],
    ruleset: str | None = None,
) -> list[CheckResult | TrainperfError]:
    """:func:`check_logs`, taking the official checker's output on a file from ``run(path, the bytes the gate
    passed, rule file, ruleset)`` where it gives one (the checker run elsewhere on those bytes, e.g. in a package's
    one tool process); the other files are checked as :func:`check_logs` checks them."""
    return finish_logs(paths, prepare_logs(paths, keys=keys, ruleset=ruleset), run, keys=keys, ruleset=ruleset)


def prepare_logs(paths: list[Path], *, keys: list[str | None], ruleset: str | None = None) -> list[Any]:
    """The first half of :func:`check_logs_with`: what :func:`check_log` does on each file before the official
    checker runs (each file read, gated and checked by trainperf's own rules), to give to :func:`finish_logs` (a
    review makes it while the official tools run)."""
    prepared: list[Any] = []
    for i, path in enumerate(paths):
        try:
            prepared.append(_prepare(Path(path), key=keys[i], ruleset=ruleset))
        except TrainperfError as e:
            prepared.append(e)
    return prepared


def finish_logs(
    paths: list[Path],
    prepared: list[Any],
    run: Callable[[Path, bytes, Path | None, str], tuple[int | None, str, str, Confinement] | None],
    *,
    keys: list[str | None],
    ruleset: str | None = None,
) -> list[CheckResult | TrainperfError]:
    """The second half of :func:`check_logs_with`, on what :func:`prepare_logs` gave for ``paths``."""
    done: list[Any] = []
    for p in prepared:
        outcome = run(p.path, p.data, p.config, p.ruleset) if isinstance(p, _Pending) else None
        done.append(p.finish(*outcome) if isinstance(p, _Pending) and outcome is not None else p)
    rest = [i for i, p in enumerate(done) if isinstance(p, _Pending)]
    checked = check_logs([paths[i] for i in rest], keys=[keys[i] for i in rest], ruleset=ruleset)
    for i, result in zip(rest, checked, strict=True):
        done[i] = result
    return done
