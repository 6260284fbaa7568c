"""llama31_8b's reference step on one GPU: tokens/s per GPU of Llama 3.1 8B at 8,192 tokens, beside the published rate.

    python benchmarks/gpu_llama.py --out "$OUT"            # on a CUDA machine (benchmarks/gpu_stack.py calls it)
    python benchmarks/gpu_llama.py --cpu-check --out /tmp/l # the same script on a CPU, at the debug flavour's width

The reference trains the 8B on 8 GPUs with its parameters, gradients and optimizer state sharded (FSDP2 in
trainperf); one GPU of such a system computes the whole model's forward and backward pass on its own sequences,
which is what this measures: the workload's own decoder (``Decoder`` of the ``8B`` flavour, the model a reference
run builds), bf16 parameters, one sequence of 8,192 tokens a step (the reference's 16 sequences a step over 8 GPUs:
2 each, taken one at a time), forward, next-token loss and backward, with activation checkpointing off and on (the
workload's ``activation_checkpointing`` switch; off may not fit 80 GB, and the table says so). The optimizer step is
not in the figure: each of the 8 GPUs updates one eighth of the AdamW state (8B x 12 bytes / 8 = 12 GB of fp32
master weights and moments; it does not fit beside the unsharded model on one GPU), a step of a few milliseconds
against seconds of compute. Nor are the all-gathers and reduce-scatters that FSDP2 overlaps with the compute.

Beside it: the fastest closed 8-accelerator result of the published table (v5.1) as tokens/s per accelerator, from
the reference's RCP mean at batch 16 (mlperf-logging ``training_6.1.0/rcps_llama31_8b.json``, in sequences) times
8,192 tokens over the result's minutes and 8 accelerators. That whole-run rate includes the evaluations, so its
training rate is somewhat higher; the published systems are Blackwell and MI355X, not the GPU this runs on.

Writes ``OUT/gpu_llama.json`` and ``OUT/gpu_llama.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from importlib import resources
from pathlib import Path

SEQ_LEN = 8192  # the reference's sequence length (max_sequence_length)
GPUS = 8
RCP_BATCH = 16  # the reference's global batch (rcps_llama31_8b.json llama31_8b_ref_16)
CPU_SEQ_LEN = 64  # --cpu-check: the debug flavour, short sequences, fp32 (bf16 products are slow on most CPUs)


def fastest_published(benchmark: str, rcp_file: str, rcp_batch: int, rcp_field: str) -> dict | None:
    """The fastest closed 8-accelerator result of ``benchmark`` in the shipped table, with the samples it converges
    in (the mean of ``rcp_field`` of the RCP at ``rcp_batch`` in mlperf-logging's ``training_6.1.0/<rcp_file>``) and
    so its samples/s per accelerator."""
    from trainperf.history.query import load_results

    rows = [
        r
        for r in load_results()
        if r.benchmark == benchmark and r.division == "closed" and r.n_acc == GPUS and r.raw_score_min
    ]
    if not rows:
        return None
    best = min(rows, key=lambda r: r.raw_score_min)
    rcps = json.loads(resources.files("mlperf_logging").joinpath(f"rcp_checker/training_6.1.0/{rcp_file}").read_text())
    [runs] = [v[rcp_field] for v in rcps.values() if v.get("BS") == rcp_batch]
    samples = statistics.fmean(runs)
    return {
        "round": best.round,
        "system": best.system,
        "accelerator": best.accelerator,
        "minutes": best.raw_score_min,
        "samples_to_converge": samples,
        "samples_per_second_per_accelerator": samples / (best.raw_score_min * 60) / GPUS,
    }


def published_rate() -> dict | None:
    """The fastest closed 8-accelerator llama31_8b result of the shipped table, as tokens/s per accelerator."""
    p = fastest_published("llama31_8b", "rcps_llama31_8b.json", RCP_BATCH, "Epochs to converge")  # in sequences
    if p is None:
        return None
    sequences = p.pop("samples_to_converge")
    del p["samples_per_second_per_accelerator"]
    return {
        **p,
        "sequences_to_converge": sequences,
        "tokens_per_second_per_accelerator": sequences * SEQ_LEN / (p["minutes"] * 60) / GPUS,
    }


def measure(args: argparse.Namespace, checkpointing: bool) -> dict:
    """Median tokens/s of forward, loss and backward of one sequence, and the peak memory."""
    import torch
    import torch.nn.functional as F

    from trainperf.workloads.llama31_8b.workload import FLAVOURS

    device = torch.device("cpu" if args.cpu_check else "cuda")
    flavour, seq = ("debug", CPU_SEQ_LEN) if args.cpu_check else ("8B", SEQ_LEN)
    from trainperf.workloads.common.llm.model import Decoder

    torch.manual_seed(0)
    config = dataclasses.replace(FLAVOURS[flavour], checkpoint_activations=checkpointing)
    with device:  # made on the device (32 GB of fp32 for the 8B), then bf16
        model = Decoder(config).to(dtype=torch.float32 if args.cpu_check else torch.bfloat16)
    tokens = torch.randint(0, config.vocab_size, (1, seq + 1), device=device)

    def step() -> None:
        logits = model(tokens[:, :-1])
        F.cross_entropy(logits.float().flatten(0, 1), tokens[:, 1:].flatten()).backward()
        model.zero_grad(set_to_none=True)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    rates = []
    try:
        for _ in range(args.warmup):
            step()
        for _ in range(args.repeats):
            sync()
            t = time.perf_counter()
            for _ in range(args.steps):
                step()
            sync()
            rates.append(args.steps * seq / (time.perf_counter() - t))
    except torch.OutOfMemoryError as e:
        return {"checkpointing": checkpointing, "error": f"out of memory: {str(e).splitlines()[0]}"}
    rate = statistics.median(rates)
    # 6 flops per token for each parameter in a matrix product (forward 2, backward 4), and causal attention's
    # 6 * layers * dim * seq (half of the score and value products); the embedding is a lookup, not a product
    flops = 6 * product_parameters(config) + 6 * config.n_layers * config.dim * seq
    return {
        "checkpointing": checkpointing,
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "flavour": flavour,
        "sequence_length": seq,
        "tokens_per_second": rate,
        "model_tflops_per_second": rate * flops / 1e12,
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else None,
        "rates": rates,
        "error": "",
    }


def product_parameters(c) -> int:
    """The parameters of a decoder's matrix products: each layer's projections, and the output's."""
    qkv = c.dim * (c.n_heads + 2 * c.n_kv_heads) * c.head_dim
    return c.n_layers * (qkv + c.dim * c.dim + 3 * c.dim * c.ffn_dim) + c.vocab_size * c.dim


def markdown(rows: list[dict], published: dict | None) -> str:
    lines = [
        "| activation checkpointing | device | tokens/s per GPU | model TFLOP/s | peak memory (GiB) | on / published |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    ref = published["tokens_per_second_per_accelerator"] if published else None
    for r in rows:
        on = "on" if r["checkpointing"] else "off"
        if r["error"]:
            lines.append(f"| {on} | – | {r['error']} | – | – | – |")
            continue
        mem = "–" if r["peak_memory_gib"] is None else f"{r['peak_memory_gib']:.1f}"
        ratio = "–" if ref is None else f"{r['tokens_per_second'] / ref:.2f}"
        lines.append(
            f"| {on} | {r['device']} | {r['tokens_per_second']:,.0f} | {r['model_tflops_per_second']:.1f} | {mem} | "
            f"{ratio} |"
        )
    if published:
        lines.append(
            f"\nPublished: {published['system']} ({published['accelerator']}, {published['round']}), "
            f"{published['minutes']:.2f} min for {published['sequences_to_converge']:,.0f} sequences: "
            f"{ref:,.0f} tokens/s per accelerator over the whole run."
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "/tmp/gpu-llama"))
    p.add_argument("--steps", type=int, default=3, help="timed steps per repeat (default 3)")
    p.add_argument("--repeats", type=int, default=3, help="repeats; the median is reported (default 3)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    p.add_argument(
        "--cpu-check", action="store_true", help="run the debug flavour on a CPU: checks the script, measures nothing"
    )
    args = p.parse_args(argv)
    if min(args.steps, args.repeats) < 1 or args.warmup < 0:
        p.error("--steps and --repeats must be at least 1, --warmup at least 0")
    import torch

    if not torch.cuda.is_available() and not args.cpu_check:
        p.error("no CUDA device here: this check is for a GPU (--cpu-check runs it on a CPU at a toy width)")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for checkpointing in (False, True):
        rows.append(measure(args, checkpointing))
        print(f"activation checkpointing {'on' if checkpointing else 'off'}: {rows[-1]['error'] or 'done'}", flush=True)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    published = published_rate()
    (args.out / "gpu_llama.json").write_text(json.dumps({"rows": rows, "published": published}, indent=2) + "\n")
    table = markdown(rows, published)
    (args.out / "gpu_llama.md").write_text(table)
    print(table)
    return 0 if any(not r["error"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
