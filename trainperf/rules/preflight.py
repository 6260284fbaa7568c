"""A log as the official checker reads it, and what trainperf checks before the checker runs (the preflight): the
log's bytes (read once, under a size cap), its MLLOG records in the checker's order, and the problems that would
crash the checker. Used by :mod:`trainperf.rules.compliance`; nothing in a log is evaluated.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainperf import limits, registry
from trainperf.errors import DataError, NotAvailableError, UsageError
from trainperf.registry import BENCHMARKS
from trainperf.results import TOKEN, mllog_lines
from trainperf.rules import gate, rulesets
from trainperf.run_checks import is_number
from trainperf.spec import MLPERF_RULESET

CHECKER_MODULE = "mlperf_logging.compliance_checker"
_RECORD_FIELDS = ("time_ms", "key", "value", "metadata")  # the checker crashes when one is missing
_SHOWN = 10  # names listed before "... and N more"


@dataclass(frozen=True)
class Line:
    """One MLLOG record of a log, as the official checker reads it."""

    lineno: int  # 1-based line number in the file
    record: dict[str, Any] | None  # None: not valid JSON
    error: str = ""
    text: str = ""  # the JSON text as the checker reads it (latin-1)


def read_bytes(path: Path) -> bytes:
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


def read_log(path: Path, data: bytes) -> list[Line]:
    """MLLOG records in checker order (its "line N" counts these records from 0), read as the checker reads them."""
    try:
        lines = [Line(ln.lineno, ln.record, ln.error, ln.text) for ln in mllog_lines(data)]
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


def records(lines: list[Line], key: str) -> list[tuple[int, dict[str, Any]]]:
    return [(ln.lineno, ln.record) for ln in lines if ln.record is not None and ln.record.get("key") == key]


def first_value(lines: list[Line], key: str) -> Any:
    found = records(lines, key)
    return found[0][1].get("value") if found else None


def metadata(record: dict[str, Any]) -> dict[str, Any]:
    md = record.get("metadata")
    return md if isinstance(md, dict) else {}


def short(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f", ... and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def metric_fields(benchmark: str | None) -> tuple[str, ...]:
    """The fields of a benchmark's multi-field metric, as its reference spec (MLPerf's) declares; () for one number."""
    if benchmark not in BENCHMARKS:
        return ()
    spec = registry.benchmark(benchmark).specs.get("reference")
    return tuple(f for f, _ in spec.field_targets) if spec is not None else ()


def preflight(lines: list[Line], benchmark: str | None, ruleset: str = MLPERF_RULESET) -> list[str]:
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
            f"at line {short(incomplete)}"
        )
    fields = metric_fields(benchmark)
    for lineno, rec in records(lines, "eval_accuracy"):
        value = rec.get("value")
        if fields:  # a multi-field metric: MLPerf logs an object with a number per field
            ok = isinstance(value, dict) and all(is_number(value.get(f)) for f in fields)
            need = f"an object with numbers {' and '.join(fields)}"
        else:
            ok = is_number(value)
            need = "a number"
        if not ok:
            problems.append(f"the eval_accuracy line at log line {lineno} has value {value!r}; it must be {need}")
            break
    return problems


def checker_dir() -> Path:
    """The installed compliance checker's folder (its rule files are under it); a clear error when it is missing."""
    spec = importlib.util.find_spec(CHECKER_MODULE)
    if spec is None or spec.origin is None:
        raise NotAvailableError("the MLCommons compliance checker is not installed: pip install mlperf-logging")
    return Path(spec.origin).parent
