"""Recipe fields that several benchmarks share (pure data, no torch)."""

from __future__ import annotations

from dataclasses import dataclass

from trainperf.spec import Recipe


@dataclass(frozen=True, kw_only=True)
class OneCycleAdamWRecipe(Recipe):
    """The mini recipes' optimizer: AdamW with a one-cycle schedule planned over
    ``opt_learning_rate_schedule_epochs`` (warm-up ``opt_learning_rate_warmup_epochs``), held at its end
    value afterwards (``trainperf.workloads.common.schedules.adamw_one_cycle``)."""

    global_batch_size: int
    opt_name: str = "adamw"
    opt_base_learning_rate: float
    opt_weight_decay: float
    opt_learning_rate_warmup_epochs: float
    opt_learning_rate_schedule_epochs: float


ONE_CYCLE_KEYS = (
    "opt_name",
    "opt_base_learning_rate",
    "opt_weight_decay",
    "opt_learning_rate_warmup_epochs",
    "opt_learning_rate_schedule_epochs",
)
