"""llama2_70b_lora's reference step on one GPU: samples/s per GPU of Llama 2 70B with the reference's LoRA at its real
layer shapes with fewer blocks, the 80 blocks' rate estimated from them, beside the published rate.

    python benchmarks/gpu_lora.py --out "$OUT"              # on a CUDA machine (benchmarks/gpu_stack.py calls it)
    python benchmarks/gpu_lora.py --cpu-check --out /tmp/l  # the same script on a CPU, at the debug flavour's width

The reference fine-tunes the 70B on 8 GPUs with its parameters sharded (DeepSpeed ZeRO-3; FSDP2 in trainperf), one
sequence of 8,192 tokens per GPU a step; one GPU of such a system computes the whole model's forward and backward pass
on its sequence. The 70B's frozen bf16 weights (138 GB) do not fit one GPU, so this builds the workload's own model
(the ``70B`` flavour's ``Decoder``, the reference's layer shapes, vocabulary and sequence length, with peft's LoRA of
the recipe on its fused qkv and output projections, as ``LoraWorkload.build_model`` does) at 2 and at 4 of its 80
blocks, bf16 base and fp32 adapters, activation checkpointing on (the reference's ``--use_gradient_checkpointing``),
and times forward, the causal-LM loss over every token (the reference's training rows are labelled whole), backward
and AdamW over the adapters. The step's time is fitted as ``a + b * blocks`` and the 80 blocks' estimated from it.
Not in the figure: the all-gathers and reduce-scatters that ZeRO-3 or FSDP2 add (overlapped with the compute).

Beside it: the fastest closed 8-accelerator llama2_70b_lora result of the shipped table, as samples/s per
accelerator, from the reference's RCP mean at batch 8 (mlperf-logging ``training_6.1.0/rcps_llama2_70b_lora.json``,
in samples) over the result's minutes and 8 accelerators; that whole-run rate includes the evaluations, so its
training rate is somewhat higher.

Writes ``OUT/gpu_lora.json`` and ``OUT/gpu_lora.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path

SEQ_LEN = 8192  # the reference's sequence length (max_seq_len 8192)
BLOCKS = (2, 4)  # the models measured
FULL_BLOCKS = 80  # Llama 2 70B
RCP_BATCH = 8  # the reference's global batch (rcps_llama2_70b_lora.json llama2_70b_lora_ref_8)
CPU_SEQ_LEN = 64  # --cpu-check: the debug flavour, short sequences, fp32

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_llama import fastest_published  # noqa: E402 (a sibling script: the published table's fastest result)


def published_rate() -> dict | None:
    """The fastest closed 8-accelerator llama2_70b_lora result of the shipped table, as samples/s per accelerator."""
    return fastest_published("llama2_70b_lora", "rcps_llama2_70b_lora.json", RCP_BATCH, "samples to converge")


def build(config, recipe, device, dtype):
    """The decoder of ``config`` with the recipe's LoRA, the base in ``dtype`` and frozen, the adapters fp32."""
    import peft
    import torch

    from trainperf.workloads.common.llm.model import Decoder
    from trainperf.workloads.llama2_70b_lora.model import LORA_TARGETS

    torch.manual_seed(0)
    with torch.device("meta"):
        model = Decoder(config)
    lora = peft.LoraConfig(
        r=recipe.lora_rank, lora_alpha=recipe.lora_alpha, lora_dropout=recipe.lora_dropout,
        target_modules=LORA_TARGETS, bias="none",
    )  # fmt: skip
    model = peft.inject_adapter_in_model(lora, model)
    model = model.to_empty(device=device)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.zero_()
            elif p.ndim == 1:
                p.fill_(1.0)
            else:
                p.normal_(0.0, config.init_std)
            if not p.requires_grad and p.ndim > 1:  # as the workload: frozen matrices in bf16, norms fp32
                p.data = p.data.to(dtype)
    model.reset_rope()
    model.train()
    return model


def measure(args: argparse.Namespace, config, recipe, seq: int) -> dict:
    """Median samples/s of forward, loss, backward and the adapters' AdamW step on one sequence, and the peak memory."""
    import torch

    from trainperf.workloads.llama2_70b_lora.loss import causal_lm_loss

    device = torch.device("cpu" if args.cpu_check else "cuda")
    dtype = torch.float32 if args.cpu_check else torch.bfloat16
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    try:
        model = build(config, recipe, device, dtype)
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=recipe.opt_base_learning_rate)
        ids = torch.randint(0, config.vocab_size, (1, seq + 1), device=device)

        def step() -> None:
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                loss = causal_lm_loss(model, ids, ids)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        def sync() -> None:
            if device.type == "cuda":
                torch.cuda.synchronize()

        seconds = []
        for _ in range(args.warmup):
            step()
        for _ in range(args.repeats):
            sync()
            t = time.perf_counter()
            for _ in range(args.steps):
                step()
            sync()
            seconds.append((time.perf_counter() - t) / args.steps)
    except torch.OutOfMemoryError as e:
        return {"error": f"out of memory: {str(e).splitlines()[0]}"}
    return {
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "step_seconds": statistics.median(seconds),
        "samples_per_second": 1.0 / statistics.median(seconds),
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else None,
        "error": "",
    }


def estimate(rows: list[dict], blocks: int) -> dict | None:
    """The step time of ``blocks`` blocks from ``a + b * blocks`` fitted to the rows; None if a row failed."""
    import numpy as np

    if any(r["error"] for r in rows):
        return None
    x = np.array([[1.0, r["blocks"]] for r in rows])
    coef = np.linalg.lstsq(x, np.array([r["step_seconds"] for r in rows]), rcond=None)[0]
    seconds = float(coef[0] + coef[1] * blocks)
    return {
        "blocks": blocks,
        "fixed_seconds": float(coef[0]),
        "block_seconds": float(coef[1]),
        "step_seconds": seconds,
        "samples_per_second": 1.0 / seconds,
    }


def markdown(flavour: str, seq: int, rows: list[dict], full: dict | None, published: dict | None) -> str:
    lines = [
        f"llama2_70b_lora: the {flavour} flavour's blocks with LoRA r16 on qkv and o, {seq:,} tokens, forward, loss, "
        "backward and the adapters' AdamW step of one sequence, activation checkpointing on",
        "",
        "| blocks | device | samples/s per GPU | step (s) | peak memory (GiB) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        if r["error"]:
            lines.append(f"| {r['blocks']} | – | {r['error']} | – | – |")
            continue
        mem = "–" if r["peak_memory_gib"] is None else f"{r['peak_memory_gib']:.1f}"
        lines.append(
            f"| {r['blocks']} | {r['device']} | {r['samples_per_second']:.3f} | {r['step_seconds']:.3f} | {mem} |"
        )
    if full is None:
        lines.append("\nNo estimate of the 80 blocks: a model above did not measure.")
    else:
        lines.append(
            f"\nEstimated for the reference's {full['blocks']} blocks from {full['fixed_seconds']:.3f} s fixed and "
            f"{full['block_seconds']:.3f} s a block: {full['step_seconds']:.2f} s a sequence, "
            f"{full['samples_per_second']:.3f} samples/s per GPU (one GPU holding the whole model, which it cannot; "
            "no collectives)."
        )
    if published:
        rate = published["samples_per_second_per_accelerator"]
        ratio = f" (estimate / published: {full['samples_per_second'] / rate:.2f})" if full else ""
        lines.append(
            f"Published: {published['system']} ({published['accelerator']}, {published['round']}), "
            f"{published['minutes']:.2f} min for {published['samples_to_converge']:,.0f} samples (RCP mean at batch "
            f"{RCP_BATCH}): {published['samples_per_second_per_accelerator']:.3f} samples/s per accelerator{ratio}."
        )
    else:
        lines.append("Published: no closed 8-accelerator llama2_70b_lora result in the shipped table.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "/tmp/gpu-lora"))
    p.add_argument("--steps", type=int, default=2, help="timed steps per repeat (default 2)")
    p.add_argument("--repeats", type=int, default=3, help="repeats; the median is reported (default 3)")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps first (default 1)")
    p.add_argument(
        "--cpu-check", action="store_true", help="run the debug flavour on a CPU: checks the script, measures nothing"
    )
    args = p.parse_args(argv)
    if min(args.steps, args.repeats) < 1 or args.warmup < 0:
        p.error("--steps and --repeats must be at least 1, --warmup at least 0")
    import torch

    from trainperf.workloads.llama2_70b_lora import REFERENCE_RECIPE
    from trainperf.workloads.llama2_70b_lora.model import FLAVOURS

    if not torch.cuda.is_available() and not args.cpu_check:
        p.error("no CUDA device here: this check is for a GPU (--cpu-check runs it on a CPU at a toy width)")
    flavour, seq = ("debug", CPU_SEQ_LEN) if args.cpu_check else ("70B", SEQ_LEN)
    base = dataclasses.replace(FLAVOURS[flavour], checkpoint_activations=True)
    base = dataclasses.replace(base, max_seq_len=max(base.max_seq_len, seq))
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for blocks in BLOCKS:
        config = dataclasses.replace(base, n_layers=blocks)
        rows.append({"blocks": blocks, **measure(args, config, REFERENCE_RECIPE, seq)})
        print(f"llama2_70b_lora, {blocks} blocks: {rows[-1]['error'] or 'done'}", flush=True)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    full = estimate(rows, FULL_BLOCKS)
    published = published_rate()
    doc = {"flavour": flavour, "sequence_length": seq, "rows": rows, "estimate": full, "published": published}
    (args.out / "gpu_lora.json").write_text(json.dumps(doc, indent=2) + "\n")
    table = markdown(flavour, seq, rows, full, published)
    (args.out / "gpu_lora.md").write_text(table)
    print(table)
    return 0 if full is not None else 1


if __name__ == "__main__":
    sys.exit(main())
