"""Training throughput (samples/s) of the mini and reference resnet models, through the harness's step.

    python benchmarks/resnet_throughput.py [--steps 20] [--repeats 3] [--reference-batch 8]

Each measurement times ``steps`` optimizer steps after warm-up, on synthetic batches of the real shape
(no data loading), and reports the median of ``repeats`` alternating repetitions: the machine is shared
and noisy. The reference model runs at full size (ResNet-50, 224x224) with a small per-step batch on a CPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from pathlib import Path

import torch

from trainperf import registry
from trainperf.dist import init_from_env
from trainperf.harness.runner import RunObserver
from trainperf.harness.schedule import Schedule
from trainperf.harness.steps import Stepper
from trainperf.spec import RunConfig


def build(scale: str, batch: int | None):
    ctx = init_from_env()
    spec, recipe = registry.get_spec("resnet", scale), registry.default_recipe("resnet", scale)
    if batch:
        recipe = dataclasses.replace(recipe, global_batch_size=batch * ctx.world_size)
    w = registry.workload_class("resnet")(spec, recipe, RunConfig(seed=0, dry_run=True), data_dir=Path("."), dist=ctx)
    model = w.parallelize(w.build_model())
    opt, sched = w.build_optimizer(model)
    stepper = Stepper(model, w, opt, sched, RunObserver(), Schedule.for_run(spec, w, dry_run_steps=1))
    return w, stepper, w.synthetic_batch()


def samples_per_second(w, stepper, batch, steps: int) -> float:
    for _ in range(2):  # warm-up
        stepper.step([batch])
    w.dist.synchronize()
    t = time.perf_counter()
    for _ in range(steps):
        stepper.step([batch])
    w.dist.synchronize()
    return steps * w.local_batch_size / (time.perf_counter() - t)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--reference-batch", type=int, default=8, help="per-step batch of the reference model")
    a = p.parse_args()
    setups = {
        "mini (MiniResNet, 28x28, batch 128)": build("mini", None),
        f"reference (ResNet-50, 224x224, batch {a.reference_batch})": build("reference", a.reference_batch),
    }
    results: dict[str, list[float]] = {name: [] for name in setups}
    for _ in range(a.repeats):
        for name, (w, stepper, batch) in setups.items():
            steps = a.steps if "mini" in name else max(2, a.steps // 4)
            results[name].append(samples_per_second(w, stepper, batch, steps))
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else f"CPU, {torch.get_num_threads()} threads"
    print(f"training throughput on {device} (median of {a.repeats}):")
    for name, values in results.items():
        print(f"  {name}: {statistics.median(values):9.1f} samples/s  (runs: {', '.join(f'{v:.1f}' for v in values)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
