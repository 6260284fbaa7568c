"""The mixture-of-experts references' step on one GPU: tokens/s per GPU of gpt_oss_20b's and deepseekv3_671b's decoders
at their real layer shapes with fewer layers, and the full depth's rate estimated from them.

    python benchmarks/gpu_moe.py gpt_oss_20b --out "$OUT"              # on a CUDA machine (gpu_stack.py calls it)
    python benchmarks/gpu_moe.py deepseekv3_671b --cpu-check --out /tmp/m  # the same script on a CPU, debug width

Neither whole model fits one 78 GiB GPU with its gradients (GPT-OSS 20B: 20.5 B parameters; DeepSeek-V3: 671 B), so
this builds the workload's own decoder (``Decoder`` of the reference flavour, the model a reference run builds) with
the reference's layer shapes, its vocabulary and sequence length, but fewer blocks, in bf16, and times forward,
next-token loss and backward of one sequence a step, as ``benchmarks/gpu_llama.py`` does for llama31_8b (the same
things left out: the optimizer step, which each GPU of a sharded system does for its share only, and the collectives
that FSDP2 and expert parallelism add). Each model measured is a row; the step's time is then fitted as
``a + d * dense blocks + m * MoE blocks`` over the rows (least squares) and the reference's depth estimated from it:

- gpt_oss_20b: 2 and 4 of its 24 blocks (each pair one sliding-window block and one full-attention block, as the
  reference alternates them; every block a MoE of 32 experts, top-4), 8,192 tokens.
- deepseekv3_671b: 1 dense block; 2 dense blocks; 1 dense and 1 MoE block (256 experts, top-8, the shared expert;
  one MoE block's weights and gradients are 46 GB in bf16, so two do not fit), 4,096 tokens; the estimate is for
  its 3 dense and 58 MoE blocks without the multi-token prediction block (one more MoE block and output
  projection, which the reference adds to its step).

Model TFLOP/s counts 6 flops per token for each parameter a token passes through in a matrix product (the chosen
experts', the router's, the output layer's; the embedding is a lookup) and attention's score and value products
over the keys each query sees (half the sequence, or the window). No published rate stands beside these: both
benchmarks are new in MLPerf Training 6.1, after the last round in trainperf's table of published results.

Writes ``OUT/gpu_moe_KEY.json`` and ``OUT/gpu_moe_KEY.md``.
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

# key -> (the flavours' module, the reference flavour, tokens a sequence, the blocks of each model measured as
# (dense, MoE), the reference's own (dense, MoE))
CASES = {
    "gpt_oss_20b": ("trainperf.workloads.gpt_oss_20b.model", "20B", 8192, ((0, 2), (0, 4)), (0, 24)),
    "deepseekv3_671b": ("trainperf.workloads.deepseekv3_671b.model", "671B", 4096, ((1, 0), (2, 0), (1, 1)), (3, 58)),
}
CPU_SEQ_LEN = 64  # --cpu-check: the debug flavour, short sequences, fp32


def truncated(args, dense: int, moe: int):
    """The decoder's arguments with ``dense`` dense blocks then ``moe`` MoE blocks and no multi-token prediction."""
    return dataclasses.replace(args, n_layers=dense + moe, dense_layers=dense, mtp_layers=0, mtp_loss_scale=0.0)


def product_parameters(a) -> int:
    """The parameters one token passes through in matrix products: attention's projections, the dense blocks'
    SwiGLU, the MoE blocks' router, chosen and shared experts, the output layer."""
    if a.mla is None:
        attention = a.dim * (a.n_heads + 2 * a.n_kv_heads) * a.head_dim + a.n_heads * a.head_dim * a.dim
    else:
        m = a.mla
        q = (
            a.dim * a.n_heads * m.qk_head_dim
            if m.q_lora_rank is None
            else m.q_lora_rank * (a.dim + a.n_heads * m.qk_head_dim)
        )
        kv = a.dim * (m.kv_lora_rank + m.rope_head_dim) + m.kv_lora_rank * a.n_heads * (m.nope_head_dim + m.v_head_dim)
        attention = q + kv + a.n_heads * m.v_head_dim * a.dim
    dense = 3 * a.dim * a.ffn_dim
    moe = 0
    if a.moe is not None:
        moe = a.moe.n_experts * a.dim + (a.moe.top_k + a.moe.n_shared_experts) * 3 * a.dim * a.moe.expert_ffn_dim
    n_dense = a.n_layers if a.moe is None else a.dense_layers
    return a.n_layers * attention + n_dense * dense + (a.n_layers - n_dense) * moe + a.vocab_size * a.dim


def attention_flops(a, seq: int) -> float:
    """Forward and backward flops per token of the attention scores and values, over the keys each query sees."""
    qk, v = (a.head_dim, a.head_dim) if a.mla is None else (a.mla.qk_head_dim, a.mla.v_head_dim)
    keys = [min((seq + 1) / 2, (a.window(i) or seq) + 1) for i in range(a.n_layers)]
    return 6 * a.n_heads * (qk + v) * sum(keys)


def measure(args: argparse.Namespace, config, seq: int) -> dict:
    """Median tokens/s of forward, loss and backward of one sequence, and the peak memory."""
    import torch
    import torch.nn.functional as F

    from trainperf.workloads.common.llm.model import Decoder

    device = torch.device("cpu" if args.cpu_check else "cuda")
    dtype = torch.float32 if args.cpu_check else torch.bfloat16
    torch.manual_seed(0)
    with torch.device("meta"):  # drawn on the device in bf16: an fp32 copy first would not fit
        model = Decoder(config)
    model = model.to(dtype).to_empty(device=device)
    model.reset_rope()
    model.reset_parameters()
    for name, buffer in model.named_buffers():  # the experts' token counts and balancing biases start at 0
        if not name.startswith("rope_"):
            buffer.zero_()
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
    rates, seconds = [], []
    try:
        for _ in range(args.warmup):
            step()
        for _ in range(args.repeats):
            sync()
            t = time.perf_counter()
            for _ in range(args.steps):
                step()
            sync()
            seconds.append((time.perf_counter() - t) / args.steps)
            rates.append(seq / seconds[-1])
    except torch.OutOfMemoryError as e:
        return {"error": f"out of memory: {str(e).splitlines()[0]}"}
    rate = statistics.median(rates)
    flops = 6 * product_parameters(config) + attention_flops(config, seq)
    return {
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "tokens_per_second": rate,
        "step_seconds": statistics.median(seconds),
        "model_tflops_per_second": rate * flops / 1e12,
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else None,
        "rates": rates,
        "error": "",
    }


def estimate(rows: list[dict], full: tuple[int, int], seq: int) -> dict | None:
    """The reference depth's step time from ``a + d * dense + m * moe`` fitted to the rows; None if one failed."""
    import numpy as np

    if any(r["error"] for r in rows):
        return None
    x = np.array([[1.0, r["dense_blocks"], r["moe_blocks"]] for r in rows])
    y = np.array([r["step_seconds"] for r in rows])
    coef = np.linalg.lstsq(x, y, rcond=None)[0]
    seconds = float(coef @ np.array([1.0, *full]))
    per_block = {
        "fixed_seconds": float(coef[0]),
        "dense_block_seconds": float(coef[1]),
        "moe_block_seconds": float(coef[2]),
    }
    return {
        "dense_blocks": full[0],
        "moe_blocks": full[1],
        "step_seconds": seconds,
        "tokens_per_second": seq / seconds,
        **per_block,
    }


def markdown(key: str, flavour: str, seq: int, rows: list[dict], full: dict | None, mtp: str = "") -> str:
    """The table of the rows and the estimate; ``mtp``: what the estimate leaves out of the reference's blocks."""
    lines = [
        f"{key}: the {flavour} flavour's blocks, {seq:,} tokens a sequence, forward, loss and backward of one sequence",
        "",
        "| blocks (dense + MoE) | device | tokens/s per GPU | model TFLOP/s | peak memory (GiB) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        blocks = f"{r['dense_blocks']} + {r['moe_blocks']}"
        if r["error"]:
            lines.append(f"| {blocks} | – | {r['error']} | – | – |")
            continue
        mem = "–" if r["peak_memory_gib"] is None else f"{r['peak_memory_gib']:.1f}"
        lines.append(
            f"| {blocks} | {r['device']} | {r['tokens_per_second']:,.0f} | {r['model_tflops_per_second']:.1f} | {mem} |"
        )
    if full is None:
        lines.append("\nNo estimate of the reference's depth: a model above did not measure.")
    else:
        dense = f"{full['dense_block_seconds']:.3f} s a dense block, " if full["dense_blocks"] else ""
        lines.append(
            f"\nEstimated for the reference's {full['dense_blocks']} + {full['moe_blocks']} blocks{mtp}, from "
            f"{full['fixed_seconds']:.3f} s fixed, {dense}{full['moe_block_seconds']:.3f} s a MoE block fitted to the "
            f"rows: {full['step_seconds']:.2f} s a sequence, {full['tokens_per_second']:,.0f} tokens/s per GPU "
            "(one GPU holding the whole model, which it cannot; no optimizer step, no collectives)."
        )
    lines.append("No published rate: the benchmark is new in MLPerf Training 6.1 (trainperf's table ends at v5.1).")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("key", choices=sorted(CASES), help="the benchmark whose reference decoder is measured")
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "/tmp/gpu-moe"))
    p.add_argument("--steps", type=int, default=3, help="timed steps per repeat (default 3)")
    p.add_argument("--repeats", type=int, default=3, help="repeats; the median is reported (default 3)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    p.add_argument(
        "--cpu-check", action="store_true", help="run the debug flavour on a CPU: checks the script, measures nothing"
    )
    args = p.parse_args(argv)
    if min(args.steps, args.repeats) < 1 or args.warmup < 0:
        p.error("--steps and --repeats must be at least 1, --warmup at least 0")
    import importlib

    import torch

    if not torch.cuda.is_available() and not args.cpu_check:
        p.error("no CUDA device here: this check is for a GPU (--cpu-check runs it on a CPU at a toy width)")
    module, flavour, seq, depths, full_depth = CASES[args.key]
    if args.cpu_check:
        flavour, seq = "debug", CPU_SEQ_LEN
    base = importlib.import_module(module).FLAVOURS[flavour]
    base = dataclasses.replace(base, max_seq_len=max(base.max_seq_len, seq))
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for dense, moe in depths:
        row = {"dense_blocks": dense, "moe_blocks": moe, **measure(args, truncated(base, dense, moe), seq)}
        rows.append(row)
        print(f"{args.key}, {dense} dense + {moe} MoE blocks: {row['error'] or 'done'}", flush=True)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    full = estimate(rows, full_depth, seq)
    doc = {"key": args.key, "flavour": flavour, "sequence_length": seq, "rows": rows, "estimate": full}
    (args.out / f"gpu_moe_{args.key}.json").write_text(json.dumps(doc, indent=2) + "\n")
    mtp = " without the multi-token prediction block" if base.mtp_layers else ""
    table = markdown(args.key, flavour, seq, rows, full, mtp)
    (args.out / f"gpu_moe_{args.key}.md").write_text(table)
    print(table)
    return 0 if full is not None else 1


if __name__ == "__main__":
    sys.exit(main())
