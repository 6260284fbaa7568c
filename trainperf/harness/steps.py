"""The training step, owned by the harness: zero_grad, forward (under the run's autocast, see
``precision.py``) and backward of each micro-batch (gradient accumulation, without DDP's all-reduce until the
last one), gradient clipping where the recipe asks for it, the optimizer and scheduler steps. The loss is read back from
the device every ``LOSS_EVERY`` steps only (reading it is a device synchronization on a GPU).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from contextlib import nullcontext
from typing import Any

import torch

from trainperf.contract.workload import Workload
from trainperf.harness.mllog import RunLog, constants
from trainperf.harness.precision import FP32, Precision
from trainperf.harness.schedule import Schedule

LOSS_EVERY = 10  # optimizer steps between two reads of the loss


class Stepper:
    def __init__(
        self,
        model: torch.nn.Module,
        workload: Workload,
        optimizer: Any,
        scheduler: Any,
        observer: Any,
        schedule: Schedule,
        precision: Precision = FP32,
    ) -> None:
        self.model, self.w, self.optimizer, self.scheduler = model, workload, optimizer, scheduler
        self.precision = precision
        self.obs, self.schedule = observer, schedule
        self.accumulation = workload.recipe.gradient_accumulation_steps
        self.clip = workload.recipe.clip_grad_norm
        self.optimizer_steps = 0
        self.progress = 0.0  # in the schedule's unit
        self._loss_sum: torch.Tensor | None = None
        self._loss_count = 0
        self.step_begin: Any = None  # called before each forward pass (CUDA graph trees, --cuda-graphs)

    def step(self, micro_batches: list[Any]) -> None:
        """One optimizer step over ``micro_batches`` (their losses averaged, as one large batch's would be)."""
        model = self.model
        self.optimizer.zero_grad(set_to_none=True)
        total = None
        for i, batch in enumerate(micro_batches):
            last = i == len(micro_batches) - 1
            sync = nullcontext() if last or not hasattr(model, "no_sync") else model.no_sync()
            with sync:
                if self.step_begin is not None:
                    self.step_begin()
                with self.precision.forward():
                    loss = self.w.loss(model, batch)
                self.precision.backward(loss / len(micro_batches))
            total = loss.detach().float() if total is None else total + loss.detach().float()
        self.precision.unscale(self.optimizer)
        if self.clip > 0:
            self.w.clip_gradients(model, self.clip)  # torch's clip_grad_norm_ unless the workload shards more
        self.precision.step(self.optimizer)
        if self.scheduler is not None:
            self.scheduler.step()
        self.optimizer_steps += 1
        mean = total / len(micro_batches)
        self._loss_sum = mean if self._loss_sum is None else self._loss_sum + mean
        self._loss_count += 1
        reported = None
        if self._loss_count >= LOSS_EVERY:
            reported = float(self._loss_sum) / self._loss_count
            self._loss_sum, self._loss_count = None, 0
        self.obs.step(self.w.global_batch_size, self.progress, reported)

    def train_until(self, target_steps: int, batches: Iterator[Any], log: RunLog) -> None:
        """Optimizer steps from ``batches`` until ``target_steps`` are done; epoch lines where the unit has epochs."""
        spe = self.schedule.steps_per_epoch
        self.model.train()
        while self.optimizer_steps < target_steps:
            if spe and self.optimizer_steps % spe == 0:
                log.start(constants.EPOCH_START, metadata={"epoch_num": self.optimizer_steps // spe + 1})
            self.step([next(batches) for _ in range(self.accumulation)])
            self.progress = self.schedule.progress_at(self.optimizer_steps)
            if spe and self.optimizer_steps % spe == 0:
                log.end(constants.EPOCH_STOP, metadata={"epoch_num": self.optimizer_steps // spe})

    def train_generation(self, batches: Iterable[Any]) -> None:
        """One generation: an optimizer step per ``accumulation`` batches the workload's hook yields."""
        self.model.train()
        it = iter(batches)
        while micro := list(itertools.islice(it, self.accumulation)):
            self.step(micro)
        self.progress = round(self.progress) + 1
