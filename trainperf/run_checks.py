"""Whether a logged run is possible: the checks every reader of a result file makes on its records.

A result file holds one timed run: its result is ``run_stop - run_start``, and every evaluation is on
the clock, between the two. :func:`timing_problems` finds what breaks that (a time that is not a whole
number of milliseconds between 2000 and 2100, ``run_start`` or ``run_stop`` logged twice, ``run_stop``
before ``run_start`` or more than a week after it, an ``eval_accuracy`` line outside the run);
:func:`record_problems` finds records of the wrong shape for what the reader takes from them (``run_stop``
metadata that is not an object, an ``eval_accuracy`` value that is not a number); :func:`impossible_quality`
a quality no metric can take. :func:`trainperf.results.parse_run` refuses such a file with a
:class:`~trainperf.errors.ResultsError` naming the file and the line, and the compliance check
(:mod:`trainperf.rules.compliance`) lists the timing problems as rule violations.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from trainperf.timeline import check_timeline

TIMING_FIX = (
    "a result file holds one whole run, with run_start <= every training record and eval_accuracy <= run_stop; the "
    "file is damaged "
    "or was edited: restore it, or move it away and redo the run"
)
RECORD_FIX = "the file is damaged, or was not written by an MLPerf logger: restore it, or move it away and redo the run"
# A plausible time_ms, in milliseconds since 1970-01-01 (UTC): MLPerf Training began in 2018, so a clock before 2000 or
# after 2100 is a wrong clock or an edited log.
EARLIEST_MS = 946_684_800_000  # 2000-01-01T00:00:00Z
LATEST_MS = 4_102_444_800_000  # 2100-01-01T00:00:00Z
# The longest run_stop - run_start read as a result. The v2.0 rules (training_rules.adoc) bound the untimed
# initialization (30 minutes closed, 4 hours open) but not the timed run; a week is far above any real run: the
# slowest score MLCommons published from v0.6 to v5.1 is 1,197 minutes (20 hours; shared/data/
# mlperf_training_results.csv), the longest of the 2,760 published v2.0 result files ran 10.1 hours (an H3C
# minigo run), and trainperf's own runaway guard stops a reference run after 24 hours (each reference spec's
# max_minutes).
MAX_RUN_MS = 7 * 86_400_000
MAX_RUN_WHY = "the slowest score MLCommons has published, v0.6 to v5.1, is 20 hours"
ONCE = ("run_start", "run_stop")  # a run has exactly one of each: its result is run_stop - run_start
_LINES_SHOWN = 5  # line numbers listed in one message
_STRING_VALUES = ("submission_benchmark", "submission_platform", "trainperf_scale")  # read from their first line


def logged_ms(rec: Mapping[str, Any]) -> int | None:
    """The record's ``time_ms`` as an exact int, or None when it is not a plausible time (:func:`time_problem`)."""
    t = rec.get("time_ms")
    return int(t) if time_problem(t) is None else None


def _finite(t: int | float | Decimal) -> bool:
    if isinstance(t, Decimal):
        return t.is_finite()
    return not isinstance(t, float) or math.isfinite(t)  # an int is finite, however large (math would overflow)


def _whole(t: int | float | Decimal) -> bool:
    if isinstance(t, Decimal):
        return t == t.to_integral_value()
    return not isinstance(t, float) or t.is_integer()


def time_problem(t: Any) -> str | None:
    """Why ``t`` is not the ``time_ms`` of an event of a run (None: it is), as the end of a sentence.

    A time is a whole number of milliseconds since 1970 (UTC) from :data:`EARLIEST_MS` to :data:`LATEST_MS`.
    Compared exactly: an int is never turned into a float, whose 53 bits would lose the milliseconds of a
    time shifted far into the future (10^22 + t and 10^22 + t' are the same float).
    """
    if isinstance(t, bool) or not isinstance(t, int | float | Decimal) or not _finite(t):
        return f"has time_ms {_shown(t)}, not a finite number"
    if not _whole(t):
        return f"has time_ms {_number(t)}, not a whole number of milliseconds (MLPerf loggers write integers)"
    if EARLIEST_MS <= t <= LATEST_MS:
        return None
    when = "before 2000-01-01" if t < EARLIEST_MS else "after 2100-01-01"
    try:
        as_float = float(t)
    except OverflowError:
        as_float = math.inf
    lost = ""
    if not math.isfinite(as_float):
        lost = "; the official tools, which read it as a float, would read infinity"
    elif not isinstance(t, float) and Decimal(as_float) != t:
        lost = "; the official tools, which read it as a float, would also lose its last digits"
    return (
        f"has time_ms {_number(t)}, {when} (milliseconds since 1970: {EARLIEST_MS} to {LATEST_MS}): "
        f"not a plausible time{lost}"
    )


def _number(t: int | float | Decimal, limit: int = 40) -> str:
    """A time_ms as written in logs (a whole number without an exponent), cut short."""
    if isinstance(t, Decimal | float) and _whole(t) and abs(t) < 10**limit:
        t = int(t)
    text = str(t)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} digits)"


def _shown(x: Any, limit: int = 80) -> str:
    """A logged value as it appears in a message: its repr, cut short (a log can hold anything)."""
    text = repr(x)
    return text if len(text) <= limit else text[: limit - 4] + " ..."


def is_number(x: Any) -> bool:
    """Whether a logged value is a JSON number (an int or a float, NaN and infinities included), not a bool."""
    return isinstance(x, int | float) and not isinstance(x, bool)


def timing_problems(lines: Iterable[tuple[int, Mapping[str, Any]]], *, after_stop: bool = False) -> list[str]:
    """What makes the run's duration or an evaluation impossible, one sentence each naming its log line
    (:func:`read_timing`'s problems)."""
    return read_timing(lines, after_stop=after_stop)[0]


def read_timing(
    lines: Iterable[tuple[int, Mapping[str, Any]]], *, after_stop: bool = False
) -> tuple[list[str], frozenset[int]]:
    """(what makes the run's duration or an evaluation impossible, one sentence each naming its log line; the line
    numbers of the evaluations that are read but never counted: see :mod:`trainperf.timeline`).

    Checked: ``run_start`` and ``run_stop`` are logged at most once each (the official checker only warns
    about a copy with the same value); the first ``run_start`` and ``run_stop`` and every
    ``eval_accuracy`` have a plausible ``time_ms`` (:func:`time_problem`: a whole number of milliseconds
    between 2000 and 2100); ``run_stop`` is not before ``run_start`` (a negative duration) nor more than
    :data:`MAX_RUN_MS` after it; then the timeline rule (:func:`trainperf.timeline.check_timeline`): evaluations
    and training records inside the timed run, as the round's rules allow (``after_stop``: the benchmark's reference
    evaluates checkpoints once training is over, as minigo's does), progress that never goes back.
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
    bounds: dict[str, tuple[int, int]] = {}
    for key in ONCE:
        found = next(((n, rec) for n, rec in lines if rec.get("key") == key), None)
        if found is None:
            continue
        if (problem := time_problem(found[1].get("time_ms"))) is not None:
            problems.append(f"{key} at line {found[0]} {problem}")
        else:
            bounds[key] = (found[0], logged_ms(found[1]))
    start, stop = bounds.get("run_start"), bounds.get("run_stop")
    stop_record = next((rec for _, rec in lines if rec.get("key") == "run_stop"), None)
    stop_meta = stop_record.get("metadata") if stop_record is not None else None
    stop_status = stop_meta.get("status") if isinstance(stop_meta, Mapping) else None
    if start and stop and stop[1] < start[1]:
        problems.append(
            f"run_stop at line {stop[0]} (time_ms {stop[1]}) is before run_start at line {start[0]} "
            f"(time_ms {start[1]}): a negative duration of {(stop[1] - start[1]) / 60000:.4g} minutes"
        )
        stop = None  # one problem, not one more for each record after this run_stop
    elif start and stop and stop[1] - start[1] > MAX_RUN_MS:
        problems.append(
            f"run_stop at line {stop[0]} (time_ms {stop[1]}) is {(stop[1] - start[1]) / 86_400_000:.4g} days after "
            f"run_start at line {start[0]} (time_ms {start[1]}), over the {MAX_RUN_MS // 86_400_000} days "
            f"({MAX_RUN_MS} ms) a run may take here ({MAX_RUN_WHY})"
        )
    problems += [
        f"eval_accuracy at line {n} {time_problem(rec.get('time_ms'))}"
        for n, rec in lines
        if rec.get("key") == "eval_accuracy" and logged_ms(rec) is None
    ]
    # An evaluation after the run_stop of a run that did not succeed buys nothing (the run is not a result):
    # NVIDIA's published v2.0 rnnt logs of a diverged run evaluate once more after run_stop 'aborted'.
    timeline = check_timeline(
        lines, start, stop, status=stop_status, after_stop=after_stop, ms=logged_ms, max_run_ms=MAX_RUN_MS
    )
    return problems + timeline.problems, timeline.uncounted


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
        elif isinstance(meta, dict) and "epoch_num" in meta and not is_number(meta["epoch_num"]):
            problems.append(f"eval_accuracy at line {n} has epoch_num {_shown(meta['epoch_num'])}; it must be a number")
        if isinstance(value, dict):
            if not value or not all(is_number(v) for v in value.values()):
                problems.append(
                    f"eval_accuracy at line {n} has value {_shown(value)}; "
                    'a multi-field metric is an object of numbers, such as {"BBOX": 0.38, "SEGM": 0.34}'
                )
        elif not is_number(value):
            problems.append(f"eval_accuracy at line {n} has value {_shown(value)}; it must be a number (the quality)")
    return problems


def quality_numbers(value: Any) -> list[float]:
    """The numbers of an ``eval_accuracy`` value: the number itself, or each field of a multi-field metric."""
    if isinstance(value, dict):
        return [x for v in value.values() for x in quality_numbers(v)]
    return [float(value)] if is_number(value) else []


def impossible_quality(value: Any, *, higher_is_better: bool | None) -> float | None:
    """The first number of an ``eval_accuracy`` value that no metric of MLPerf can take (None: none): not finite
    (NaN, or 1e400 read as infinity), below 0, or above 1 for a metric where higher is better (an accuracy, a mAP,
    an AUC, a Dice score: fractions from 0 to 1). ``higher_is_better`` None: the metric is unknown, 1 is no bound.
    ``review`` and ``report`` refuse such a value the same way; ``check``'s rules hold the same range."""
    for x in quality_numbers(value):
        if not math.isfinite(x) or x < 0 or (x > 1 and higher_is_better):
            return x
    return None
