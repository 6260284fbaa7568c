"""A few real steps of a mini, as a run takes them: the workload's loader on the prepared files, the harness's
`Stepper`, the workload's evaluation before and after, under the workload's torch state.

Run as a script (``python tests/integration/mini_steps.py KEY --seed S --steps N --data-dir D``) it prints one
JSON object: the evaluations, the training losses the stepper reports (every ``LOSS_EVERY`` steps) and the
process's peak resident memory, which only a process of its own measures (a test session's would include every
test before it)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from trainperf import registry
from trainperf.dist import DistContext
from trainperf.harness.runner import RunObserver, seed_everything
from trainperf.harness.schedule import Schedule
from trainperf.harness.steps import Stepper
from trainperf.harness.torch_state import torch_state
from trainperf.seeds import derive
from trainperf.spec import GENERATIONS, RunConfig


class Losses(RunObserver):
    def __init__(self) -> None:
        self.reported: list[float] = []

    def step(self, samples: int, progress: float, loss: float | None) -> None:
        if loss is not None:
            self.reported.append(loss)


def peak_rss_mib() -> float:
    """This process's peak resident memory (Linux's VmHWM: the peak of this program, not of its parent)."""
    with open("/proc/self/status", encoding="ascii") as f:
        return next(int(line.split()[1]) / 1024.0 for line in f if line.startswith("VmHWM:"))


def few_real_steps(key: str, *, seed: int, steps: int, data_dir: Path, before: bool = True) -> dict[str, Any]:
    """``steps`` optimizer steps (generations, where the spec counts them) of the mini recipe from the untrained
    model, evaluated before (unless ``before`` is false) and after, seeded as the runner seeds a run."""
    cls, spec = registry.workload_class(key), registry.get_spec(key, "mini")
    seconds: dict[str, float] = {}
    with torch_state(cls.TORCH_STATE):
        w = cls(spec, registry.default_recipe(key, "mini"), RunConfig(seed=seed), data_dir=data_dir, dist=DistContext())
        try:
            t = time.perf_counter()
            seed_everything(derive(seed, 0))
            w.prepare()
            seed_everything(seed)
            model = w.parallelize(w.build_model())
            w.load_data()
            seconds["load"] = time.perf_counter() - t
            t = time.perf_counter()
            first = dict(w.evaluate(model)) if before else None
            seconds["evaluate_before"] = time.perf_counter() - t
            opt, sched = w.build_optimizer(model)
            losses = Losses()
            stepper = Stepper(model, w, opt, sched, losses, Schedule.for_run(spec, w))
            t = time.perf_counter()
            model.train()
            if spec.unit == GENERATIONS:  # minigo: a "step" is a generation (self-play, then its training steps)
                for g in range(1, steps + 1):
                    stepper.train_generation(w.generation_batches(model, g))
            else:
                batches = iter(w.train_batches())
                for _ in range(steps):
                    stepper.step([next(batches) for _ in range(stepper.accumulation)])
            seconds["steps"] = time.perf_counter() - t
            t = time.perf_counter()
            after = dict(w.evaluate(model))
            seconds["evaluate_after"] = time.perf_counter() - t
            sizes = {"train_samples": w.train_samples, "eval_samples": w.eval_samples}
        finally:
            w.close()
    return {
        "before": first, "after": after, "losses": losses.reported, "optimizer_steps": stepper.optimizer_steps,
        "peak_rss_mib": peak_rss_mib(), "seconds": seconds, **sizes,
    }  # fmt: skip


def few_steps_command(key: str, seed: int, steps: int, data_dir: Path, *, before: bool = True) -> list[str]:
    """The command that runs :func:`few_real_steps` in a process of its own and prints its JSON."""
    cmd = [sys.executable, __file__, key, "--seed", str(seed), "--steps", str(steps), "--data-dir", str(data_dir)]
    return cmd if before else [*cmd, "--no-before"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("key")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--no-before", action="store_true", help="skip the untrained model's evaluation")
    a = p.parse_args()
    print(json.dumps(few_real_steps(a.key, seed=a.seed, steps=a.steps, data_dir=a.data_dir, before=not a.no_before)))


if __name__ == "__main__":
    main()
