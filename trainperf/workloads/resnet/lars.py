"""LARS as the MLPerf v2.0 reference applies it, with the learning rate inside the momentum.

The v2.0 reference (mlcommons/training ``image_classification/tensorflow2/lars_optimizer.py``) updates a
weight ``w`` with gradient ``g``, velocity ``v``, rate ``lr``, momentum ``m`` and weight decay ``wd`` as::

    trust = eta * |w| / (|g| + wd * |w| + eps)      (1 when |w| or |g| is 0)
    v     = m * v + lr * trust * (g + wd * w)
    w     = w - v

and, for the parameters it skips (batch-norm parameters and biases), ``v = m * v + lr * g`` with neither
adaptation nor weight decay. timm's ``Lars`` (like torch's SGD) keeps the rate outside the velocity,
``v = m * v + trust * (g + wd * w); w = w - lr * v``: the two agree while the rate is constant, but
every change of rate (each step of the warm-up and of the polynomial decay) rescales timm's whole
accumulated velocity, whereas the reference's rate acts on the new gradient only. Hence this optimizer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

# The reference builds its optimizer with ``epsilon = epsilon or backend_config.epsilon()``: the logged
# lars_epsilon of 0 (fixed by the closed rules) becomes Keras' 1e-7 in the denominator. Matched here.
KERAS_EPSILON = 1e-7


class ReferenceLars(torch.optim.Optimizer):
    """The reference's LARS update. A group with ``adapt=False`` gets plain momentum (its skip list)."""

    def __init__(
        self,
        params: Iterable[Any],
        *,
        lr: float,
        momentum: float = 0.9,
        weight_decay: float = 0.0,
        trust_coefficient: float = 0.001,
        eps: float = 0.0,
    ) -> None:
        if lr < 0 or momentum < 0 or weight_decay < 0 or trust_coefficient <= 0 or eps < 0:
            raise ValueError("LARS needs lr, momentum, weight decay, eps >= 0 and a positive trust coefficient")
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "weight_decay": weight_decay,
            "trust_coefficient": trust_coefficient,
            "eps": eps,
            "adapt": True,
        }
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, momentum = group["lr"], group["momentum"]
            wd, eta = group["weight_decay"], group["trust_coefficient"]
            eps = group["eps"] or KERAS_EPSILON
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                if group["adapt"]:
                    w_norm = torch.linalg.vector_norm(p)
                    g_norm = torch.linalg.vector_norm(grad)
                    trust = torch.where((w_norm > 0) & (g_norm > 0), eta * w_norm / (g_norm + wd * w_norm + eps), 1.0)
                    grad = grad.add(p, alpha=wd).mul_(trust)  # not in place: p.grad stays the gradient
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p)
                velocity = state["momentum_buffer"]
                velocity.mul_(momentum).add_(grad, alpha=lr)
                p.sub_(velocity)
        return loss
