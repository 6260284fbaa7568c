"""The loss of each of a mini run's first optimizer steps, to show that a change made for speed keeps the maths.

    python benchmarks/first_losses.py gpt_oss_20b --seed 100001 --steps 5

The workload is built, seeded and stepped in a run's order (the seed derived for rank 0 before ``prepare``, the run's
seed before ``build_model`` and ``parallelize``, ``load_data``, ``build_optimizer``, then zero_grad, the workload's
loss, backward, the recipe's clipping, the optimizer and its scheduler), under the workload's torch settings, fp32,
one process. Each
loss is printed in decimal and as the float's exact hexadecimal form: two code versions that print the same lines
computed the same steps bit for bit.
"""

from __future__ import annotations

import argparse

import torch

from trainperf import registry, seeds
from trainperf.dist import DistContext
from trainperf.harness.runner import seed_everything
from trainperf.harness.torch_state import torch_state
from trainperf.paths import default_data_dir
from trainperf.spec import RunConfig


def first_losses(key: str, seed: int, steps: int) -> list[float]:
    spec, recipe = registry.get_spec(key, "mini"), registry.default_recipe(key, "mini")
    cls = registry.workload_class(key)
    with torch_state(cls.TORCH_STATE):
        w = cls(spec, recipe, RunConfig(seed=seed), data_dir=default_data_dir(), dist=DistContext())
        try:
            seed_everything(seeds.derive(seed, 0))
            w.prepare()
            seed_everything(seed)
            model = w.parallelize(w.build_model())  # placed as a run places it (a starting checkpoint loaded there)
            w.load_data()
            opt, sched = w.build_optimizer(model)
            batches = w.train_batches()
            model.train()
            losses = []
            for _ in range(steps):
                opt.zero_grad(set_to_none=True)
                loss = w.loss(model, next(batches))
                loss.backward()
                if w.recipe.clip_grad_norm > 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), w.recipe.clip_grad_norm)
                opt.step()
                if sched is not None:
                    sched.step()
                losses.append(loss.item())
        finally:
            w.close()
    return losses


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("key", choices=registry.available("mini"), help="a benchmark with a mini scale")
    p.add_argument("--seed", type=int, default=100001, help="the run's seed (default 100001)")
    p.add_argument("--steps", type=int, default=5, help="optimizer steps (default 5)")
    a = p.parse_args(argv)
    if a.steps < 1:
        p.error("--steps must be at least 1")
    for i, loss in enumerate(first_losses(a.key, a.seed, a.steps), 1):
        print(f"step {i}: loss {loss:.9f} ({loss.hex()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
