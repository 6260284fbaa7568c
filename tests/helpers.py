"""A tiny fake workload for the harness's tests: a linear model whose quality follows a script."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from trainperf.harness.results import read_mllog
from trainperf.spec import BenchmarkSpec, Workload

FAKE_SPEC = BenchmarkSpec(
    key="resnet",
    scale="mini",
    model="linear",
    dataset="random",
    metric="top1",
    target=0.8,
    runs_required=5,
    eval_every_epochs=1.0,
    max_epochs=4.0,
    max_minutes=5.0,
    hparam_keys=("opt_name",),
)


class FakeWorkload(Workload):
    """Quality after the k-th evaluation is ``qualities[k]``; ``interrupt_at_step`` raises Ctrl-C there."""

    SPECS = {"mini": FAKE_SPEC}
    qualities: list[float] = [0.5, 0.9]
    interrupt_at_step: int | None = None

    def prepare(self) -> None:
        self._evals = 0
        self._steps = 0

    def build_model(self) -> torch.nn.Module:
        return torch.nn.Linear(4, 2)

    def build_optimizer(self, model):
        return torch.optim.SGD(model.parameters(), lr=0.1), None

    def train_loader(self, epoch: int) -> Iterator[Any]:
        g = torch.Generator().manual_seed(epoch)
        for _ in range(self.steps_per_epoch):
            yield torch.randn(8, 4, generator=g), torch.randint(0, 2, (8,), generator=g)

    def train_step(self, model, batch, optimizer):
        self._steps += 1
        if self.interrupt_at_step is not None and self._steps >= self.interrupt_at_step:
            raise KeyboardInterrupt
        x, y = batch
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    def evaluate(self, model) -> float:
        q = self.qualities[min(self._evals, len(self.qualities) - 1)]
        self._evals += 1
        return q

    def hparams(self) -> dict[str, Any]:
        return {"opt_name": "sgd"}

    def synthetic_batch(self):
        return torch.randn(8, 4), torch.randint(0, 2, (8,))

    global_batch_size = 8
    steps_per_epoch = 5
    train_samples = 40
    eval_samples = 10


def keys_in(path) -> list[str]:
    return [r["key"] for r in read_mllog(path)]


def first(path, key: str) -> dict:
    return next(r for r in read_mllog(path) if r["key"] == key)
