"""The harness's own overhead against the workload's work, measured two ways.

    python benchmarks/harness_overhead.py [--repeats 5] [--steps 100]

1. Progress display: ``steps`` mini resnet training steps driven by the harness's Stepper with
   the live progress bar (rendered to a terminal-like buffer) against the same steps with no observer,
   alternated ``repeats`` times; the median ratio is the display's cost.
2. Every run also records the time spent outside the workload (logging, eval scheduling, clock reads)
   as ``harness_overhead`` in summary.json; see benchmarks/calibrate.py for those figures.
"""

from __future__ import annotations

import argparse
import io
import statistics
import time
from pathlib import Path

from rich.console import Console

from trainperf import registry
from trainperf.dist import DistContext
from trainperf.harness.mllog import RunLog
from trainperf.harness.progress import ProgressBar
from trainperf.harness.runner import RunObserver
from trainperf.harness.schedule import Schedule
from trainperf.harness.steps import Stepper
from trainperf.paths import default_data_dir
from trainperf.spec import RunConfig


def timed(w, model, opt, sched, batches, steps: int, observer: RunObserver) -> float:
    schedule = Schedule.for_run(w.spec, w)
    observer.run_started(w.spec, schedule.points[-1])
    stepper = Stepper(model, w, opt, sched, observer, schedule)
    t = time.perf_counter()
    stepper.train_until(steps, batches, RunLog(None))
    dt = time.perf_counter() - t
    observer.run_stopped(None)  # type: ignore[arg-type]
    return dt


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--data-dir", type=Path, default=default_data_dir())
    a = p.parse_args()
    spec = registry.get_spec("resnet", "mini")
    recipe = registry.default_recipe("resnet", "mini")
    w = registry.workload_class("resnet")(spec, recipe, RunConfig(seed=0), data_dir=a.data_dir, dist=DistContext())
    w.prepare()
    w.load_data()
    model = w.build_model()
    opt, sched = w.build_optimizer(model)
    batches = w.train_batches()
    ratios = []
    for _ in range(a.repeats):
        bare = timed(w, model, opt, sched, batches, a.steps, RunObserver())
        console = Console(file=io.StringIO(), force_terminal=True, width=120)
        shown = timed(w, model, opt, sched, batches, a.steps, ProgressBar(console, "resnet"))
        ratios.append(shown / bare)
    print(
        f"progress bar: {a.steps} steps take {statistics.median(ratios):.4f}x the time without it "
        f"(median of {a.repeats}; runs: {', '.join(f'{r:.4f}' for r in ratios)})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
