"""Evaluate one untrained mini workload (seeded) and write its quality as JSON; run alone or under torchrun.

python tests/distributed/evaluate_once.py KEY DATA_DIR OUT_JSON
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from trainperf import dist, registry
from trainperf.harness.runner import seed_everything
from trainperf.harness.torch_state import torch_state
from trainperf.spec import RunConfig


def main() -> None:
    key, data_dir, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    ctx = dist.init_from_env()
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
            value = dict(w.evaluate(w.parallelize(w.build_model())))
        finally:
            w.close()
    if ctx.is_main:
        out.write_text(json.dumps({"value": value, "world_size": ctx.world_size}))
    dist.shutdown(ctx, completed=True)


if __name__ == "__main__":
    main()
