"""The timeline rule: every record of a run lies where the timed run puts it, and progress only grows.

A run's result is ``run_stop - run_start``, so a log whose ``run_start`` was moved later, or whose ``run_stop`` and
evaluations were moved earlier, claims a faster score than the run took unless its other records give it away.
:func:`check_timeline` is that rule, applied by every reader through
:func:`trainperf.run_checks.timing_problems` (``check``, ``review``, ``report``, ``compare``); each problem starts
with :data:`RULE`.

What the rule holds, read from the published logs (every result file of mlcommons/training_results_v2.0, 2,760):

- evaluations are on the clock, between ``run_start`` and ``run_stop``; an evaluation during initialization (timed
  at or before ``init_stop``, itself at or before ``run_start``: the starting checkpoint's, in a line before
  ``init_stop``'s in trainperf's own logs, anywhere in another submitter's, whose lines come deferred) is untimed and
  never counted; after ``run_stop`` an evaluation is a
  copy of one within the run (NVIDIA's v1.1 dlrm), an evaluation of a run that did not succeed (NVIDIA's v2.0
  rnnt), or, for a benchmark whose reference evaluates timestamped checkpoints once training is over (minigo),
  counted only when it evaluates a checkpoint saved within the run (``save_model`` with that iteration, at or
  before ``run_stop``: the winning model of all 140 published v2.0 minigo runs is) and bounded by the longest a
  run may take (the benchmarks and rounds whose rules allow it:
  :func:`trainperf.rules.rulesets.evaluated_after_run_stop`, Stable Diffusion v3.1 to v5.0 among them, whose
  ``run_stop`` carries the passing checkpoint's time);
- training records (``block_*``, ``epoch_*``) are never before ``run_start``; after ``run_stop`` a log may show
  training that went on while the deciding evaluation ran (Google's v2.0 dlrm, 13% of the run; Habana's v2.0 bert,
  a third), never more than :data:`TAIL_SHARE` of the run;
- ``epoch_num``, ``first_epoch_num`` and ``samples_count`` of each training and evaluation key never decrease
  (none does in the published v2.0 logs), but for the evaluation keys of another submitter's log, whose evaluations
  may run asynchronously and end out of order (Google's v1.0 TPU ssd logs epoch 20's evaluation before epoch 15's,
  Intel's v1.0 minigo an ``eval_start`` of iteration 51 before one of 50);
- in another submitter's log, whose lines come from several ranks and loggers, an evaluation logged on a line before
  ``run_stop``'s and timed at most :data:`PUBLISHED_SKEW_MS` after it, and training timed at most that before
  ``run_start``, are within the run;
- trainperf's own logs (they log ``trainperf_scale``) are held to what its harness writes: training and
  evaluation records in time order, all between ``run_start`` and ``run_stop``, within the clock skew a
  multi-node run allows (:data:`CLOCK_SKEW_MS`, logged as ``trainperf_clock_skew_ms``).

Published logs interleave ranks and defer lines (times go back by minutes in line order), so line order is checked
only in trainperf's own logs. A forger who rewrites every time consistently is not caught by any rule on one log;
``review`` compares the runs of a result set as well (:mod:`trainperf.distinct`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

RULE = "timeline rule"
TRAINING = ("block_start", "block_stop", "epoch_start", "epoch_stop")
EVALUATION = "eval_accuracy"
PROGRESS_KEYS = (*TRAINING, "eval_start", "eval_stop", EVALUATION)
PROGRESS_FIELDS = ("epoch_num", "first_epoch_num", "samples_count")
# Training logged after run_stop, as a share of the run: published v2.0 logs reach a third (Habana's HLS-Gaudi2 bert
# result_6: 318 s after a 955 s run, asynchronous evaluation), Google's dlrm 13%; half leaves room and refuses a log
# whose run_stop was moved to before most of its training.
TAIL_SHARE = 0.5
# trainperf.harness.skew.MAX_SKEW_MS: how far a multi-node run's rank-0 clock may be from the maximum over ranks that
# times run_start and run_stop (tests/unit/test_timeline.py holds the two equal; this layer cannot import the harness)
CLOCK_SKEW_MS = 100
# Another submitter's clock between loggers: v1.0 HugeCTR dlrm logs time the deciding eval_accuracy 1 to 5 ms after
# the run_stop logged on a later line (GIGABYTE, Inspur, Supermicro, nettrix: 23 result files) and an epoch_start up
# to 194 ms before run_start (NVIDIA's dgxa100_n14 result_0). A quarter second is what such a log can gain at most,
# 0.0042 minutes a run; an evaluation or training moved further, or an evaluation logged after run_stop's line, is
# refused as before.
PUBLISHED_SKEW_MS = 250
OWN_LOG = "trainperf_scale"  # logged by every run trainperf's harness writes
SKEW_LOGGED = "trainperf_clock_skew_ms"  # logged by a multi-node run
CHECKPOINT = "save_model"
_FIX = "the log was edited or damaged: restore it, or move it away and redo the run"

Line = tuple[int, Mapping[str, Any]]
Mark = tuple[int, int]  # (line number, time_ms)


@dataclass(frozen=True)
class Timeline:
    """What the rule found: ``problems`` (each a sentence starting with :data:`RULE`) and the line numbers of
    evaluations that are read but never counted (untimed ones during initialization, and evaluations after
    ``run_stop`` of no checkpoint saved within the run)."""

    problems: list[str] = field(default_factory=list)
    uncounted: frozenset[int] = frozenset()


@dataclass(frozen=True, kw_only=True)
class _Run:
    lines: Sequence[Line]
    start: Mark | None
    stop: Mark | None
    success: bool
    after_stop: bool  # the benchmark's reference evaluates checkpoints once training is over
    own: bool  # written by trainperf's harness
    skew: int
    ms: Callable[[Mapping[str, Any]], int | None]


def check_timeline(
    lines: Sequence[Line],
    start: Mark | None,
    stop: Mark | None,
    *,
    status: Any,
    after_stop: bool,
    ms: Callable[[Mapping[str, Any]], int | None],
    max_run_ms: int,
) -> Timeline:
    """The timeline rule on a log's records (``(line, record)``), given its ``run_start`` and ``run_stop`` (their
    line and exact time, None when missing or unreadable: other rules report those), the ``run_stop`` status,
    whether the benchmark evaluates checkpoints after ``run_stop``, the reader of an exact time (None when a
    time is not a plausible one: reported by another rule) and the longest a run may take."""
    own = any(rec.get("key") == OWN_LOG for _, rec in lines)
    skew = CLOCK_SKEW_MS if own and any(rec.get("key") == SKEW_LOGGED for _, rec in lines) else 0
    run = _Run(
        lines=lines, start=start, stop=stop, success=status == "success", after_stop=after_stop, own=own, skew=skew,
        ms=ms,
    )  # fmt: skip
    problems, uncounted = _evaluations(run, max_run_ms)
    problems += _training(run)
    problems += _progress(lines, PROGRESS_KEYS if own else TRAINING)
    if own:
        problems += _order(run)
    return Timeline(problems, frozenset(uncounted))


def _evaluations(run: _Run, max_run_ms: int) -> tuple[list[str], set[int]]:
    """Evaluations outside the timed run that the round's rules do not allow, and those read but not counted."""
    problems: list[str] = []
    uncounted: set[int] = set()
    start, stop = run.start, run.stop
    timed = {_evaluation(rec) for _, rec in run.lines if rec.get("key") == EVALUATION and _within(run, rec)}
    init_stop = next((run.ms(rec) for _, rec in run.lines if rec.get("key") == "init_stop"), None)
    init_line = next((n for n, rec in run.lines if rec.get("key") == "init_stop"), None)
    saved = _checkpoints(run)
    for n, rec in run.lines:
        t = run.ms(rec) if rec.get("key") == EVALUATION else None
        if t is None:
            continue
        if start and t < start[1] - run.skew:
            logged_during = init_line is not None and (n < init_line or not run.own)  # published logs defer lines
            if init_stop is not None and logged_during and t <= init_stop <= start[1]:
                uncounted.add(n)  # an untimed evaluation during initialization: read, never counted
                continue
            problems.append(
                f"{RULE}: eval_accuracy at line {n} (time_ms {t}) is before run_start at line {start[0]} "
                f"(time_ms {start[1]}): an evaluation outside the timed run"
            )
        elif stop and t > stop[1] + (_slack(run) if n < stop[0] else run.skew) and run.success:
            if _evaluation(rec) in timed:
                continue  # a copy of an evaluation within the run (NVIDIA's v1.1 HugeCTR dlrm, 1 ms after run_stop)
            if not run.after_stop or run.own:
                why = " (trainperf's harness evaluates on the clock)" if run.after_stop else ""
                problems.append(
                    f"{RULE}: eval_accuracy at line {n} (time_ms {t}) is after run_stop at line {stop[0]} "
                    f"(time_ms {stop[1]}): an evaluation outside the timed run{why}"
                )
            elif start and t - start[1] > max_run_ms:
                problems.append(
                    f"{RULE}: eval_accuracy at line {n} (time_ms {t}) is {(t - start[1]) / 86_400_000:.4g} days "
                    f"after run_start at line {start[0]}: an evaluation of a checkpoint comes within the "
                    f"{max_run_ms // 86_400_000} days a run may take"
                )
            elif not _saved_within(saved, rec, stop[1]):
                uncounted.add(n)  # no checkpoint of the run: it cannot decide the run's result
    return problems, uncounted


def _checkpoints(run: _Run) -> dict[str, int]:
    """Each checkpoint's iteration (as JSON text) -> the time it was first saved (``save_model``)."""
    saved: dict[str, int] = {}
    for _, rec in run.lines:
        value = rec.get("value")
        if rec.get("key") == CHECKPOINT and isinstance(value, Mapping) and "iteration" in value:
            t = run.ms(rec)
            if t is not None:
                saved.setdefault(json.dumps(value["iteration"]), t)
    return saved


def _saved_within(saved: Mapping[str, int], rec: Mapping[str, Any], stop_ms: int) -> bool:
    meta = rec.get("metadata")
    epoch = meta.get("epoch_num") if isinstance(meta, Mapping) else None
    t = saved.get(json.dumps(epoch))
    return t is not None and t <= stop_ms


def _training(run: _Run) -> list[str]:
    """Training records before run_start, or after run_stop beyond what the published logs show."""
    start, stop = run.start, run.stop
    before: list[tuple[int, str, int]] = []
    after: list[tuple[int, str, int]] = []
    tail = 0 if run.own else (TAIL_SHARE * (stop[1] - start[1]) if start and stop and stop[1] > start[1] else 0)
    for n, rec in run.lines:
        key = rec.get("key")
        if key not in TRAINING or (t := run.ms(rec)) is None:
            continue
        if start and t < start[1] - _slack(run):
            before.append((n, key, t))
        elif stop and run.success and not (run.after_stop and not run.own) and t > stop[1] + run.skew + tail:
            after.append((n, key, t))
    problems = []
    if before:
        n, key, t = before[0]
        problems.append(
            f"{RULE}: {key} at line {n} (time_ms {t}) is before run_start at line {start[0]} (time_ms {start[1]})"
            f"{_more(before)}: training is on the clock, every block and epoch after run_start; {_FIX}"
        )
    if after:
        n, key, t = after[0]
        allowed = "trainperf's harness logs run_stop after its last block" if run.own else (
            f"published logs train on for at most a third of the run while the deciding evaluation runs, and "
            f"{TAIL_SHARE:.0%} is allowed"
        )  # fmt: skip
        problems.append(
            f"{RULE}: {key} at line {n} (time_ms {t}) is {(t - stop[1]) / 1000:.4g} s after run_stop at line "
            f"{stop[0]} (time_ms {stop[1]}){_more(after)}: run_stop comes after the training it times "
            f"({allowed}); {_FIX}"
        )
    return problems


def _progress(lines: Sequence[Line], keys: Sequence[str]) -> list[str]:
    """Progress fields of ``keys`` that go back (in line order, per key and field). A record equal to an earlier one
    (key, time, value and metadata) is a line logged again, not progress: Google's v3.1 gpt3 logs end with each
    block_start echoed after run_stop ("Processing :::MLLOG ..."), which the official tools read as lines too."""
    last: dict[tuple[str, str], tuple[int, float]] = {}
    seen: set[str] = set()
    problems = []
    for n, rec in lines:
        key, meta = rec.get("key"), rec.get("metadata")
        if key not in keys or not isinstance(meta, Mapping):
            continue
        text = json.dumps(rec, sort_keys=True, default=str)
        if text in seen:
            continue
        seen.add(text)
        for name in PROGRESS_FIELDS:
            value = meta.get(name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
                continue
            previous = last.get((key, name))
            if previous is not None and value < previous[1]:
                problems.append(
                    f"{RULE}: {key} at line {n} has {name} {value:g}, less than {previous[1]:g} at line "
                    f"{previous[0]}: progress never goes back (a run counts its epochs and samples forward); {_FIX}"
                )
                break
            last[(key, name)] = (n, value)
    return problems


def _order(run: _Run) -> list[str]:
    """trainperf's own logs: training and evaluation records in time order."""
    latest: tuple[int, int] | None = None
    for n, rec in run.lines:
        if rec.get("key") not in PROGRESS_KEYS or (t := run.ms(rec)) is None:
            continue
        if latest is not None and t < latest[1] - run.skew:
            return [
                f"{RULE}: {rec.get('key')} at line {n} (time_ms {t}) is {(latest[1] - t) / 1000:.4g} s before the "
                f"record at line {latest[0]} (time_ms {latest[1]}): trainperf's harness logs its training and "
                f"evaluations in time order; {_FIX}"
            ]
        if latest is None or t > latest[1]:
            latest = (n, t)
    return []


def _slack(run: _Run) -> int:
    """How far past run_stop an evaluation, and before run_start training, may be timed: the clock skew of trainperf's
    own log, :data:`PUBLISHED_SKEW_MS` in another submitter's."""
    return run.skew if run.own else max(run.skew, PUBLISHED_SKEW_MS)


def _more(found: list[Any]) -> str:
    return f" (and {len(found) - 1} more such record(s))" if len(found) > 1 else ""


def _evaluation(rec: Mapping[str, Any]) -> str:
    """An eval_accuracy record's value and epoch, as text (to tell a repeated line from a new evaluation)."""
    meta = rec.get("metadata")
    epoch = meta.get("epoch_num") if isinstance(meta, Mapping) else None
    return json.dumps([rec.get("value"), epoch], sort_keys=True, default=str)


def _within(run: _Run, rec: Mapping[str, Any]) -> bool:
    """True when the record is timed within the run: not before run_start, not after run_stop."""
    t = run.ms(rec)
    return t is not None and run.start is not None and run.stop is not None and run.start[1] <= t <= run.stop[1]


def own_progress(lines: Sequence[Line]) -> tuple[Any, ...]:
    """The ``epoch_num`` of each ``eval_accuracy`` of trainperf's own log, in the spec's progress unit (plus its
    ``epoch_num_offset``); empty for another submitter's log, whose ``epoch_num`` is in units of its own (Habana's
    v2.0 bert logs samples)."""
    if not any(rec.get("key") == OWN_LOG for _, rec in lines):
        return ()
    return tuple(
        rec["metadata"].get("epoch_num") if isinstance(rec.get("metadata"), Mapping) else None
        for _, rec in lines
        if rec.get("key") == EVALUATION
    )


def past_budget(epoch_num: Any, budget: Any, offset: float = 0.0) -> bool:
    """Whether an evaluation logged at ``epoch_num`` (the spec's progress unit plus its ``epoch_num_offset``) comes
    after the spec's progress budget (``max_progress``): the harness stops a run at its budget, so such an evaluation
    never makes a run a success. A budget that is not a number (one computed from the recipe) bounds nothing here.
    A tolerance of a millionth absorbs rounding."""
    if isinstance(budget, bool) or not isinstance(budget, int | float):
        return False
    if isinstance(epoch_num, bool) or not isinstance(epoch_num, int | float):
        return False
    return epoch_num - offset > budget * (1 + 1e-6) + 1e-9


def first_past_budget(progress: Sequence[Any], budget: Any, offset: float = 0.0) -> Any:
    """The first ``epoch_num`` of ``progress`` (:func:`own_progress`) past the budget, None when none is."""
    return next((p for p in progress if past_budget(p, budget, offset)), None)
