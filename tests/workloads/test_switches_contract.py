"""The optimization switches that run on a CPU, on every mini workload: one harness step with all of them on.

channels-last (where the model has convolutions), foreach optimizer kernels (where the optimizer has them) and a
prefetching data path, applied by the harness exactly as a run applies them; ``--compile`` is left to
``tests/unit/test_switches.py`` (compiling eight models would take minutes on this CPU).
"""

from __future__ import annotations

import itertools

import pytest
import torch
from stepping import dry_workload

from trainperf import registry
from trainperf.contract.switches import Switches
from trainperf.harness.runner import RunObserver
from trainperf.harness.schedule import Schedule
from trainperf.harness.steps import Stepper
from trainperf.harness.switches import Applied
from trainperf.harness.torch_state import torch_state

KEYS = [k for k in registry.available() if registry.benchmark(k).available_at("mini")]
CPU_SWITCHES = Switches(channels_last=True, optimizer_impl="foreach", prefetch=2)


@pytest.mark.parametrize("key", KEYS)
def test_the_cpu_switches_apply_to_every_mini_workload(key, tmp_path):
    with torch_state(registry.workload_class(key).TORCH_STATE):
        w = dry_workload(key, "mini", tmp_path)
        try:
            applied = Applied.resolve(CPU_SWITCHES, type(w), distributed=False, device_type="cpu")
            model = applied.placed(w.parallelize(applied.model(w.build_model())))
            opt, sched = w.build_optimizer(model)
            applied.optimizer(opt)
            before = [p.detach().clone() for p in model.parameters()]
            stepper = Stepper(model, w, opt, sched, RunObserver(), Schedule.for_run(w.spec, w, dry_run_steps=1))
            batches = applied.batches(itertools.repeat(w.synthetic_batch()))
            # a schedule whose warm-up starts from 0 (Megatron's, deepseekv3_671b's) changes nothing at its first step
            for _ in range(2 if all(g["lr"] == 0 for g in opt.param_groups) else 1):
                stepper.step([next(batches) for _ in range(w.recipe.gradient_accumulation_steps)])
            getattr(batches, "close", lambda: None)()  # the prefetch thread (minigo declares no prefetch)
        finally:
            w.close()
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    if "channels_last" not in applied.ignored:  # a convolutional model, in channels-last
        convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d | torch.nn.Conv3d)]
        fmt = torch.channels_last if isinstance(convs[0], torch.nn.Conv2d) else torch.channels_last_3d
        assert convs[0].weight.is_contiguous(memory_format=fmt)
    expected_impl = "foreach" if "optimizer_impl" not in applied.ignored else "for-loop"
    assert applied.optimizer_used.endswith(expected_impl), applied.optimizer_used
