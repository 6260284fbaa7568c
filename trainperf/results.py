"""Reading MLLOG result files back (never evaluating anything in them).

A result file holds one timed run: its result is ``run_stop - run_start``, and every evaluation is on
the clock, between the two. :func:`timing_problems` finds what breaks that (a time that is not a finite
number, ``run_start`` or ``run_stop`` logged twice, ``run_stop`` before ``run_start``, an
``eval_accuracy`` line outside the run); :func:`record_problems` finds records of the wrong shape for
what the reader takes from them (``run_stop`` metadata that is not an object, an ``eval_accuracy`` value
that is not a number). :func:`parse_run` refuses such a file with a
:class:`~trainperf.errors.ResultsError` naming the file and the line, and the compliance check
(:mod:`trainperf.rules.compliance`) lists the timing problems as rule violations.
"""

from __future__ import annotations

import json
import math
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainperf.errors import ResultsError

TOKEN = ":::MLLOG "
TIMING_FIX = (
    "a result file holds one whole run, with run_start <= every eval_accuracy <= run_stop; the file is damaged "
    "or was edited: restore it, or move it away and redo the run"
)
RECORD_FIX = "the file is damaged, or was not written by an MLPerf logger: restore it, or move it away and redo the run"
ONCE = ("run_start", "run_stop")  # a run has exactly one of each: its result is run_stop - run_start
_LINES_SHOWN = 5  # line numbers listed in one message
_STRING_VALUES = ("submission_benchmark", "submission_platform", "trainperf_scale")  # read from their first line


def read_mllog_lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` of the file's MLLOG records, in order (line numbers count from 1)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise ResultsError(f"cannot read result file {path}: {e.strerror}") from None
    records = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        i = line.find(TOKEN)
        if i < 0:
            continue
        try:
            rec = json.loads(line[i + len(TOKEN) :])
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(rec, dict) and "key" in rec:
            records.append((lineno, rec))
    return records


def read_mllog(path: Path) -> list[dict[str, Any]]:
    """The MLLOG records of a file, in order; lines that are not MLLOG JSON are skipped."""
    return [rec for _, rec in read_mllog_lines(path)]


def first_values(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Each key's first logged value (events such as ``seed`` or ``trainperf_code`` are logged once)."""
    first: dict[str, Any] = {}
    for rec in records:
        key = rec.get("key")
        if isinstance(key, str) and key not in first:
            first[key] = rec.get("value")
    return first


def _time_ms(rec: Mapping[str, Any]) -> float | None:
    """The record's ``time_ms`` as a float, or None when it is not a finite number."""
    t = rec.get("time_ms")
    if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
        return None
    return float(t)


def _ms(t: float) -> str:
    """A time_ms as written in logs: whole milliseconds without an exponent."""
    return f"{t:.0f}" if t.is_integer() else f"{t:.3f}"


def _shown(x: Any, limit: int = 80) -> str:
    """A logged value as it appears in a message: its repr, cut short (a log can hold anything)."""
    text = repr(x)
    return text if len(text) <= limit else text[: limit - 4] + " ..."


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def timing_problems(lines: Iterable[tuple[int, Mapping[str, Any]]], *, after_stop: bool = False) -> list[str]:
    """What makes the run's duration or an evaluation impossible, one sentence each naming its log line.

    Checked: ``run_start`` and ``run_stop`` are logged at most once each (the official checker only warns
    about a copy with the same value); the first ``run_start`` and ``run_stop`` and every
    ``eval_accuracy`` have a finite ``time_ms``; ``run_stop`` is not before ``run_start`` (a negative
    duration); no ``eval_accuracy`` is timed before ``run_start`` or after ``run_stop`` (evaluation is
    on the clock, inside the run), unless ``after_stop``: the benchmark's reference evaluates its models
    once training is over (minigo), so evaluations after ``run_stop`` are part of its log; nor after the
    ``run_stop`` of a run that did not end with status ``success``.
    """
    lines = list(lines)
    problems: list[str] = []
    for key in ONCE:
        found = [str(n) for n, rec in lines if rec.get("key") == key]
        if len(found) > 1:
            where = (
                f"{', '.join(found[:-1])} and {found[-1]}"
                if len(found) <= _LINES_SHOWN
                else f"{found[0]}, {found[1]}, ..."
            )
            problems.append(
                f"{key} is logged {len(found)} times (lines {where}): a run has exactly one run_start and one "
                "run_stop, and its result is the time between them"
            )
    bounds: dict[str, tuple[int, float]] = {}
    for key in ONCE:
        found = next(((n, rec) for n, rec in lines if rec.get("key") == key), None)
        if found is None:
            continue
        t = _time_ms(found[1])
        if t is None:
            problems.append(
                f"{key} at line {found[0]} has time_ms {_shown(found[1].get('time_ms'))}, not a finite number"
            )
        else:
            bounds[key] = (found[0], t)
    start, stop = bounds.get("run_start"), bounds.get("run_stop")
    # An evaluation after the run_stop of a run that did not succeed buys nothing (the run is not a result):
    # NVIDIA's published v2.0 rnnt logs of a diverged run evaluate once more after run_stop 'aborted'.
    stop_record = next((rec for _, rec in lines if rec.get("key") == "run_stop"), None)
    stop_meta = stop_record.get("metadata") if stop_record is not None else None
    stop_status = stop_meta.get("status") if isinstance(stop_meta, Mapping) else None
    if start and stop and stop[1] < start[1]:
        problems.append(
            f"run_stop at line {stop[0]} (time_ms {_ms(stop[1])}) is before run_start at line {start[0]} "
            f"(time_ms {_ms(start[1])}): a negative duration of {(stop[1] - start[1]) / 60000.0:.4g} minutes"
        )
        stop = None  # one problem, not one more for each evaluation after this run_stop
    elif start and stop and not math.isfinite(stop[1] - start[1]):
        problems.append(f"run_stop at line {stop[0]} minus run_start at line {start[0]} is not a finite duration")
    for n, rec in lines:
        if rec.get("key") != "eval_accuracy":
            continue
        t = _time_ms(rec)
        if t is None:
            problems.append(f"eval_accuracy at line {n} has time_ms {_shown(rec.get('time_ms'))}, not a finite number")
        elif start and t < start[1]:
            problems.append(
                f"eval_accuracy at line {n} (time_ms {_ms(t)}) is before run_start at line {start[0]} "
                f"(time_ms {_ms(start[1])}): an evaluation outside the timed run"
            )
        elif stop and t > stop[1] and not after_stop and stop_status == "success":
            problems.append(
                f"eval_accuracy at line {n} (time_ms {_ms(t)}) is after run_stop at line {stop[0]} "
                f"(time_ms {_ms(stop[1])}): an evaluation outside the timed run"
            )
    return problems


def record_problems(lines: Iterable[tuple[int, Mapping[str, Any]]]) -> list[str]:
    """Records that :func:`parse_run` cannot read, one sentence each naming the log line and the field.

    Checked: every ``key`` is a string; the first ``submission_benchmark``, ``submission_platform`` and
    ``trainperf_scale`` values are strings; the first ``run_stop``'s metadata is an object with a
    string ``status``; every ``eval_accuracy`` has metadata that is an object (or none), an
    ``epoch_num`` that is a number, and a value that is a number or an object of numbers (a
    multi-field metric).
    """
    problems: list[str] = []
    seen: set[str] = set()
    for n, rec in lines:
        key = rec.get("key")
        if not isinstance(key, str):
            problems.append(f"the record at line {n} has key {_shown(key)}, not a string")
            continue
        first = key not in seen
        seen.add(key)
        value, meta = rec.get("value"), rec.get("metadata")
        if first and key in _STRING_VALUES and not isinstance(value, str):
            problems.append(f"{key} at line {n} has value {_shown(value)}; it must be a string")
        if key == "run_stop" and first:
            if not isinstance(meta, dict):
                problems.append(
                    f"run_stop at line {n} has metadata {_shown(meta)}; it must be an object such as "
                    '{"status": "success"}'
                )
            elif not isinstance(meta.get("status"), str):
                problems.append(
                    f"run_stop at line {n} has status {_shown(meta.get('status'))} in its metadata; "
                    "it must be a string, 'success' or 'aborted'"
                )
        if key != "eval_accuracy":
            continue
        if meta is not None and not isinstance(meta, dict):
            problems.append(
                f"eval_accuracy at line {n} has metadata {_shown(meta)}; "
                'it must be an object such as {"epoch_num": 1}'
            )
        elif isinstance(meta, dict) and "epoch_num" in meta and not _is_number(meta["epoch_num"]):
            problems.append(f"eval_accuracy at line {n} has epoch_num {_shown(meta['epoch_num'])}; it must be a number")
        if isinstance(value, dict):
            if not value or not all(_is_number(v) for v in value.values()):
                problems.append(
                    f"eval_accuracy at line {n} has value {_shown(value)}; "
                    'a multi-field metric is an object of numbers, such as {"BBOX": 0.38, "SEGM": 0.34}'
                )
        elif not _is_number(value):
            problems.append(f"eval_accuracy at line {n} has value {_shown(value)}; it must be a number (the quality)")
    return problems


@dataclass(frozen=True, kw_only=True)
class LoggedRun:
    path: Path
    benchmark: str | None
    platform: str | None
    scale: str
    seed: int | None
    status: str | None  # None when the log has no run_stop
    minutes: float | None
    curve: list[tuple[float, float, float]]  # (minutes since run_start, progress as logged in epoch_num, quality)
    start_ms: float | None = None  # run_start's time_ms; None when the log has no run_start
    evaluations: list[Any] = field(default_factory=list)  # eval_accuracy values as logged: numbers or objects
    abort_reason: str | None = None  # trainperf_abort_reason: why a run that did not finish ended

    @property
    def success(self) -> bool:
        return self.status == "success"


def parse_run(path: Path, *, evaluated_after_stop: Container[str] = frozenset()) -> LoggedRun:
    """The run logged in ``path``; a :class:`ResultsError` naming the line when a record cannot be read
    (:func:`record_problems`) or the timing is impossible (:func:`timing_problems`). A log whose
    ``submission_benchmark`` is in ``evaluated_after_stop`` (``registry.evaluated_after_run_stop()``) may log
    evaluations after ``run_stop``."""
    lines = read_mllog_lines(path)
    logged = next((rec.get("value") for _, rec in lines if rec.get("key") == "submission_benchmark"), None)
    timing = timing_problems(lines, after_stop=isinstance(logged, str) and logged in evaluated_after_stop)
    for problems, fix in ((record_problems(lines), RECORD_FIX), (timing, TIMING_FIX)):
        if problems:
            more = f" (and {len(problems) - 1} more such problem(s))" if len(problems) > 1 else ""
            raise ResultsError(f"{path}: {problems[0]}{more}; {fix}")
    records = [rec for _, rec in lines]
    first: dict[str, Any] = {}
    for rec in records:
        first.setdefault(rec["key"], rec)
    start = first.get("run_start")
    stop = first.get("run_stop")
    t0 = _time_ms(start) if start else None
    minutes = None
    if start and stop:
        minutes = (float(stop["time_ms"]) - float(start["time_ms"])) / 60000.0
    curve = []
    evaluations = []
    for rec in records:
        if rec["key"] != "eval_accuracy":
            continue
        evaluations.append(rec.get("value"))
        if t0 is not None:
            meta = rec.get("metadata") or {}
            value = rec["value"]
            if isinstance(value, dict):  # a multi-field metric: its first field is the headline
                value = next(iter(value.values()), float("nan"))
            curve.append(((float(rec["time_ms"]) - t0) / 60000.0, float(meta.get("epoch_num", 0)), float(value)))
    status = ((stop or {}).get("metadata") or {}).get("status")
    reason = (first.get("trainperf_abort_reason") or {}).get("value")
    return LoggedRun(
        path=path,
        benchmark=(first.get("submission_benchmark") or {}).get("value"),
        platform=(first.get("submission_platform") or {}).get("value"),
        scale=(first.get("trainperf_scale") or {}).get("value", "reference"),
        seed=(first.get("seed") or {}).get("value"),
        status=status,
        minutes=minutes,
        curve=curve,
        start_ms=t0,
        evaluations=evaluations,
        abort_reason=reason if isinstance(reason, str) else None,
    )
