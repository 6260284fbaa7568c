"""Learning-rate schedules as multipliers for ``torch.optim.lr_scheduler.LambdaLR``.

torch has no polynomial decay with linear warm-up to an end learning rate (MLPerf's ResNet LARS
schedule), so it is written here as a LambdaLR multiplier.
"""

from __future__ import annotations

from collections.abc import Callable


def poly_warmup(
    *, base_lr: float, end_lr: float, warmup_steps: int, decay_steps: int, power: float = 2.0
) -> Callable[[int], float]:
    """Linear warm-up to ``base_lr``, then ``end_lr + (base_lr - end_lr) * (1 - t) ** power``."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        t = min(1.0, (step - warmup_steps) / max(1, decay_steps))
        return (end_lr + (base_lr - end_lr) * (1.0 - t) ** power) / base_lr

    return factor
