"""Scoring a benchmark's results, as MLPerf Training v2.0 scores them (training_rules.adoc, "Benchmark Results").

A result is a run's minutes from ``run_start`` to ``run_stop``. A score needs exactly N runs (the spec's
``runs_required``): it drops the ``dropped`` fastest and the ``dropped`` slowest results (1 and 1, or as
many as the spec says) and averages the rest. A failed (aborted, non-converging) run counts as infinitely
slow, so it is one of the dropped slowest; more failed runs than dropped slots leave no score.

With M > N runs, the rule's "Scoring" subsection applies: the runs are sorted by start time (their
``run_start``; by result index when start times are unknown), every window of N consecutive runs is
olympic-scored (a window with too many failed runs scores infinity), and the score is that of the
median window; if the median window has no score, there is no score. Every run stays listed by the
callers; the :class:`Score` says which window was chosen. Fewer than N runs make a preview.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Score:
    minutes: float | None  # None when no score can be given
    valid: bool  # a full set of runs that MLPerf's rules would score
    runs: int
    successes: int
    note: str  # why it is a preview, why there is no score, or which window was scored; "" for exactly N runs
    spread: float | None = None  # max - min of the successful results (every run, not only the window), in minutes
    # The runs as scored: ``order`` holds the positions (in the caller's sequence) of the runs sorted by
    # start time; ``window`` is (start, stop) into that order, the N consecutive runs that were scored
    # (``order[start:stop]``). None for a preview or no runs.
    order: tuple[int, ...] = ()
    window: tuple[int, int] | None = None
    windows: int = 0  # how many windows of N consecutive runs there were (M - N + 1)

    @property
    def label(self) -> str:
        if self.minutes is None:
            return "no score"
        return "score" if self.valid else "preview"

    @property
    def window_runs(self) -> tuple[int, ...]:
        """Positions, in the caller's sequence, of the runs in the scored window (in start order)."""
        return () if self.window is None else self.order[self.window[0] : self.window[1]]


def olympic_mean(results: Sequence[float], dropped: int) -> float:
    """Mean after dropping ``dropped`` lowest and highest values (``inf`` for aborted runs)."""
    if len(results) <= 2 * dropped:
        raise ValueError(f"olympic scoring of {len(results)} results needs more than {2 * dropped}")
    kept = sorted(results)[dropped : len(results) - dropped]
    if any(math.isinf(x) for x in kept):
        raise ValueError("too many aborted runs to score")
    return sum(kept) / len(kept)


def _window_score(values: Sequence[float], dropped: int) -> float:
    """The olympic mean of one window, or ``inf`` when it has more failed runs than dropped slots."""
    return math.inf if sum(math.isinf(x) for x in values) > dropped else olympic_mean(values, dropped)


def _start_order(n: int, start_times: Sequence[float | None] | None) -> tuple[tuple[int, ...], str]:
    """Positions sorted by start time (ties by position), or by position when any start time is unknown."""
    if start_times is not None and len(start_times) != n:
        raise ValueError(f"{len(start_times)} start times for {n} results")
    known = start_times is not None and all(
        isinstance(t, int | float) and not isinstance(t, bool) and math.isfinite(t) for t in start_times
    )
    if not known:
        return tuple(range(n)), "result index; start times unknown"
    assert start_times is not None
    return tuple(sorted(range(n), key=lambda i: (start_times[i], i))), "run_start time"


def score_results(
    results: Sequence[tuple[bool, float]],
    *,
    runs_required: int,
    dropped: int,
    start_times: Sequence[float | None] | None = None,
) -> Score:
    """Score ``(success, minutes)`` pairs of one benchmark, in result-index order.

    ``start_times`` (one per result: its ``run_start`` time in any unit, or None) order the runs when
    there are more than ``runs_required`` of them; without them, or with one missing, the results are
    taken in the order given. With fewer runs than required (the quick preview) the successful results
    are averaged and the score is labelled a preview, not a valid score.
    """
    n = len(results)
    ok = [m for s, m in results if s]
    spread = (max(ok) - min(ok)) if len(ok) >= 2 else None
    if n == 0:
        return Score(minutes=None, valid=False, runs=0, successes=0, note="no runs")
    aborted = n - len(ok)
    if n < runs_required:
        if not ok:
            return Score(minutes=None, valid=False, runs=n, successes=0, note=f"all {n} runs aborted")
        note = f"preview: {n} of the {runs_required} runs the rules require"
        if aborted:
            note += f", {aborted} aborted"
        return Score(minutes=statistics.fmean(ok), valid=False, runs=n, successes=len(ok), spread=spread, note=note)

    order, ordered_by = _start_order(n, start_times)
    values = [results[i][1] if results[i][0] else math.inf for i in order]
    common: dict[str, Any] = dict(runs=n, successes=len(ok), spread=spread, order=order, windows=n - runs_required + 1)
    if n == runs_required:
        score = _window_score(values, dropped)
        if math.isinf(score):
            return Score(
                minutes=None,
                valid=False,
                window=(0, n),
                note=f"{aborted} of {n} runs aborted; olympic scoring tolerates at most {dropped}",
                **common,
            )
        return Score(minutes=score, valid=True, window=(0, n), note="", **common)

    # M > N: MLPerf Training v2.0 rules (training_rules.adoc, "Benchmark Results" > "Scoring": "it is also
    # allowed to run M>N independent runs ... sets of N consecutive runs that would create an invalid
    # benchmark result should be included in the median calculation as 'infinite' scores"): sort the M
    # runs by start time, olympic-score every set of N consecutive runs (invalid sets count as infinite
    # scores) and take the set with the median score; if the median set is invalid, the whole result is
    # invalid. The rule does not say which set is the median of an even number of sets: we take the lower
    # middle one (index (W - 1) // 2 of the W sets sorted by score, ties broken by the earlier set), so the
    # chosen set is always one of the sets, never an average of two.
    scores = [_window_score(values[s : s + runs_required], dropped) for s in range(n - runs_required + 1)]
    ranked = sorted(range(len(scores)), key=lambda s: (scores[s], s))
    start = ranked[(len(scores) - 1) // 2]
    window = (start, start + runs_required)
    middle = "median" if len(scores) % 2 else "lower median"
    note = (
        f"{middle} of {len(scores)} windows of {runs_required} consecutive runs (ordered by {ordered_by}): "
        f"runs {start + 1}-{start + runs_required} of {n}"
    )
    if math.isinf(scores[start]):
        failed = sum(math.isinf(x) for x in values[start : start + runs_required])
        note += f" has {failed} aborted runs; olympic scoring tolerates at most {dropped}, so there is no score"
        return Score(minutes=None, valid=False, window=window, note=note, **common)
    return Score(minutes=scores[start], valid=True, window=window, note=note, **common)
