"""Throughput of the mini unet3d: training samples/s and evaluation volumes/s, beside a MONAI peer in the same run.

    python benchmarks/unet3d_throughput.py [--steps 30] [--repeats 3]

(The training comparison alone, beside every other workload's: ``benchmarks/peers.py unet3d``; the peer's model
and loop come from there.)

trainperf: the mini workload as a run builds it (its data pipeline with the reference's patches and
augmentations, the harness's step, Dice-CE), and its evaluation (the reference's Gaussian-weighted sliding
window over the 16 evaluation cases). Peer: MONAI's ``BasicUNet`` of the same shape (features 8-16-32-64-64,
two convolutions per level, instance norm, four down-samplings) trained by a plain PyTorch loop on the same batches with
MONAI's ``DiceCELoss``, and evaluated by MONAI's ``sliding_window_inference`` (Gaussian mode, overlap 0.5)
on the same cases. The peer's numbers are what a user gets by writing the loop with MONAI; the ratio is
trainperf / peer. Each figure is the median of ``repeats`` alternating repetitions (the machine is shared).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from peers import monai_step, monai_unet

from trainperf import registry
from trainperf.dist import DistContext
from trainperf.harness.runner import RunObserver
from trainperf.harness.schedule import Schedule
from trainperf.harness.steps import Stepper
from trainperf.paths import default_data_dir
from trainperf.spec import RunConfig


def build_workload():
    spec, recipe = registry.get_spec("unet3d", "mini"), registry.default_recipe("unet3d", "mini")
    w = registry.workload_class("unet3d")(
        spec, recipe, RunConfig(seed=5), data_dir=default_data_dir(), dist=DistContext()
    )
    w.prepare()
    w.load_data()
    return w


def train_rate(step, batches, steps: int, batch: int) -> float:
    step(next(batches))  # warm-up
    t = time.perf_counter()
    for _ in range(steps):
        step(next(batches))
    return steps * batch / (time.perf_counter() - t)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(2)
    from monai.inferers import sliding_window_inference

    w = build_workload()
    torch.manual_seed(0)
    ours = w.build_model()
    opt, sched = w.build_optimizer(ours)
    stepper = Stepper(ours, w, opt, sched, RunObserver(), Schedule.for_run(w.spec, w))
    peer = monai_unet()
    peer_step = monai_step(w, peer)

    def peer_eval() -> None:
        peer.eval()
        with torch.no_grad():
            for case in w.eval_cases:
                sliding_window_inference(
                    torch.from_numpy(case.image)[None],
                    w.val_patch,
                    4,
                    peer,
                    overlap=0.5,
                    mode="gaussian",
                    padding_mode="constant",
                    cval=w.flavour.eval_padding,
                )
        peer.train()

    def timed(fn) -> float:
        t = time.perf_counter()
        fn()
        return len(w.eval_cases) / (time.perf_counter() - t)

    batch = w.local_batch_size
    n_ours, n_peer = (sum(p.numel() for p in m.parameters()) for m in (ours, peer))
    rates: dict[str, list[float]] = {k: [] for k in ("train ours", "train peer", "eval ours", "eval peer")}
    batches = iter(w.train_batches())
    for _ in range(a.repeats):
        rates["train ours"].append(train_rate(lambda b: stepper.step([b]), batches, a.steps, batch))
        rates["train peer"].append(train_rate(peer_step, batches, a.steps, batch))
        rates["eval ours"].append(timed(lambda: w.case_scores(ours)))
        rates["eval peer"].append(timed(peer_eval))
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(
        f"unet3d mini, batch {batch} of {list(w.train_patch)} patches, {len(w.eval_cases)} evaluation cases; "
        f"median of {a.repeats}"
    )
    print(
        f"  trainperf MiniUNet3D ({n_ours:,} parameters): {med['train ours']:7.1f} training samples/s, "
        f"{med['eval ours']:6.2f} evaluation volumes/s"
    )
    print(
        f"  peer MONAI BasicUNet ({n_peer:,} parameters): {med['train peer']:7.1f} training samples/s, "
        f"{med['eval peer']:6.2f} evaluation volumes/s"
    )
    print(
        f"  ratio trainperf / peer: training {med['train ours'] / med['train peer']:.2f}, "
        f"evaluation {med['eval ours'] / med['eval peer']:.2f}"
    )
    for k, v in rates.items():
        print(f"    {k}: " + ", ".join(f"{x:.2f}" for x in v))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
