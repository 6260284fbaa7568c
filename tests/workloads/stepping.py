"""One harness step of a workload on its synthetic batch, the way the runner takes it (dry-run set-up)."""

from __future__ import annotations

import torch

from trainperf import registry
from trainperf.contract.workload import Workload
from trainperf.dist import DistContext
from trainperf.harness.runner import RunObserver, check_batch, dry_run_recipe
from trainperf.harness.schedule import Schedule
from trainperf.harness.steps import Stepper
from trainperf.spec import RunConfig


def dry_workload(key: str, scale: str, tmp_path, seed: int = 3) -> Workload:
    """The workload of ``key`` at ``scale`` as a dry run builds it (no data read)."""
    spec = registry.get_spec(key, scale)
    cls = registry.workload_class(key)
    dist = DistContext()
    recipe = dry_run_recipe(cls, spec, registry.default_recipe(key, scale), dist)
    check_batch(cls, spec, recipe, dist)
    return cls(spec, recipe, RunConfig(seed=seed, dry_run=True), data_dir=tmp_path, dist=dist)


def one_step(w: Workload) -> tuple[torch.nn.Module, dict[str, float]]:
    """Build, take one optimizer step on a synthetic batch (parameters must change; two where the learning rate starts
    at 0), evaluate the dry way."""
    model = w.parallelize(w.build_model())
    opt, sched = w.build_optimizer(model)
    before = [p.detach().clone() for p in model.parameters()]
    schedule = Schedule.for_run(w.spec, w, dry_run_steps=1)
    stepper = Stepper(model, w, opt, sched, RunObserver(), schedule)
    # a schedule whose warm-up starts from 0 (Megatron's, deepseekv3_671b's) changes nothing at its first step
    steps = 2 if all(g["lr"] == 0 for g in opt.param_groups) else 1
    for _ in range(steps):
        stepper.step([w.synthetic_batch() for _ in range(w.recipe.gradient_accumulation_steps)])
    changed = sum(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert changed > 0, "one optimizer step changed no parameter"
    value = dict(w.dry_run_evaluate(model))
    assert set(value) == {f for f, _ in w.spec.fields}
    assert set(w.hparams()) >= set(w.spec.hparam_keys)
    return model, value
