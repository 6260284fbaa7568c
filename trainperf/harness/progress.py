"""A live progress bar for runs (rich); silent when the output is not a terminal."""

from __future__ import annotations

import math
import time

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from trainperf.harness.runner import RunObserver, RunOutcome
from trainperf.spec import BenchmarkSpec


class ProgressBar(RunObserver):
    """One bar per run: progress in the spec's unit, samples/s, loss and the last evaluated quality."""

    def __init__(self, console: Console, label: str) -> None:
        self.console = console
        self.label = label
        self.enabled = console.is_terminal
        self._progress: Progress | None = None
        self._task = None
        self._samples = 0
        self._t0 = 0.0
        self._quality = math.nan
        self._unit = "epochs"
        self._loss: float | None = None

    def run_started(self, spec: BenchmarkSpec, total: float) -> None:
        self._metric = spec.metric
        self._target = spec.target_text
        self._unit = spec.unit
        self._t0 = time.perf_counter()
        self._samples = 0
        if not self.enabled:
            return
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task(self.label, total=total, info="starting")

    def _info(self) -> str:
        dt = max(time.perf_counter() - self._t0, 1e-9)
        done = self._progress.tasks[0].completed if self._progress else 0
        parts = [f"{done:,.4g} {self._unit}", f"{self._samples / dt:,.0f} samples/s"]
        if self._loss is not None:
            parts.append(f"loss {self._loss:.3f}")
        q = "–" if math.isnan(self._quality) else f"{self._quality:.4f}"
        parts.append(f"{self._metric} {q} (target {self._target})")
        return "  ".join(parts)

    def step(self, samples: int, progress: float, loss: float | None) -> None:
        self._samples += samples
        if loss is not None:
            self._loss = loss
        if self._progress is not None:
            self._progress.update(self._task, completed=progress, info=self._info())

    def evaluated(self, progress: float, quality: float) -> None:
        self._quality = quality
        if self._progress is not None:
            self._progress.update(self._task, completed=progress, info=self._info())

    def run_stopped(self, outcome: RunOutcome | None) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
