"""What reading the data on the clock costs each mini benchmark: prepare() (untimed) and load_data() (timed).

    python benchmarks/data_on_the_clock.py [--repeats 5]

For every benchmark available at the mini scale, builds its workload as a run does and times
``prepare()`` (before the clock: files and manifests) and ``load_data()`` (after ``run_start``: reading,
parsing, validating), median of ``repeats``. The second and later repeats read from the page cache, as
a suite's second run does; the first repeat is printed apart.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from trainperf import registry
from trainperf.dist import DistContext
from trainperf.harness.torch_state import torch_state
from trainperf.paths import default_data_dir
from trainperf.spec import RunConfig


def timed(key: str, data_dir: Path) -> tuple[float, float]:
    cls = registry.workload_class(key)
    spec, recipe = registry.get_spec(key, "mini"), registry.default_recipe(key, "mini")
    with torch_state(cls.TORCH_STATE):
        w = cls(spec, recipe, RunConfig(seed=0), data_dir=data_dir, dist=DistContext())
        try:
            t0 = time.perf_counter()
            w.prepare()
            t1 = time.perf_counter()
            w.load_data()
            t2 = time.perf_counter()
        finally:
            w.close()
    return t1 - t0, t2 - t1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--data-dir", type=Path, default=default_data_dir())
    a = p.parse_args()
    print(f"{'benchmark':10s} {'prepare (untimed)':>18s} {'load_data (timed)':>18s}   first repeat")
    for key in registry.available("mini"):
        times = [timed(key, a.data_dir) for _ in range(a.repeats)]
        prep = statistics.median(t[0] for t in times)
        load = statistics.median(t[1] for t in times)
        print(f"{key:10s} {prep:16.3f} s {load:16.3f} s   {times[0][0]:.3f} s / {times[0][1]:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
