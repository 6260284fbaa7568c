"""Training throughput (images/s) of the ssd and maskrcnn models at mini and reference size.

    python benchmarks/detection_throughput.py [--steps 10] [--repeats 3] [--reference-batch 2] [--scales mini]

Each measurement times ``steps`` optimizer steps of the harness's own step (``Stepper``: zero_grad, the
workload's loss, backward, optimizer and scheduler) after warm-up and reports the median of ``repeats``
alternating repetitions (the machine is shared and noisy). The mini models train on real batches of the
prepared mini scenes (`trainperf data prepare ssd`; synthetic batches of the same size when they are
missing, said in the output); the reference models run at full size (RetinaNet ResNeXt50-FPN at 800x800,
Mask R-CNN R50-FPN at 800x1216) on synthetic batches.

A peer row times the mini Mask R-CNN with torchvision's own ``MultiScaleRoIAlign`` (same weights, same
batches) in place of trainperf's grid_sample ROI Align, and the ratio of the two is printed. (Both detection
workloads beside torchvision's reference training loop: ``benchmarks/peers.py ssd maskrcnn``.)
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import statistics
import time

import torch
from peers import torchvision_roi_align

from trainperf import registry
from trainperf.dist import init_from_env
from trainperf.errors import DataError
from trainperf.harness.runner import RunObserver, seed_everything
from trainperf.harness.schedule import Schedule
from trainperf.harness.steps import Stepper
from trainperf.paths import default_data_dir
from trainperf.spec import RunConfig


def build(key: str, scale: str, batch: int | None, torchvision_roi: bool = False):
    ctx = init_from_env()
    spec, cls = registry.get_spec(key, scale), registry.workload_class(key)
    recipe = registry.default_recipe(key, scale)
    if batch:
        recipe = dataclasses.replace(recipe, global_batch_size=batch * ctx.world_size)
    source = "synthetic"
    w = None
    if scale == "mini":
        try:
            w = cls(spec, recipe, RunConfig(seed=0), data_dir=default_data_dir(), dist=ctx)
            w.prepare()
            w.load_data()
            source = "mini scenes"
        except DataError:
            w = None
    if w is None:  # a dry run's workload: sizes known, no data read
        w = cls(spec, recipe, RunConfig(seed=0, dry_run=True), data_dir=default_data_dir(), dist=ctx)
    seed_everything(0)
    model = w.build_model()
    if torchvision_roi:
        model = torchvision_roi_align(model)
    model = w.parallelize(model)
    opt, sched = w.build_optimizer(model)
    stepper = Stepper(model, w, opt, sched, RunObserver(), Schedule.for_run(spec, w, dry_run_steps=1))
    if source == "synthetic":
        batches = itertools.repeat(w.synthetic_batch())
    else:
        batches = itertools.cycle(list(itertools.islice(w.train_batches(), 24)))
        w.close()  # the 24 batches are in memory: the training stream is done
    return w, stepper, batches, source


def images_per_second(w, stepper: Stepper, batches, steps: int) -> float:
    stepper.model.train()
    for _ in range(2):  # warm-up
        stepper.step([next(batches)])
    w.dist.synchronize()
    t = time.perf_counter()
    for _ in range(steps):
        stepper.step([next(batches)])
    w.dist.synchronize()
    return steps * w.local_batch_size / (time.perf_counter() - t)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--reference-batch", type=int, default=2, help="per-step batch of the reference models")
    p.add_argument(
        "--scales",
        nargs="+",
        choices=("mini", "reference"),
        default=["mini", "reference"],
        help="which sizes to time (the reference models take minutes on a CPU)",
    )
    a = p.parse_args()
    setups = {}
    peer = ours = None
    for key in ("ssd", "maskrcnn"):
        if "mini" in a.scales:
            w, stepper, batches, source = build(key, "mini", None)
            ours = f"{key} mini ({w.spec.model}; batch {w.local_batch_size}, {source})"
            setups[ours] = (w, stepper, batches)
            if key == "maskrcnn":
                w, stepper, batches, source = build(key, "mini", None, torchvision_roi=True)
                peer = f"{key} mini, peer: torchvision's MultiScaleRoIAlign (batch {w.local_batch_size}, {source})"
                setups[peer] = (w, stepper, batches)
        if "reference" in a.scales:
            w, stepper, batches, source = build(key, "reference", a.reference_batch)
            h, wd = w.REFERENCE_IMAGE
            setups[f"{key} reference ({h}x{wd}, batch {a.reference_batch}, {source})"] = (w, stepper, batches)
    results: dict[str, list[float]] = {name: [] for name in setups}
    for _ in range(a.repeats):
        for name, (w, stepper, batches) in setups.items():
            steps = a.steps if " mini " in name else max(1, a.steps // 5)
            results[name].append(images_per_second(w, stepper, batches, steps))
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else f"CPU, {torch.get_num_threads()} threads"
    print(f"training throughput on {device} (median of {a.repeats}):")
    for name, values in results.items():
        print(f"  {name}: {statistics.median(values):8.2f} images/s  (runs: {', '.join(f'{v:.2f}' for v in values)})")
    if peer is not None:
        ratios = [x / y for x, y in zip(results[ours], results[peer], strict=True)]
        print(
            f"mini Mask R-CNN, grid_sample ROI Align / torchvision's: {statistics.median(ratios):.2f}x "
            "(median of pairs)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
