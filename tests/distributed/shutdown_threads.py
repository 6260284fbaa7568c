"""Join the gloo group, import a workload (torchvision, and with it torch._dynamo), leave the group, and write the
names of this rank's threads that are still running as JSON; run under torchrun.

python -m torch.distributed.run --standalone --nproc_per_node=2 tests/distributed/shutdown_threads.py OUT_DIR
"""

from __future__ import annotations

import gc
import json
import os
import sys
from pathlib import Path

from trainperf import dist, registry


def main() -> None:
    out = Path(sys.argv[1])
    ctx = dist.init_from_env()
    registry.workload_class("resnet")  # imported after the group exists, as the runner does
    ctx.all_reduce([1.0])
    dist.shutdown(ctx, completed=True)
    gc.collect()
    names = sorted(Path(f"/proc/self/task/{t}/comm").read_text().strip() for t in os.listdir("/proc/self/task"))
    (out / f"rank{ctx.rank}.json").write_text(json.dumps(names))


if __name__ == "__main__":
    main()
