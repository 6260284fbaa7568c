"""Olympic scoring of a benchmark's results, as MLPerf Training v2.0 scores them.

A result is a run's minutes from ``run_start`` to ``run_stop``. The score drops the ``dropped``
fastest and the ``dropped`` slowest results (1 and 1, or as many as the spec says) and averages the rest. An
aborted run counts as one of the dropped slowest; more aborted runs than dropped slots leave no score.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Score:
    minutes: float | None  # None when no score can be given
    valid: bool  # a full set of runs that MLPerf's rules would score
    runs: int
    successes: int
    note: str  # why it is a preview or why there is no score; "" for a valid score
    spread: float | None = None  # max - min of the successful results, in minutes

    @property
    def label(self) -> str:
        if self.minutes is None:
            return "no score"
        return "score" if self.valid else "preview"


def olympic_mean(results: Sequence[float], dropped: int) -> float:
    """Mean after dropping ``dropped`` lowest and highest values (``inf`` for aborted runs)."""
    if len(results) <= 2 * dropped:
        raise ValueError(f"olympic scoring of {len(results)} results needs more than {2 * dropped}")
    kept = sorted(results)[dropped : len(results) - dropped]
    if any(math.isinf(x) for x in kept):
        raise ValueError("too many aborted runs to score")
    return sum(kept) / len(kept)


def score_results(results: Sequence[tuple[bool, float]], *, runs_required: int, dropped: int) -> Score:
    """Score ``(success, minutes)`` pairs of one benchmark.

    With the required number of runs this is MLPerf's olympic score. With fewer runs (the quick
    preview) the successful results are averaged and the score is labelled a preview, not a valid score.
    """
    n = len(results)
    ok = [m for s, m in results if s]
    spread = (max(ok) - min(ok)) if len(ok) >= 2 else None
    if n == 0:
        return Score(minutes=None, valid=False, runs=0, successes=0, note="no runs")
    aborted = n - len(ok)
    if n >= runs_required:
        if aborted > dropped:
            return Score(
                minutes=None,
                valid=False,
                runs=n,
                successes=len(ok),
                spread=spread,
                note=f"{aborted} of {n} runs aborted; olympic scoring tolerates at most {dropped}",
            )
        values = [m if s else math.inf for s, m in results]
        return Score(
            minutes=olympic_mean(values, dropped),
            valid=True,
            runs=n,
            successes=len(ok),
            spread=spread,
            note="",
        )
    if not ok:
        return Score(minutes=None, valid=False, runs=n, successes=0, note=f"all {n} runs aborted")
    note = f"preview: {n} of the {runs_required} runs the rules require"
    if aborted:
        note += f", {aborted} aborted"
    return Score(minutes=statistics.fmean(ok), valid=False, runs=n, successes=len(ok), spread=spread, note=note)
