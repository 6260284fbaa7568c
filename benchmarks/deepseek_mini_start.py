"""deepseekv3_671b mini's starting checkpoint, made again anywhere, with the figures its README gives.

    python benchmarks/deepseek_mini_start.py --out /tmp/start            # train and write it; print its curve
    python benchmarks/deepseek_mini_start.py --out /tmp/start --probe 1e-3,2e-3,3e-3 --probe-steps 60
    python benchmarks/deepseek_mini_start.py --start ~/.cache/trainperf/data/deepseekv3_671b/mini/start --probe 2e-3
    python benchmarks/deepseek_mini_start.py --step-cost                 # seconds a step, beside llama31_8b's mini

The checkpoint is what `trainperf data prepare deepseekv3_671b` writes under ``<data-dir>/deepseekv3_671b/mini/start``
(``trainperf/workloads/deepseekv3_671b/mini_start.py``: the ``mini`` flavour trained from scratch for 100 steps of 32
sequences on llama31_8b's mini training split, never on the validation documents): here it is written to ``--out``
and its validation log-perplexity printed every 25 steps, from the untrained model's to the checkpoint's as written
(bf16). ``--probe`` then continues from it with each learning rate for ``--probe-steps`` steps (warm-up of 4 steps
from 0, flat after; the mini's training step; the sequences in seed 1's order, not the checkpoint's) and prints each
one's curve: how the mini recipe's rate was chosen. ``--step-cost`` times the training step (forward, backward,
AdamW; flush-denormal on, as the runs) of llama31_8b's mini, of the mini flavour and of the mini flavour with
DeepSeek-V3's prediction layer, on the same batches, medians of ``--steps-timed`` steps after two untimed ones.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from trainperf.paths import default_data_dir
from trainperf.workloads.common.llm.model import Decoder
from trainperf.workloads.deepseekv3_671b import mini_start
from trainperf.workloads.deepseekv3_671b.model import FLAVOURS
from trainperf.workloads.llama31_8b.workload import FLAVOURS as LLAMA_FLAVOURS

PROBE_SEED = 1


def step_cost(data_dir: Path, timed: int) -> None:
    data = mini_start.mini_data(data_dir)
    batches = [next(b) for b in [data.train_batches()] for _ in range(timed + 2)]
    data.close()
    with_mtp = dataclasses.replace(FLAVOURS["mini"], mtp_layers=1, mtp_loss_scale=0.1)  # what the mini leaves out
    flavours = [("llama31_8b mini", LLAMA_FLAVOURS["mini"]), ("deepseekv3_671b mini", FLAVOURS["mini"])]
    for name, a in [*flavours, ("deepseekv3_671b mini with a prediction layer", with_mtp)]:
        torch.manual_seed(0)
        model = Decoder(a)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        seconds = []
        for batch in batches:
            start = time.perf_counter()
            if a.mtp_layers:
                logits, mtp = model(batch[:, :-1], batch[:, 1:])
                loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten()) + a.mtp_loss_scale * mtp
            else:
                loss = F.cross_entropy(model(batch[:, :-1]).flatten(0, 1), batch[:, 1:].flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            seconds.append(time.perf_counter() - start)
        params = sum(p.numel() for p in model.parameters())
        print(f"{name}: {params:,} parameters, {statistics.median(seconds[2:]):.3f} s a step (median of {timed})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", type=Path, default=default_data_dir())
    ap.add_argument("--out", type=Path, help="where to write the checkpoint (a folder)")
    ap.add_argument("--start", type=Path, help="probe from this checkpoint folder instead of training one")
    ap.add_argument("--steps", type=int, default=mini_start.START_STEPS)
    ap.add_argument("--probe", default="", help="learning rates to continue from the checkpoint with, comma-separated")
    ap.add_argument("--probe-steps", type=int, default=60)
    ap.add_argument("--step-cost", action="store_true")
    ap.add_argument("--steps-timed", type=int, default=10)
    args = ap.parse_args()
    torch.set_flush_denormal(True)
    if args.step_cost:
        step_cost(args.data_dir, args.steps_timed)
    if args.out is not None:
        began = time.perf_counter()
        mini_start.make_start(args.data_dir, args.out, steps=args.steps)
        print(f"written in {time.perf_counter() - began:.0f} s: {args.out}")
    start = args.start or args.out
    if args.probe and start is None:
        ap.error("--probe continues from a checkpoint: give --start FOLDER or --out FOLDER")
    for lr in [float(x) for x in args.probe.split(",") if x]:
        data = mini_start.mini_data(args.data_dir, seed=PROBE_SEED)  # another order than the checkpoint's
        try:
            model = mini_start.load(start)
            print(f"probe: learning rate {lr:g}, {args.probe_steps} steps from the checkpoint")
            mini_start.train(model, data, steps=args.probe_steps, lr=lr, warmup=4, report=print, every=20)
        finally:
            data.close()


if __name__ == "__main__":
    main()
