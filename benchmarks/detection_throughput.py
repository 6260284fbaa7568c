"""Training throughput (images/s) of the ssd and maskrcnn models at mini and reference size.

    python benchmarks/detection_throughput.py [--steps 10] [--repeats 3] [--reference-batch 2] [--scales mini]

Each measurement times ``steps`` optimizer steps of the workload's own ``train_step`` after warm-up and
reports the median of ``repeats`` alternating repetitions (the machine is shared and noisy). The mini
models train on real batches of the prepared mini scenes (`trainperf data prepare ssd`; synthetic batches
of the same size when they are missing, said in the output); the reference models run at full size
(RetinaNet ResNeXt50-FPN at 800x800, Mask R-CNN R50-FPN at 800x1216) on synthetic batches.

A peer row times the mini Mask R-CNN with torchvision's own ``MultiScaleRoIAlign`` (same weights, same
batches) in place of trainperf's grid_sample ROI Align, and the ratio of the two is printed.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

import torch
from torchvision.ops import MultiScaleRoIAlign

from trainperf.cli import default_data_dir
from trainperf.errors import DataError
from trainperf.harness.dist import init_from_env
from trainperf.spec import RunConfig
from trainperf.workloads.maskrcnn.workload import MaskRCNNWorkload
from trainperf.workloads.ssd.workload import SSDWorkload


def build(cls, scale: str, batch: int | None, torchvision_roi_align: bool = False):
    ctx = init_from_env()
    spec = cls.SPECS[scale]
    source = "synthetic"
    w = None
    if scale == "mini":
        try:
            w = cls(spec, RunConfig(seed=0), data_dir=default_data_dir(), dist=ctx)
            w.prepare()
            source = "mini scenes"
        except DataError:
            w = None
    if w is None:
        w = cls(spec, RunConfig(seed=0, dry_run=True), data_dir=default_data_dir(), dist=ctx)
        w.prepare()
    if batch:
        w.recipe["global_batch_size"] = w.local_batch = batch
    torch.manual_seed(0)
    model = w.build_model()
    if torchvision_roi_align:
        heads = model.roi_heads
        names = heads.box_roi_pool.featmap_names
        heads.box_roi_pool = MultiScaleRoIAlign(names, heads.box_roi_pool.output_size, sampling_ratio=1)
        heads.mask_roi_pool = MultiScaleRoIAlign(names, heads.mask_roi_pool.output_size, sampling_ratio=1)
    model = model.to(ctx.device)
    opt, _ = w.build_optimizer(model)
    if source == "synthetic":
        batches = itertools.repeat(w.synthetic_batch())
    else:
        batches = itertools.cycle(list(itertools.islice(w.train_loader(0), 24)))
    return w, model, opt, batches, source


def images_per_second(w, model, opt, batches, steps: int) -> float:
    model.train()
    for _ in range(2):  # warm-up
        w.train_step(model, next(batches), opt)
    w.dist.synchronize()
    t = time.perf_counter()
    for _ in range(steps):
        w.train_step(model, next(batches), opt)
    w.dist.synchronize()
    return steps * w.local_batch / (time.perf_counter() - t)


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
    for key, cls in (("ssd", SSDWorkload), ("maskrcnn", MaskRCNNWorkload)):
        if "mini" in a.scales:
            w, model, opt, batches, source = build(cls, "mini", None)
            ours = f"{key} mini ({cls.SPECS['mini'].model}; batch {w.local_batch}, {source})"
            setups[ours] = (w, model, opt, batches)
            if key == "maskrcnn":
                w, model, opt, batches, source = build(cls, "mini", None, torchvision_roi_align=True)
                peer = f"{key} mini, peer: torchvision's MultiScaleRoIAlign (batch {w.local_batch}, {source})"
                setups[peer] = (w, model, opt, batches)
        if "reference" in a.scales:
            w, model, opt, batches, source = build(cls, "reference", a.reference_batch)
            h, wd = cls.REFERENCE_IMAGE
            setups[f"{key} reference ({h}x{wd}, batch {a.reference_batch}, {source})"] = (w, model, opt, batches)
    results: dict[str, list[float]] = {name: [] for name in setups}
    for _ in range(a.repeats):
        for name, (w, model, opt, batches) in setups.items():
            steps = a.steps if " mini " in name else max(1, a.steps // 5)
            results[name].append(images_per_second(w, model, opt, batches, steps))
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else f"CPU, {torch.get_num_threads()} threads"
    print(f"training throughput on {device} (median of {a.repeats}):")
    for name, values in results.items():
        print(f"  {name}: {statistics.median(values):8.2f} images/s  (runs: {', '.join(f'{v:.2f}' for v in values)})")
    if peer is not None:
        ratios = [x / y for x, y in zip(results[ours], results[peer], strict=True)]
        print(
            f"mini Mask R-CNN, grid_sample ROI Align / torchvision's: {statistics.median(ratios):.2f}x (median of pairs)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
