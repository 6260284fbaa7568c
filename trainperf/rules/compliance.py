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
import importlib.util
import json
import math
import operator
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainperf import limits, registry
from trainperf.confine import Confinement, confinement
from trainperf.errors import DataError, NotAvailableError, TrainperfError, UsageError
from trainperf.registry import BENCHMARKS
from trainperf.results import TOKEN, mllog_lines
from trainperf.rules import gate, mini_rules, rulesets
from trainperf.run_checks import ONCE, timing_problems
from trainperf.spec import MLPERF_RULESET, SCALES

CHECKER_MODULE = "mlperf_logging.compliance_checker"
CHECKER_TIMEOUT_S = 120
TARGET_PROBLEM = "quality target not reached"  # every target problem starts with this
# every problem found by the gate (trainperf.rules.gate) starts with this
GATE_PROBLEM = "refused before the official checker read it"
# every problem with the run's timing starts with this (the official checker orders lines but never compares times)
TIMING_PROBLEM = (
    f"timing rule (MLPerf Training v{MLPERF_RULESET}: the result is run_stop - run_start, and every evaluation "
    "is on the clock)"
)
_SEPARATOR = "\n" + "-" * 30 + "\n"  # how the checker joins its messages
_RECORD_FIELDS = ("time_ms", "key", "value", "metadata")  # the checker crashes when one is missing
_SHOWN = 10  # names listed before "... and N more"
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


def is_target_only_failure(result: CheckResult) -> bool:
    """True when the log failed and every problem is the quality target (e.g. a reference dry run)."""
    return not result.passed and bool(result.problems) and all(p.startswith(TARGET_PROBLEM) for p in result.problems)


# --- reading the log ------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Line:
    lineno: int  # 1-based line number in the file
    record: dict[str, Any] | None  # None: not valid JSON
    error: str = ""
    text: str = ""  # the JSON text as the checker reads it (latin-1)


def _read_bytes(path: Path) -> bytes:
    """The log's bytes, read once: the gate, the explanations and the checker all see these same bytes."""
    where = gate.printable(str(path))
    if not path.exists():
        raise UsageError(f"log file {where} does not exist")
    if not path.is_file():
        raise UsageError(f"{where} is not a file: give the path of one MLLOG file (e.g. result_0.txt)")
    try:
        return limits.read_capped(path.resolve(), limits.MAX_RESULT_BYTES)
    except ValueError as e:
        raise DataError(
            f"{where} {e}: refused unread (MLPerf result logs are well under 1 MiB); is it the log of one run?"
        ) from None
    except OSError as e:
        raise UsageError(f"cannot read {where}: {e.strerror}") from None


def _read_log(path: Path, data: bytes) -> list[_Line]:
    """MLLOG records in checker order (its "line N" counts these records from 0), read as the checker reads them."""
    try:
        lines = [_Line(ln.lineno, ln.record, ln.error, ln.text) for ln in mllog_lines(data)]
    except limits.OverLimit as e:
        raise DataError(
            f"{gate.printable(str(path))} {e}: refused before the official checker read it (MLPerf result logs are "
            "far within that); is it the log of one run?"
        ) from None
    if not lines:
        raise DataError(
            f"{path} has no MLLOG lines (lines with '{TOKEN.strip()} {{json}}'): "
            "is it the log of a trainperf or MLPerf run?"
        )
    return lines


def _records(lines: list[_Line], key: str) -> list[tuple[int, dict[str, Any]]]:
    return [(ln.lineno, ln.record) for ln in lines if ln.record is not None and ln.record.get("key") == key]


def _first_value(lines: list[_Line], key: str) -> Any:
    found = _records(lines, key)
    return found[0][1].get("value") if found else None


def _metadata(record: dict[str, Any]) -> dict[str, Any]:
    md = record.get("metadata")
    return md if isinstance(md, dict) else {}


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _short(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f", ... and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def _metric_fields(benchmark: str | None) -> tuple[str, ...]:
    """The fields of a benchmark's multi-field metric, as its reference spec (MLPerf's) declares; () for one number."""
    if benchmark not in BENCHMARKS:
        return ()
    from trainperf import registry

    spec = registry.benchmark(benchmark).specs.get("reference")
    return tuple(f for f, _ in spec.field_targets) if spec is not None else ()


def _preflight(lines: list[_Line], benchmark: str | None, ruleset: str = MLPERF_RULESET) -> list[str]:
    """Problems that crash the official checker, found before running it."""
    problems = []
    if benchmark is not None and benchmark not in rulesets.benchmarks(ruleset):
        problems.append(
            f"unknown benchmark {benchmark!r} in submission_benchmark: the MLPerf Training "
            f"{rulesets.round_name(ruleset)} benchmarks are {', '.join(rulesets.benchmarks(ruleset))}"
        )
    incomplete = [
        f"{ln.lineno} (no {', '.join(repr(k) for k in _RECORD_FIELDS if k not in ln.record)})"
        for ln in lines
        if ln.record is not None and not all(k in ln.record for k in _RECORD_FIELDS)
    ]
    if incomplete:
        problems.append(
            "MLLOG records must have the fields time_ms, key, value and metadata; incomplete "
            f"at line {_short(incomplete)}"
        )
    fields = _metric_fields(benchmark)
    for lineno, rec in _records(lines, "eval_accuracy"):
        value = rec.get("value")
        if fields:  # a multi-field metric: MLPerf logs an object with a number per field
            ok = isinstance(value, dict) and all(_is_number(value.get(f)) for f in fields)
            need = f"an object with numbers {' and '.join(fields)}"
        else:
            ok = _is_number(value)
            need = "a number"
        if not ok:
            problems.append(f"the eval_accuracy line at log line {lineno} has value {value!r}; it must be {need}")
            break
    return problems


# --- running the checker --------------------------------------------------------------------------
def _checker_dir() -> Path:
    spec = importlib.util.find_spec(CHECKER_MODULE)
    if spec is None or spec.origin is None:
        raise NotAvailableError("the MLCommons compliance checker is not installed: pip install mlperf-logging")
    return Path(spec.origin).parent


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
        env = {**os.environ, "PYTHONHASHSEED": "0"}  # the checker prints sets; keep its output stable
        try:
            proc = subprocess.run(
                confined.wrap(cmd),
                cwd=tmp,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=CHECKER_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
            err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
            return None, out, err, confined
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
        env = {**os.environ, "PYTHONHASHSEED": "0"}  # the checker prints sets; keep its output stable
        try:
            subprocess.run(
                confined.wrap(cmd),
                cwd=tmp,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=CHECKER_TIMEOUT_S * len(items),
                check=False,
            )
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


def _messages(stderr: str) -> list[str]:
    """The checker's messages: one WARNING block after the last 'Compliance checks' line."""
    starts = [m.end() for m in re.finditer(r"^INFO -  Compliance checks: .*$", stderr, re.MULTILINE)]
    tail = stderr[starts[-1] :] if starts else stderr
    begin = tail.find("\nWARNING -  ")
    if begin < 0:
        return []
    block = tail[begin + len("\nWARNING -  ") :]
    block = re.split(r"\n(?:ERROR - FAILED|INFO - SUCCESS|Traceback \(most recent call last\))", block)[0]
    return [m.strip() for m in block.split(_SEPARATOR) if m.strip()]


# --- explaining the checker's messages ------------------------------------------------------------
_OPS = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}
_COMPARISON = re.compile(
    r"v\['value'\](?:\['(?P<field>\w+)'\])?\s*(?P<op>>=|<=|>|<)\s*(?P<num>[-+]?[\d.]+(?:e[-+]?\d+)?)"
)
_STATE_CHECKS = {
    "s['init_started']": "comes before any init_start",
    "not s['init_stopped']": "comes after init_stop (initialization was already over)",
    "not s['run_started']": "comes after run_start",
    "s['run_started']": "comes before run_start",
    "( s['init_stopped'] == True )": "comes before init_stop",
    "v['metadata']['epoch_count'] > 0": "has metadata epoch_count that is not positive",
}


def _explain_line_check(test: str, value: Any) -> str:
    test = test.strip()
    if test in _STATE_CHECKS:
        return _STATE_CHECKS[test]
    if "compile_time_mins" in test:
        return (
            "comes too long after the first init_start: untimed initialization may last at most 30 "
            "minutes (closed) or 240 minutes (open)"
        )
    if m := re.fullmatch(r"'(\w+)' in v\['metadata'\]", test):
        return f"lacks metadata '{m[1]}'"
    if m := re.fullmatch(r"'(\w+)' in v\['value'\]", test):
        return f"has no field '{m[1]}' in its value {value!r}"
    if m := re.fullmatch(r"v\['value'\] in (\[.*\])", test):
        return f"has value {value!r}, which is not one of {m[1]}"
    if test == "v['value'] != ''":
        return "has an empty value"
    if m := re.fullmatch(r"v\['value'\] (==|!=|>=|<=|>|<) (.+)", test):
        return f"has value {value!r}, but the rule needs value {m[1]} {m[2]}"
    return f"has value {value!r}, which breaks the official rule `{test}`"


def _explain_target(expr: str, lines: list[_Line]) -> str:
    expr = " ".join(expr.split())
    values = [rec.get("value") for _, rec in _records(lines, "eval_accuracy")]
    comps = [(m["field"], m["op"], float(m["num"])) for m in _COMPARISON.finditer(expr)]
    targets = [c for c in comps if c[1] in (">=", "<=")]
    if not targets:  # the open rules' sanity bound, e.g. v['value'] < 1.0
        return (
            f"no eval_accuracy line passes the official check `{expr}`: a perfect score is rejected "
            f"(values in log: {_short([repr(v) for v in values])})"
        )

    def get(value: Any, fld: str | None) -> float | None:
        x = value.get(fld) if fld and isinstance(value, dict) else (None if fld else value)
        return float(x) if _is_number(x) and not math.isnan(x) else None

    def reaches(value: Any) -> bool:
        got = [(get(value, f), op, t) for f, op, t in targets]
        return all(x is not None and _OPS[op](x, t) for x, op, t in got)

    best = []
    for fld, op, _ in targets:
        xs = [x for x in (get(v, fld) for v in values) if x is not None]
        pick = (max if op == ">=" else min)(xs) if xs else None
        best.append(f"{fld + ' ' if fld else ''}{'none' if pick is None else f'{pick:g}'}")
    cond = " and ".join(f"v['value']{f'[{f!r}]' if f else ''} {op} {t:g}" for f, op, t in targets)
    if any(reaches(v) for v in values):
        return (
            f"no eval_accuracy line passes the official check `{expr}`: the values that reach "
            f"{cond} are outside its valid range"
        )
    return f"{TARGET_PROBLEM}: no eval_accuracy line has {cond} (best in log: {', '.join(best)})"


def _expected_tensors(benchmark: str, ruleset: str = MLPERF_RULESET) -> list[str] | None:
    """The reference tensor names of closed_<benchmark>.yaml, read as data (never evaluated)."""
    import yaml  # installed with mlperf-logging

    path = _checker_dir() / f"training_{ruleset}" / f"closed_{benchmark}.yaml"
    try:
        records = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    except (OSError, yaml.YAMLError):
        return None
    for rec in records:
        checks = rec.get("END", {}).get("CHECK", []) if isinstance(rec, dict) else []
        for check in [checks] if isinstance(checks, str) else checks:
            if "initialized_tensors" in check and "==" in check:
                return re.findall(r"""["']([^"']+)["']""", check.split("==", 1)[1])
    return None


def _explain_tensors(lines: list[_Line], benchmark: str | None, ruleset: str = MLPERF_RULESET) -> str:
    logged = Counter(
        str(_metadata(rec).get("tensor"))
        for _, rec in _records(lines, "weights_initialization")
        if "tensor" in _metadata(rec)
    )
    known = benchmark in rulesets.benchmarks(ruleset)
    expected = Counter(_expected_tensors(benchmark, ruleset) or []) if known else Counter()
    if not expected:
        return (
            "weights_initialization: the tensor list does not match the reference model's "
            f"({sum(logged.values())} tensors logged)"
        )
    missing = sorted((expected - logged).elements())
    unexpected = sorted((logged - expected).elements())
    parts = [f"missing: {_short(missing)}"] if missing else []
    parts += [f"unexpected: {_short(unexpected)}"] if unexpected else []
    return (
        f"weights_initialization: the reference tensor list does not match ({'; '.join(parts)}); "
        f"log one event per tensor of the reference model ({sum(expected.values())} in "
        f"training_{ruleset}/closed_{benchmark}.yaml), under those names"
    )


def _explain_end(test: str, lines: list[_Line], benchmark: str | None, ruleset: str = MLPERF_RULESET) -> str:
    test = test.strip()
    if test == mini_rules.DIVISION_CHECK:
        return (
            f"mini logs must declare MLPerf division 'open' (submission_division is "
            f"{_first_value(lines, 'submission_division')!r}): the closed v{MLPERF_RULESET} rules "
            "enforce the reference target and model; trainperf's own division goes in trainperf_division"
        )
    if test == mini_rules.STATUS_CHECK:
        stops = _records(lines, "run_stop")
        if not stops:
            return "the run has no run_stop line, so it did not end with status 'success'"
        status = _metadata(stops[0][1]).get("status")
        return f"the run stopped with status {status!r}, not 'success': only successful runs count"
    if test == mini_rules.RANGE_CHECK:
        bad = [rec.get("value") for _, rec in _records(lines, "eval_accuracy")]
        bad = [v for v in bad if not (isinstance(v, dict) or (_is_number(v) and 0 <= v <= 1))]
        return f"eval_accuracy values must lie in [0, 1]; the log has {', '.join(map(repr, bad[:5]))}"
    if test.startswith("sorted(s['initialized_tensors'])"):
        return _explain_tensors(lines, benchmark, ruleset)
    return f"the log breaks the official end-of-log rule `{' '.join(test.split())}`"


def _line_of(full: str, lines: list[_Line]) -> tuple[int | None, dict[str, Any]]:
    """The line and record of a line the checker prints (its ``full_string``: the token and the JSON text)."""
    text = full.strip()[len(TOKEN) :] if full.strip().startswith(TOKEN) else None
    for ln in lines:
        if ln.record is not None and ln.text == text:
            return ln.lineno, ln.record
    try:
        record = json.loads(text) if text is not None else {}
    except (ValueError, RecursionError):
        record = {}
    record = record if isinstance(record, dict) else {}
    for ln in lines:
        if ln.record == record:
            return ln.lineno, record
    return None, record


_EXACTLY_ONE = re.compile(
    r"Required EXACTLY_ONE occurrence of '([^']+)' but found (\d+)( with different values: (.*))?$"
)


def _explain(
    msg: str, lines: list[_Line], benchmark: str | None, ruleset: str = MLPERF_RULESET
) -> tuple[str | None, str | None]:
    """(problem, warning) for one checker message; exactly one of them is set."""
    first = msg.splitlines()[0]
    if m := _EXACTLY_ONE.match(first):
        key, n = m[1], int(m[2])
        if n > 1 and not m[3]:
            return None, f"'{key}' is logged {n} times with the same value; the rules ask for exactly one"
        extra = f" (with different values: {m[4]})" if m[3] else ""
        return f"the log must contain exactly one '{key}' line but has {n}{extra}", None
    if m := re.match(r"Required AT_LEAST_ONE occurrence of '([^']+)' but found (\d+)$", first):
        return f"the log must contain at least one '{m[1]}' line but has none", None
    if m := re.match(r"Required AT_LEAST\((\d+)\) occurrence of '([^']+)' but found (\d+)$", first):
        return f"the log must contain at least {m[1]} '{m[2]}' lines but has {m[3]}", None
    if m := re.match(r"Required AT_LEAST_ONE occurrence of (.+)$", first):
        names = " or ".join(f"'{k}'" for k in sorted(re.findall(r"'([^']+)'", m[1])))
        return f"the log must contain at least one {names} line but has none", None
    if m := re.match(r"Failed checks for (\S+) :(.*)$", first):
        if m[1] == "eval_accuracy":
            return _explain_target(m[2], lines), None
        return f"no '{m[1]}' line passes the official check `{m[2].strip()}`", None
    if m := re.match(
        r"CHECK for '([^']*)' failed in line (\d+):\n(.*?)\nfailed test: (.*?)\ncurrent context", msg, re.DOTALL
    ):
        index = int(m[2])  # the checker counts MLLOG records from 0
        if index < len(lines) and lines[index].record is not None:
            lineno, record = lines[index].lineno, lines[index].record
        else:
            lineno, record = _line_of(m[3], lines)
        where = f"at log line {lineno}" if lineno else f"(MLLOG record {index + 1})"
        return f"the '{m[1]}' line {where} {_explain_line_check(m[4], record.get('value'))}", None
    if m := re.match(
        r"Failed executing CHECK code:\n(.*?)\ntriggered by line:\n(.*?)\ncurrent context", msg, re.DOTALL
    ):
        lineno, record = _line_of(m[2], lines)
        return (
            f"the '{record.get('key')}' line at log line {lineno} could not be checked against "
            f"`{m[1].strip()}`: its value {record.get('value')!r} or its metadata has the wrong type"
        ), None
    if m := re.match(r"Failed executing code (\w+) code triggered by line :\n(.*)", msg, re.DOTALL):
        lineno, record = _line_of(m[2], lines)
        return (
            f"the '{record.get('key')}' line at log line {lineno} has a value or metadata the "
            "official rules cannot read"
        ), None
    if m := re.match(r"failed test: (.*?)\ncurrent context", msg, re.DOTALL):
        return _explain_end(m[1], lines, benchmark, ruleset), None
    if m := re.match(r"Failed executing CHECK code:\n(.*?)\ncurrent context", msg, re.DOTALL):
        return f"the official end-of-log rule `{' '.join(m[1].split())}` could not be evaluated on this log", None
    if m := re.match(r"Could not find config file: (.*)$", first):
        return f"the rule file {m[1]} does not exist", None
    if first.startswith("Log lines had parsing errors"):
        bad = [str(ln.lineno) for ln in lines if ln.record is None]
        where = f" (line {_short(bad)}: {next(ln.error for ln in lines if ln.record is None)})" if bad else ""
        return f"some MLLOG lines are not valid JSON records{where}; fix or remove them", None
    if first.startswith("No log lines detected"):
        return "the log has no MLLOG lines", None
    return f"the official checker reports: {first}", None


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


def _ruleset_of(path: Path, lines: list[_Line], scale: str, given: str | None) -> tuple[str, list[str]]:
    """(the ruleset a log is checked by, a warning saying so where it was inferred): see
    :mod:`trainperf.rules.rulesets`. Mini logs are checked by trainperf's mini rules, built on v2.0's."""
    if scale == "mini":
        if given is not None and rulesets.normalize(given) != MLPERF_RULESET:
            raise UsageError(
                f"a mini log is checked by trainperf's mini rules, which build on the v{MLPERF_RULESET} rules; "
                f"--ruleset {given} applies to reference-scale logs only"
            )
        return MLPERF_RULESET, []
    records = [ln.record for ln in lines if ln.record is not None]
    starts = [d for _, rec in _records(lines, "run_start") if (d := rulesets.log_date(rec.get("time_ms")))]
    logged = _first_value(lines, "submission_benchmark")
    chosen, why, inferred = rulesets.package_ruleset(
        given=given,
        path=path,
        trainperf_logs=rulesets.is_trainperf_log(records),
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
    data = _read_bytes(path)
    lines = _read_log(path, data)
    if scale is None:
        logged = _first_value(lines, "trainperf_scale")
        scale = "reference" if logged is None else logged
        if scale not in SCALES:
            raise DataError(
                f"{path}: trainperf_scale is {logged!r}, not one of {', '.join(SCALES)}; "
                "fix the log or choose the scale explicitly"
            )
    elif scale not in SCALES:
        raise UsageError(f"unknown scale {scale!r}: choose one of {', '.join(SCALES)}")
    logged_benchmark = _first_value(lines, "submission_benchmark")
    benchmark = key if key is not None else logged_benchmark
    if key is not None and key not in BENCHMARKS and key not in rulesets.all_benchmarks():
        raise UsageError(f"unknown benchmark {key!r}: the benchmarks are {', '.join(BENCHMARKS)}")
    chosen, noted = _ruleset_of(path, lines, scale, ruleset)
    if config is not None:
        config = Path(config).resolve()
        if not config.is_file():
            raise UsageError(f"rule file {config} does not exist")
    elif scale == "mini" and benchmark in BENCHMARKS:
        config = mini_rules.shipped_rule_path(benchmark).resolve()
        if not config.is_file():
            raise NotAvailableError(
                f"no mini rule file for {benchmark!r} at {config}: regenerate the "
                "shipped files with `python -m trainperf.rules.mini_rules`"
            )

    def result(
        passed: bool, problems: list[str], raw: str, warnings: list[str] | None = None, confined: str = ""
    ) -> CheckResult:
        return CheckResult(
            path=path,
            passed=passed,
            scale=scale,
            benchmark=benchmark,
            ruleset=chosen,
            config=config,
            problems=list(dict.fromkeys(problems)),
            raw=raw,
            warnings=list(dict.fromkeys(noted + (warnings or []))),
            confinement=confined,
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

    timing = [
        f"{TIMING_PROBLEM}: {p}; the log is damaged or was edited: restore it, or redo the run"
        for p in timing_problems(
            ((ln.lineno, ln.record) for ln in lines if ln.record is not None),
            after_stop=benchmark in registry.evaluated_after_run_stop(),
        )
    ]
    problems = _preflight(lines, benchmark, chosen)
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

    _checker_dir()  # a clear error when mlperf-logging is missing
    return _Pending(
        path=path,
        data=data,
        config=config,
        finish=lambda rc, out, err, confined: _finish(rc, out, err, confined, lines, benchmark, timing, result, chosen),
        ruleset=chosen,
    )


def _finish(
    rc: int | None,
    out: str,
    err: str,
    confined: Confinement,
    lines: list[_Line],
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
    repeated = {key for key in ONCE if len(_records(lines, key)) > 1}
    for msg in _messages(err):
        if (m := _EXACTLY_ONE.match(msg.splitlines()[0])) and m[1] in repeated:
            continue
        problem, warning = _explain(msg, lines, benchmark, ruleset)
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
    for new, (old, why) in rulesets.RENAMED_AFTER.get(ruleset, {}).items() if not crashed else ():
        text = f"the log must contain exactly one '{new}' line but has 0"
        if text in problems and len(_records(lines, old)) == 1:
            moved.append(text)
            warnings.append(f"{text} ({why})")
    problems = [p for p in problems if p not in moved]
    if rc != 0 and not problems and not moved:
        problems.append(f"the official checker failed (exit code {rc}) without a message; see raw")
    passed = (rc == 0 or bool(moved)) and not problems
    res = result(passed, problems, raw, warnings, confined.note)
    return dataclasses.replace(res, round_only=passed and rc != 0)



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
    done: list[Any] = []
    for i, path in enumerate(paths):
        try:
            p = _prepare(Path(path), key=keys[i], ruleset=ruleset)
        except TrainperfError as e:
            p = e
        outcome = run(p.path, p.data, p.config, p.ruleset) if isinstance(p, _Pending) else None
        done.append(p.finish(*outcome) if isinstance(p, _Pending) and outcome is not None else p)
    rest = [i for i, p in enumerate(done) if isinstance(p, _Pending)]
    checked = check_logs([paths[i] for i in rest], keys=[keys[i] for i in rest], ruleset=ruleset)
    for i, result in zip(rest, checked, strict=True):
        done[i] = result
    return done
