"""A tiny fake workload for the harness's tests: a linear model whose quality follows a script."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from trainperf.contract.workload import Workload
from trainperf.results import read_mllog
from trainperf.spec import Benchmark, BenchmarkSpec, Recipe

FAKE_SPEC = BenchmarkSpec(
    key="resnet",
    scale="mini",
    model="linear",
    dataset="random",
    metric="top1",
    target=0.8,
    runs_required=5,
    eval_interval=1.0,
    max_progress=4.0,
    max_minutes=5.0,
    hparam_keys=("opt_name",),
)


@dataclass(frozen=True, kw_only=True)
class FakeRecipe(Recipe):
    global_batch_size: int = 8
    opt_name: str = "sgd"
    learning_rate: float = 0.1


FAKE_BENCHMARK = Benchmark(
    key="resnet",
    title="a fake for the harness's tests",
    specs={"mini": FAKE_SPEC},
    recipes={"mini": FakeRecipe()},
    workload="helpers:FakeWorkload",
)


class FakeWorkload(Workload):
    """Quality after the k-th evaluation is ``qualities[k]``; ``interrupt_at_step`` raises Ctrl-C there."""

    qualities: list[float] = [0.5, 0.9]
    interrupt_at_step: int | None = None
    interrupt_with: BaseException | type[BaseException] = KeyboardInterrupt  # what interrupt_at_step raises
    closed = 0  # how many times close() was called, over all instances
    _evals = 0  # per run (prepare resets them; a dry run skips prepare)
    _steps = 0

    def prepare(self) -> None:
        self._evals = 0
        self._steps = 0

    def build_model(self) -> torch.nn.Module:
        return torch.nn.Linear(4, 2)

    def build_optimizer(self, model):
        return torch.optim.SGD(model.parameters(), lr=self.recipe.learning_rate), None

    def train_batches(self) -> Iterator[Any]:
        g = torch.Generator().manual_seed(self.config.seed)
        while True:
            yield (
                torch.randn(self.local_batch_size, 4, generator=g),
                torch.randint(0, 2, (self.local_batch_size,), generator=g),
            )

    def loss(self, model, batch):
        self._steps += 1
        if self.interrupt_at_step is not None and self._steps >= self.interrupt_at_step:
            raise self.interrupt_with
        x, y = batch
        return torch.nn.functional.cross_entropy(model(x), y)

    def evaluate(self, model) -> dict[str, float]:
        q = self.qualities[min(self._evals, len(self.qualities) - 1)]
        self._evals += 1
        return {"top1": q}

    def synthetic_batch(self):
        return torch.randn(self.local_batch_size, 4), torch.randint(0, 2, (self.local_batch_size,))

    def close(self) -> None:
        FakeWorkload.closed += 1

    train_samples = 40
    eval_samples = 10


def keys_in(path) -> list[str]:
    return [r["key"] for r in read_mllog(path)]


def first(path, key: str) -> dict:
    return next(r for r in read_mllog(path) if r["key"] == key)
