"""llama2_70b_lora mini's base model, made again anywhere, and the probes its README gives.

    python benchmarks/lora_mini_base.py --out /tmp/base                  # train and write it; print its curve
    python benchmarks/lora_mini_base.py --probe 4e-4,1e-3,2e-3 --probe-steps 60

The base model is what `trainperf data prepare llama2_70b_lora` writes under ``<data-dir>/llama2_70b_lora/mini/base``
(``trainperf/workloads/llama2_70b_lora/base.py``: llama31_8b's mini decoder trained from scratch for 200 steps of 32
sequences of 128 tokens on llama31_8b's mini prose, never on the manual pages): here it is written to ``--out`` (the
mini's manual pages must be prepared: its manifest records the base model's own evaluation loss on them), with its
prose log-perplexity every 50 steps. ``--probe`` fine-tunes the prepared base model (``<data-dir>``'s) with the mini's
workload at each learning rate for ``--probe-steps`` steps of the mini recipe (its batch, LoRA, clip, weight decay;
the cosine over ``--probe-steps``) and prints the evaluation loss every 10 steps and the seconds a step: how the mini
recipe's rate was chosen.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

from trainperf import registry
from trainperf.dist import DistContext
from trainperf.harness.runner import RunObserver, seed_everything
from trainperf.harness.schedule import Schedule
from trainperf.harness.steps import Stepper
from trainperf.harness.torch_state import torch_state
from trainperf.paths import default_data_dir
from trainperf.spec import RunConfig
from trainperf.workloads.llama2_70b_lora import MINI, base

PROBE_SEED = 1  # not a calibration seed


def probe(data_dir: Path, lr: float, steps: int) -> None:
    recipe = dataclasses.replace(
        registry.default_recipe("llama2_70b_lora", "mini"),
        opt_base_learning_rate=lr,
        opt_learning_rate_training_steps=steps,
        max_steps=steps,
    )
    cls = registry.workload_class("llama2_70b_lora")
    with torch_state(cls.TORCH_STATE):
        w = cls(MINI, recipe, RunConfig(seed=PROBE_SEED), data_dir=data_dir, dist=DistContext())
        try:
            w.prepare()
            w.load_data()
            seed_everything(PROBE_SEED)
            model = w.parallelize(w.build_model())
            loss = w.evaluate(model)["eval_loss"]
            print(f"probe: learning rate {lr:g}, {steps} steps; step 0: evaluation loss {loss:.4f}")
            opt, sched = w.build_optimizer(model)
            stepper = Stepper(model, w, opt, sched, RunObserver(), Schedule.for_run(MINI, w))
            batches, spent = w.train_batches(), 0.0
            for step in range(1, steps + 1):
                began = time.perf_counter()
                stepper.step([next(batches)])
                spent += time.perf_counter() - began
                if step % 10 == 0 or step == steps:
                    loss = w.evaluate(model)["eval_loss"]
                    print(f"  step {step}: evaluation loss {loss:.4f} ({spent / step:.3f} s a step)")
        finally:
            w.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", type=Path, default=default_data_dir())
    ap.add_argument("--out", type=Path, help="where to write the base model (a folder)")
    ap.add_argument("--steps", type=int, default=base.BASE_STEPS)
    ap.add_argument("--probe", default="", help="learning rates to fine-tune the prepared base with, comma-separated")
    ap.add_argument("--probe-steps", type=int, default=60)
    args = ap.parse_args()
    if args.out is not None:
        began = time.perf_counter()
        base.make(args.data_dir, args.out, steps=args.steps)
        print(f"written in {time.perf_counter() - began:.0f} s: {args.out}")
    for lr in [float(x) for x in args.probe.split(",") if x]:
        probe(args.data_dir, lr, args.probe_steps)


if __name__ == "__main__":
    main()
