"""A run's evaluation schedule in its spec's progress unit, and how progress turns into optimizer steps.

epochs: one optimizer step is ``1 / steps_per_epoch`` of an epoch; MLLOG ``epoch_num`` counts epochs
(``first_epoch_num`` of a block is 1-based) and the harness logs ``epoch_start``/``epoch_stop``.
samples: one step is ``global_batch_size`` samples; ``epoch_num`` holds the samples trained (as MLPerf's
BERT reference logs it). generations: the workload's generation hook trains one generation at a time;
``epoch_num`` holds the generation count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainperf.contract.workload import Workload
from trainperf.spec import EPOCHS, GENERATIONS, SAMPLES, BenchmarkSpec


@dataclass(frozen=True)
class Schedule:
    unit: str
    points: tuple[float, ...]  # progress at each evaluation; the last is the budget
    units_per_step: float  # progress of one optimizer step (generations: a dry run's synthetic steps)
    steps_per_epoch: int | None  # epochs unit: where epoch_start/epoch_stop lines go
    by_generation: bool  # progress advances one generation at a time through the workload's hook

    @classmethod
    def for_run(cls, spec: BenchmarkSpec, workload: Workload, *, dry_run_steps: int | None = None) -> Schedule:
        spe = workload.steps_per_epoch if spec.unit == EPOCHS else None
        if spec.unit == EPOCHS:
            per_step = 1.0 / spe
        elif spec.unit == SAMPLES:
            per_step = float(workload.global_batch_size)
        else:  # generations: a dry run counts its synthetic steps as one generation
            per_step = 1.0 / (dry_run_steps or 1)
        if dry_run_steps is not None:
            points: tuple[float, ...] = (dry_run_steps * per_step,)
        else:
            points = tuple(spec.eval_points(workload.recipe))
        by_generation = spec.unit == GENERATIONS and dry_run_steps is None
        return cls(spec.unit, points, per_step, spe, by_generation)

    @classmethod
    def smoke_generations(cls, count: int) -> Schedule:
        """A smoke run in the generations unit: ``count`` real generations through the workload's hook,
        then its one evaluation."""
        return cls(GENERATIONS, (float(count),), 1.0, None, True)

    def steps_at(self, point: float) -> int:
        """Optimizer steps done when progress reaches ``point`` (samples: the first step at or past it)."""
        return max(1, math.ceil(point / self.units_per_step - 1e-6))

    def progress_at(self, steps: int) -> float:
        return steps * self.units_per_step

    def logged_first(self, done: float) -> int | float:
        """``first_epoch_num`` of a block that starts after ``done`` units."""
        return _number(done if self.unit == SAMPLES else 1 + done)

    def logged_count(self, amount: float) -> int | float:
        return _number(amount)


def _number(x: float) -> int | float:
    """Whole numbers as int, fractions as float with six significant digits."""
    r = float(f"{x:.6g}")
    return int(r) if r == int(r) else r
