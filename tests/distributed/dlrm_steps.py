"""A few mini dlrm training steps on fixed synthetic global batches; writes the final logits of a probe batch.

python tests/distributed/dlrm_steps.py OUT_JSON [reference]   (alone, or under torchrun: tables sharded)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from trainperf import dist, registry
from trainperf.harness.runner import seed_everything
from trainperf.spec import RunConfig

GLOBAL_BATCH = 48
STEPS = 4


def main() -> None:
    out, scale = Path(sys.argv[1]), (sys.argv[2] if len(sys.argv) > 2 else "mini")
    ctx = dist.init_from_env()
    torch.set_num_threads(1)
    # In float64, so that what is compared is the sharding, not the order of fp32 sums: the reference's SGD at rate
    # 24 turns fp32 reassociation (the gradient averaged over ranks in another order) into differences of 5e-4 on
    # some processors, while a wrong table row or gradient moves the logits by far more.
    torch.set_default_dtype(torch.float64)
    spec = registry.get_spec("dlrm", scale)
    recipe = registry.default_recipe("dlrm", scale).with_overrides({"global_batch_size": GLOBAL_BATCH})
    cfg = RunConfig(seed=7, dry_run=scale == "reference")
    w = registry.workload_class("dlrm")(spec, recipe, cfg, data_dir=Path("."), dist=ctx)
    seed_everything(7)
    model = w.parallelize(w.build_model())
    opt, sched = w.build_optimizer(model)
    g = torch.Generator().manual_seed(11)
    sizes = torch.tensor(w.model_config.table_sizes)
    mine = slice(ctx.rank * w.local_batch_size, (ctx.rank + 1) * w.local_batch_size)
    for _ in range(STEPS):
        dense = torch.rand(GLOBAL_BATCH, 13, generator=g) * 3
        sparse = (torch.rand(GLOBAL_BATCH, 26, generator=g) * torch.minimum(sizes, torch.tensor(40))).long()
        labels = torch.randint(0, 2, (GLOBAL_BATCH,), generator=g).float()
        opt.zero_grad()
        w.loss(model, (dense[mine], sparse[mine], labels[mine])).backward()
        opt.step()
        sched.step()
    probe_dense = torch.rand(10, 13, generator=g)
    probe_sparse = (torch.rand(10, 26, generator=g) * torch.minimum(sizes, torch.tensor(40))).long()
    with torch.no_grad():
        logits = model(probe_dense, probe_sparse)  # every rank scores the whole probe (padded batches aside)
    if ctx.is_main:
        out.write_text(json.dumps({"logits": logits.tolist(), "world_size": ctx.world_size}))
    dist.shutdown(ctx, completed=True)


if __name__ == "__main__":
    main()
