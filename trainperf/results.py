"""Reading MLLOG result files back (never evaluating anything in them).

A result file holds one timed run: its result is ``run_stop - run_start``, and every evaluation is on
the clock, between the two. :func:`timing_problems` finds what breaks that (a time that is not a finite
number, ``run_stop`` before ``run_start``, an ``eval_accuracy`` line outside the run);
:func:`parse_run` refuses such a file with a :class:`~trainperf.errors.ResultsError`, and the
compliance check (:mod:`trainperf.rules.compliance`) lists the same problems as rule violations.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainperf.errors import ResultsError

TOKEN = ":::MLLOG "
TIMING_FIX = (
    "a result file holds one whole run, with run_start <= every eval_accuracy <= run_stop; the file is damaged "
    "or was edited: restore it, or move it away and redo the run"
)


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


def _time_ms(rec: Mapping[str, Any]) -> float | None:
    """The record's ``time_ms`` as a float, or None when it is not a finite number."""
    t = rec.get("time_ms")
    if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
        return None
    return float(t)


def _ms(t: float) -> str:
    """A time_ms as written in logs: whole milliseconds without an exponent."""
    return f"{t:.0f}" if t.is_integer() else f"{t:.3f}"


def timing_problems(lines: Iterable[tuple[int, Mapping[str, Any]]]) -> list[str]:
    """What makes the run's duration or an evaluation impossible, one sentence each naming its log line.

    Checked: the first ``run_start`` and ``run_stop`` and every ``eval_accuracy`` have a finite
    ``time_ms``; ``run_stop`` is not before ``run_start`` (a negative duration); no ``eval_accuracy`` is
    timed before ``run_start`` or after ``run_stop`` (evaluation is on the clock, inside the run).
    """
    lines = list(lines)
    problems: list[str] = []
    bounds: dict[str, tuple[int, float]] = {}
    for key in ("run_start", "run_stop"):
        found = next(((n, rec) for n, rec in lines if rec.get("key") == key), None)
        if found is None:
            continue
        t = _time_ms(found[1])
        if t is None:
            problems.append(f"{key} at line {found[0]} has time_ms {found[1].get('time_ms')!r}, not a finite number")
        else:
            bounds[key] = (found[0], t)
    start, stop = bounds.get("run_start"), bounds.get("run_stop")
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
            problems.append(f"eval_accuracy at line {n} has time_ms {rec.get('time_ms')!r}, not a finite number")
        elif start and t < start[1]:
            problems.append(
                f"eval_accuracy at line {n} (time_ms {_ms(t)}) is before run_start at line {start[0]} "
                f"(time_ms {_ms(start[1])}): an evaluation outside the timed run"
            )
        elif stop and t > stop[1]:
            problems.append(
                f"eval_accuracy at line {n} (time_ms {_ms(t)}) is after run_stop at line {stop[0]} "
                f"(time_ms {_ms(stop[1])}): an evaluation outside the timed run"
            )
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

    @property
    def success(self) -> bool:
        return self.status == "success"


def parse_run(path: Path) -> LoggedRun:
    """The run logged in ``path``; a :class:`ResultsError` naming the line when its timing is impossible."""
    lines = read_mllog_lines(path)
    problems = timing_problems(lines)
    if problems:
        more = f" (and {len(problems) - 1} more such problem(s))" if len(problems) > 1 else ""
        raise ResultsError(f"{path}: {problems[0]}{more}; {TIMING_FIX}")
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
    )
