"""Learning-rate schedules as multipliers for ``torch.optim.lr_scheduler.LambdaLR``.

torch has no polynomial decay with linear warm-up to an end learning rate (MLPerf's ResNet LARS
schedule), so it is written here as a LambdaLR multiplier. ``HoldLast`` keeps a planned schedule at its
end value when a run trains past its plan (a budget longer than the schedule).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def poly_warmup(
    *, base_lr: float, end_lr: float, warmup_steps: int, decay_steps: int, power: float = 2.0
) -> Callable[[int], float]:
    """MLPerf ResNet's LARS schedule as a LambdaLR multiplier of ``base_lr``, for the 0-based step ``s``
    (mlcommons/training ``image_classification/tensorflow2/lars_util.py``): a linear warm-up to ``base_lr``
    at ``s = warmup_steps``, then TF's polynomial decay,
    ``end_lr + (base_lr - end_lr) * (1 - min(s - warmup_steps, decay_steps) / decay_steps) ** power``
    (the reference's ``decay_steps`` is ``train_steps - warmup_steps + 1``).

    One difference: the reference's warm-up is ``s / warmup_steps``, so its first step has rate 0 and
    changes nothing; here it is ``(s + 1) / warmup_steps`` below ``warmup_steps``, so that every step
    trains (a one-step shift of the warm-up; from ``warmup_steps`` on the rates are the reference's).
    """

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        t = min(step - warmup_steps, decay_steps) / max(1, decay_steps)
        return (end_lr + (base_lr - end_lr) * (1.0 - t) ** power) / base_lr

    return factor


class HoldLast:
    """A per-step scheduler that stops at its last value once its steps are spent (budget beyond the plan)."""

    def __init__(self, scheduler: Any, total_steps: int) -> None:
        self.scheduler = scheduler
        self.remaining = total_steps - 1

    def step(self) -> None:
        if self.remaining > 0:
            self.scheduler.step()
            self.remaining -= 1


def warmup_step_decay(*, warmup_steps: int, warmup_factor: float, boundaries: list[int], factor: float = 0.1):
    """MLPerf Mask R-CNN's schedule as a LambdaLR multiplier: linear warm-up from ``warmup_factor`` to 1,
    then times ``factor`` at each step boundary."""

    def multiplier(step: int) -> float:
        warm = 1.0
        if step < warmup_steps:
            alpha = step / max(1, warmup_steps)
            warm = warmup_factor * (1 - alpha) + alpha
        return warm * factor ** sum(step >= b for b in boundaries)

    return multiplier


def linear_warmup(*, warmup_steps: int, warmup_factor: float):
    """MLPerf RetinaNet's schedule as a LambdaLR multiplier: linear warm-up from ``warmup_factor``, then constant."""

    def multiplier(step: int) -> float:
        if step >= warmup_steps:
            return 1.0
        alpha = step / max(1, warmup_steps)
        return warmup_factor * (1 - alpha) + alpha

    return multiplier


def adamw_one_cycle(groups: list[dict[str, Any]], recipe: Any, steps_per_epoch: int) -> tuple[Any, Any]:
    """The mini recipes' optimizer: AdamW with a one-cycle schedule planned over
    ``opt_learning_rate_schedule_epochs`` (warm-up ``opt_learning_rate_warmup_epochs``), held at its end value
    afterwards. Returns (optimizer, per-step scheduler)."""
    import torch

    opt = torch.optim.AdamW(groups, lr=recipe.opt_base_learning_rate)
    total = max(2, round(recipe.opt_learning_rate_schedule_epochs * steps_per_epoch))
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt,
        max_lr=recipe.opt_base_learning_rate,
        total_steps=total,
        pct_start=min(0.9, recipe.opt_learning_rate_warmup_epochs / recipe.opt_learning_rate_schedule_epochs),
    )
    return opt, HoldLast(sched, total)
