"""The optimization stack on one GPU: reference-scale throughput of resnet and bert, stack off and on; the tokens/s per
GPU of llama31_8b's, gpt_oss_20b's and deepseekv3_671b's reference decoders.

    python benchmarks/gpu_stack.py --out "$OUT"            # on a CUDA machine: one prepared check
    python benchmarks/gpu_stack.py --cpu-check --out /tmp/s # the same script on a CPU, at toy sizes

For each benchmark it runs `trainperf ablate KEY --scale reference --synthetic --precision fp32` (the full-size
model, its synthetic batch, one process, the configurations interleaved) with the switches that matter on a
GPU: mixed precision (bf16 autocast), foreach and fused optimizer kernels, pinned memory, the device prefetch,
torch.compile, CUDA graphs, and all of them together. "Stack off" is the fp32 baseline with no switch; "stack
on" is the configuration "all". Each ablation gets its own process and time limit, so a compiler that hangs
costs one benchmark, not the check.

Beside the measured rate it prints NVIDIA's published per-GPU rate on 8 x H200 (the fastest such closed result
in the published table shipped with trainperf): samples to converge at that system's global batch (MLPerf's RCP
mean; the batch is trainperf's stated assumption, ``Benchmark.published_batch_per_accelerator``) over the result's
minutes and 8 GPUs. That whole-run rate includes start-up and evaluations, so their training rate is somewhat
higher. A synthetic batch measures the step alone: no decoding, no augmentation.

llama31_8b is measured by ``benchmarks/gpu_llama.py`` in its own process (the 8B's forward and backward pass of
one 8,192-token sequence, activation checkpointing off and on, beside the published per-accelerator rate; its
docstring says what the figure leaves out); gpt_oss_20b and deepseekv3_671b by ``benchmarks/gpu_moe.py``, each in its
own process (the reference's layer shapes with fewer blocks, since neither whole model fits one GPU, and the
reference's depth estimated from them; its docstring says which blocks); llama2_70b_lora by ``benchmarks/gpu_lora.py``
(the 70B's blocks with the reference's LoRA at 2 and 4 blocks, the 80 blocks' samples/s estimated from them, beside
the published rate). Their tables are appended.

Writes ``OUT/ablation/KEY-reference.json`` (each ablation, as `trainperf report` reads it),
``OUT/gpu_stack.json`` and ``OUT/gpu_stack.md`` (the tables), and each ablation's or script's output in
``OUT/KEY.log``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

# Per-GPU batch: the per-accelerator batch of the 8-GPU submissions that the published rate assumes.
SETTINGS = {
    "resnet": {"steps": 20, "warmup": 5, "timeout_s": 270},
    "bert": {"steps": 10, "warmup": 5, "timeout_s": 270},
}
SWITCHES = "precision,optimizer-impl,pin-memory,device-prefetch,compile,cuda-graphs"
CPU_SWITCHES = "precision,optimizer-impl,prefetch"  # --cpu-check: what a CPU can run, quickly
# Measured by a script of their own, not by an ablation: the script and its arguments (the key is gpu_moe.py's)
DECODERS = {
    "llama31_8b": ("gpu_llama.py",),
    "gpt_oss_20b": ("gpu_moe.py", "gpt_oss_20b"),
    "deepseekv3_671b": ("gpu_moe.py", "deepseekv3_671b"),
    "llama2_70b_lora": ("gpu_lora.py",),
}
DECODER_TIMEOUT_S = 300
PUBLISHED_GPUS = 8
PUBLISHED_ACCELERATOR = "H200"


def published_rate(key: str) -> dict | None:
    """NVIDIA's fastest closed 8 x H200 result for ``key``, as samples/s per GPU (see the module's docstring)."""
    from trainperf.history.query import load_results
    from trainperf.scaling import facts

    rows = [
        r
        for r in load_results()
        if r.benchmark == key
        and r.org == "NVIDIA"
        and r.division == "closed"
        and r.n_acc == PUBLISHED_GPUS
        and PUBLISHED_ACCELERATOR in (r.accelerator or "")
        and r.raw_score_min
    ]
    if not rows:
        return None
    best = min(rows, key=lambda r: r.raw_score_min)
    batch = PUBLISHED_GPUS * facts.published_batch_per_accelerator(key)
    mean, _warning = facts.rcp_table(key, "reference").at(batch)
    samples = mean * facts.train_samples(key)
    return {
        "round": best.round,
        "system": best.system,
        "minutes": best.raw_score_min,
        "global_batch": batch,
        "samples_to_converge": samples,
        "samples_per_second_per_gpu": samples / (best.raw_score_min * 60) / PUBLISHED_GPUS,
    }


def ablate(key: str, args: argparse.Namespace) -> tuple[dict | None, str]:
    """One ablation in its own process: (its JSON, or None and why)."""
    s = SETTINGS[key]
    batch = 2 if args.cpu_check else _batch(key)
    steps, repeats, warmup = (1, 1, 0) if args.cpu_check else (s["steps"], args.repeats, s["warmup"])
    cmd = [sys.executable, "-m", "trainperf", "ablate", key, "--scale", "reference", "--synthetic"]
    cmd += ["--precision", "fp32", "--switches", CPU_SWITCHES if args.cpu_check else SWITCHES]
    cmd += ["--steps", str(steps), "--repeats", str(repeats), "--warmup-steps", str(warmup)]
    cmd += ["--set", f"global_batch_size={batch}", "--out", str(args.out)]
    log = args.out / f"{key}.log"
    t = time.monotonic()
    try:
        with log.open("w") as f:
            f.write(" ".join(cmd) + "\n")
            f.flush()
            r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=args.timeout_s or s["timeout_s"])
    except subprocess.TimeoutExpired:
        return None, f"stopped at its time limit ({time.monotonic() - t:.0f} s); see {log.name}"
    path = args.out / "ablation" / f"{key}-reference.json"
    if r.returncode != 0 or not path.is_file():
        return None, f"trainperf ablate exited {r.returncode}; see {log.name}"
    return json.loads(path.read_text()), ""


def _batch(key: str) -> int:
    from trainperf.scaling import facts

    return facts.published_batch_per_accelerator(key)


def summary_row(key: str, data: dict | None, why: str, published: dict | None) -> dict:
    row: dict = {"benchmark": key, "error": why, "published": published}
    if data is None:
        return row
    by_name = {c["name"]: c for c in data["configurations"]}
    base, all_ = by_name.get("baseline", {}), by_name.get("all", {})
    row.update(
        device=data["device"],
        torch=data["torch"],
        global_batch=data["global_batch_size"],
        stack_off=base.get("median_samples_per_second"),
        stack_on=all_.get("median_samples_per_second"),
        stack_on_flags=all_.get("flags"),
        speedups={c["name"]: c["speedup"] for c in data["configurations"] if c["status"] == "measured"},
        failed={c["name"]: c["error"] for c in data["configurations"] if c["status"] == "failed"},
        skipped={s["name"]: s["reason"] for s in data["skipped"]},
    )
    if published and row["stack_on"]:
        row["stack_on_over_published"] = row["stack_on"] / published["samples_per_second_per_gpu"]
    return row


def markdown(rows: list[dict]) -> str:
    lines = [
        "| benchmark | device | batch | stack off (fp32, samples/s) | stack on (samples/s) | speed-up | "
        "each switch | NVIDIA 8 x H200, per GPU | on / NVIDIA |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        p = r["published"]
        nvidia = (
            f"{p['samples_per_second_per_gpu']:,.0f} ({p['round']}, {p['minutes']:.2f} min)" if p else "not published"
        )
        if r.get("stack_off") is None:
            lines.append(f"| {r['benchmark']} | – | – | – | – | – | {r['error']} | {nvidia} | – |")
            continue
        on = r.get("stack_on")
        each = ", ".join(f"{n} ×{v:.2f}" for n, v in r["speedups"].items() if n not in ("baseline", "all"))
        each += "".join(f"; {n} failed" for n in r["failed"])
        each += f"; skipped: {', '.join(r['skipped'])}" if r["skipped"] else ""
        on_text = "–" if on is None else f"{on:,.1f}"
        speedup = "–" if on is None else f"×{on / r['stack_off']:.2f}"
        ratio = r.get("stack_on_over_published")
        ratio_text = "–" if ratio is None else f"{ratio:.2f}"
        lines.append(
            f"| {r['benchmark']} | {r['device']} | {r['global_batch']} | {r['stack_off']:,.1f} | {on_text} | "
            f"{speedup} | {each} | {nvidia} | {ratio_text} |"
        )
    on_flags = [f"- {r['benchmark']} stack on: `{r['stack_on_flags']}`" for r in rows if r.get("stack_on_flags")]
    return "\n".join(lines + [""] + on_flags) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "/tmp/gpu-stack"))
    every = ",".join((*SETTINGS, *DECODERS))
    p.add_argument("--benchmarks", default=every, help=f"comma-separated (default {every})")
    p.add_argument("--repeats", type=int, default=3, help="interleaved repeats per configuration (default 3)")
    p.add_argument(
        "--timeout-s",
        type=int,
        default=0,
        help="each ablation's or script's limit (default: resnet 270, bert 270, each decoder 300)",
    )
    p.add_argument(
        "--cpu-check",
        action="store_true",
        help="run on a CPU at toy sizes (batch 2, one step): checks the script, measures nothing worth reporting",
    )
    args = p.parse_args(argv)
    keys = [k.strip() for k in args.benchmarks.split(",") if k.strip()]
    unknown = [k for k in keys if k not in (*SETTINGS, *DECODERS)]
    if unknown or not keys:
        p.error(f"--benchmarks: {', '.join(unknown) or '(none)'}: choose among {', '.join((*SETTINGS, *DECODERS))}")
    import torch

    if not torch.cuda.is_available() and not args.cpu_check:
        p.error("no CUDA device here: this check is for a GPU (--cpu-check runs it on a CPU at toy sizes)")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for key in [k for k in keys if k not in DECODERS]:
        print(f"{key}: ablating ...", flush=True)
        data, why = ablate(key, args)
        rows.append(summary_row(key, data, why, published_rate(key)))
        print(f"{key}: {why or 'done'}", flush=True)
    table = markdown(rows) if rows else ""
    decoders_ok = True
    for key in [k for k in keys if k in DECODERS]:
        decoder_table, ok = decoder(key, args)
        decoders_ok &= ok
        script = DECODERS[key][0]
        table += f"\n{key}, one GPU's forward and backward pass (benchmarks/{script}):\n\n{decoder_table}"
    (args.out / "gpu_stack.json").write_text(json.dumps(rows, indent=2) + "\n")
    (args.out / "gpu_stack.md").write_text(table)
    print(table)
    return 0 if decoders_ok and all(r.get("stack_off") is not None for r in rows) else 1


def decoder(key: str, args: argparse.Namespace) -> tuple[str, bool]:
    """The decoder's own script in its own process: (its table, or why there is none; whether it measured)."""
    script, *script_args = DECODERS[key]
    cmd = [sys.executable, str(Path(__file__).with_name(script)), *script_args, "--out", str(args.out)]
    cmd += ["--cpu-check", "--steps", "1", "--repeats", "1", "--warmup", "0"] if args.cpu_check else []
    log = args.out / f"{key}.log"
    print(f"{key}: measuring ...", flush=True)
    try:
        with log.open("w") as f:
            r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=args.timeout_s or DECODER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"stopped at its time limit; see {log.name}\n", False
    table = args.out / (f"gpu_moe_{key}.md" if script == "gpu_moe.py" else f"{Path(script).stem}.md")
    if r.returncode != 0 or not table.is_file():
        return f"{script} exited {r.returncode}; see {log.name}\n", False
    return table.read_text(), True


if __name__ == "__main__":
    sys.exit(main())
