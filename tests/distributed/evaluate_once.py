"""Evaluate untrained mini workloads (seeded), one after the other, and write their qualities as JSON; run alone or
under torchrun. One process (or one job) for them all: starting torch on three ranks costs more than most
evaluations.

python tests/distributed/evaluate_once.py KEY[,KEY...] DATA_DIR OUT_JSON
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from trainperf import dist, registry
from trainperf.harness.runner import seed_everything
from trainperf.harness.torch_state import torch_state
from trainperf.spec import RunConfig


def evaluate(key: str, data_dir: Path, ctx: dist.DistContext) -> dict:
    cls = registry.workload_class(key)
    with torch_state(cls.TORCH_STATE):
        w = cls(
            registry.get_spec(key, "mini"),
            registry.default_recipe(key, "mini"),
            RunConfig(seed=5),
            data_dir=data_dir,
            dist=ctx,
        )
        try:
            w.prepare()
            w.load_data()
            seed_everything(5)
            return dict(w.evaluate(w.parallelize(w.build_model())))
        finally:
            w.close()


def main() -> None:
    keys, data_dir, out = sys.argv[1].split(","), Path(sys.argv[2]), Path(sys.argv[3])
    ctx = dist.init_from_env()
    values = {key: evaluate(key, data_dir, ctx) for key in keys}
    if ctx.is_main:
        out.write_text(json.dumps({"values": values, "world_size": ctx.world_size}))
    dist.shutdown(ctx, completed=True)


if __name__ == "__main__":
    main()
