"""`trainperf ablate BENCH`: the optimization switches measured, alone and together (see ``measure.py``)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
from pathlib import Path
from typing import Any

from trainperf import registry
from trainperf.arguments import SEED_MAX, whole_number
from trainperf.contract.switches import FLAGS
from trainperf.errors import ResultsError, UsageError
from trainperf.fileio import atomic_write_bytes, atomic_write_text
from trainperf.paths import DEFAULT_OUT, default_data_dir
from trainperf.registry import BENCHMARKS
from trainperf.rules.closed import parse_overrides
from trainperf.spec import SCALES, RunConfig
from trainperf.text import shell_command

ABLATION_DIR = "ablation"  # <out>/ablation/<benchmark>-<scale>.json and .png
DEFAULTS = {"steps": 20, "repeats": 5, "warmup_steps": 3, "prefetch": 2}


def ablation_paths(out: Path, benchmark: str, scale: str) -> tuple[Path, Path]:
    stem = out / ABLATION_DIR / f"{benchmark}-{scale}"
    return stem.with_suffix(".json"), stem.with_suffix(".png")


def _check(args: argparse.Namespace) -> None:
    for name, low in (("steps", 1), ("repeats", 1), ("warmup_steps", 0)):
        value = getattr(args, name)
        if value < low:
            raise UsageError(f"--{name.replace('_', '-')} {value}: must be at least {low}")
    if args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads {args.threads}: must be at least 1")
    if not 1 <= args.prefetch <= 64:
        raise UsageError(f"--prefetch {args.prefetch}: the ablation's read-ahead must be 1 to 64 batches")


def cmd_ablate(args: argparse.Namespace) -> int:
    _check(args)
    spec = registry.get_spec(args.benchmark, args.scale)  # unknown or unavailable: a clear error
    overrides = parse_overrides(args.set)
    recipe = registry.default_recipe(args.benchmark, args.scale).with_overrides(overrides)
    cls = registry.workload_class(args.benchmark)
    if spec.unit == "generations" and not args.synthetic:
        raise UsageError(
            f"{args.benchmark} makes its training data by self-play during the run, so it has no train_batches to "
            "measure on: use --synthetic (steps on synthetic positions)"
        )
    json_path, png_path = ablation_paths(args.out, args.benchmark, args.scale)
    try:
        json_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ResultsError(f"cannot make {json_path.parent}: {e.strerror or e}; choose another --out") from None

    import torch  # torch and the harness: imported once the options are known good, never for --help
    from rich.console import Console

    from trainperf import dist as dist_mod
    from trainperf.ablation.measure import run_ablation, to_json
    from trainperf.harness import precision as precision_mod
    from trainperf.harness.runner import check_batch, seed_everything
    from trainperf.harness.torch_state import torch_state
    from trainperf.report.ablation import chart_png

    console = Console(quiet=args.quiet)
    dist = dist_mod.DistContext(device=_device())
    threads = args.threads or max(1, os.cpu_count() or 1)
    check_batch(cls, spec, recipe, dist)
    precision_mod.resolve(args.precision, scale=args.scale, device=dist.device)  # fp16 on a CPU stops here
    # --synthetic reads no data: the workload is built as for a dry run (no dataset, no reference checkpoint;
    # the CPU-sized shapes of a reference dry run on a CPU, the full ones on a GPU).
    config = RunConfig(seed=args.seed, overrides=overrides, precision=args.precision, dry_run=args.synthetic)
    with torch_state(cls.TORCH_STATE):
        torch.set_num_threads(threads)
        workload = cls(spec, recipe, config, data_dir=args.data_dir, dist=dist)
        try:
            if not args.synthetic:
                seed_everything(args.seed)
                workload.prepare()  # missing or corrupt data: a DataError before anything is measured
                workload.load_data()
            with console.status("measuring") as status:
                ablation = run_ablation(
                    workload,
                    steps=args.steps,
                    repeats=args.repeats,
                    warmup_steps=args.warmup_steps,
                    prefetch=args.prefetch,
                    only=_only(args.switches),
                    synthetic=args.synthetic,
                    seed=args.seed,
                    progress=lambda text: status.update(f"{args.benchmark}: {text}"),
                )
        finally:
            workload.close()
    device = f"{dist.device.type} ({_device_name(dist.device)})"
    data = to_json(ablation, device=device, command=_command(), threads=threads)
    try:
        atomic_write_text(json_path, json.dumps(data, indent=2) + "\n")
        atomic_write_bytes(png_path, chart_png(data))
    except OSError as e:
        raise ResultsError(f"cannot write {json_path}: {e.strerror or e}; choose another --out") from None
    print_table(console, data)
    again = shell_command("trainperf", "report", args.out)
    console.print(f"written: {json_path} and {png_path} (`{again}` draws it too)", highlight=False, markup=False)
    failed = [c for c in data["configurations"] if c["status"] == "failed"]
    return 1 if any(c["name"] == "baseline" for c in failed) else 0


def _only(text: str | None) -> tuple[str, ...]:
    """``--switches compile,prefetch``: the switches' names as the flags spell them, checked."""
    if not text:
        return ()
    from trainperf.ablation.measure import PRECISION  # the harness's switches: 12 ms, not for `trainperf --help`

    names = {flag.removeprefix("--"): name for name, flag in FLAGS.items()} | {"precision": PRECISION}
    chosen = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in chosen if t not in names]
    if unknown or not chosen:
        raise UsageError(
            f"--switches {text!r}: unknown switch(es) {', '.join(unknown) or '(none given)'}; choose among "
            f"{', '.join(names)}"
        )
    return tuple(names[t] for t in chosen)


def _device():
    import torch  # torch-free at import (`trainperf --help` loads this module): torch when called

    return torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu")


def _device_name(device: Any) -> str:
    if device.type == "cuda":
        import torch  # torch-free at import (`trainperf --help` loads this module): torch when called

        return torch.cuda.get_device_name(device)
    from trainperf.host import cpu_model  # the host probe (psutil): 20 ms to import, not for `trainperf --help`

    return cpu_model() or platform.processor() or platform.machine()


def _command() -> str:
    return "trainperf " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:2] == ["ablate"] else ""


def print_table(console: Any, data: dict[str, Any]) -> None:
    title = (
        f"{data['benchmark']} ({data['scale']}) on {data['device']}: {data['data']}, global batch "
        f"{data['global_batch_size']}, median of {data['repeats']} interleaved repeats of {data['steps']} steps"
    )
    from rich.table import Table  # rich: 35 ms to import, not for `trainperf --help`

    table = Table(title=title)
    for col, just in (
        ("configuration", "left"),
        ("samples/s", "right"),
        ("speed-up", "right"),
        ("repeats", "right"),
        ("compile (s)", "right"),
        ("optimizer", "left"),
    ):
        table.add_column(col, justify=just)
    for c in data["configurations"]:
        if c["status"] == "failed":
            table.add_row(c["name"], "–", "[red]failed[/red]", "", "", c["error"])
            continue
        ratios = c["speedup_per_repeat"]
        spread = f"{min(ratios):.2f}–{max(ratios):.2f}" if ratios and c["name"] != "baseline" else ""
        compile_s = (
            "" if c["compile_seconds"] is None else f"{c['compile_seconds']:.1f}" + ("†" if c["compile_shared"] else "")
        )
        table.add_row(
            c["name"],
            f"{c['median_samples_per_second']:,.1f}",
            "" if c["speedup"] is None else f"×{c['speedup']:.2f}",
            spread,
            compile_s,
            c["optimizer"],
        )
    console.print(table)
    all_ = next((c for c in data["configurations"] if c["name"] == "all"), None)
    if all_ is not None:
        console.print(f"all: {all_['flags']}", highlight=False, markup=False, soft_wrap=True)
    for s in data["skipped"]:
        console.print(f"skipped {s['name']}: {s['reason']}", highlight=False, markup=False, soft_wrap=True)
    console.print(
        "repeats: the range of each repeat's throughput over the baseline's in the same repeat. compile (s): the "
        "warm-up's time beyond its steps at the measured speed (compilation: on the clock in a real run, not in "
        "samples/s); †: after an earlier configuration compiled in this process, whose caches it may reuse",
        highlight=False,
        markup=False,
    )


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "ablate",
        help="measure the optimization switches: throughput with each alone and all together, as speed-ups",
        description="Training throughput (samples/s of optimizer steps: the workload's own batches, loss, optimizer "
        "and the harness's step) of the baseline, of each optimization switch alone (--compile, --channels-last, "
        "--cuda-graphs, --optimizer-impl foreach and fused, --pin-memory, --prefetch, --device-prefetch; "
        "--ddp-bucket-mb needs several "
        "processes), of mixed precision when the baseline trains in fp32 (--precision), and of all that apply "
        "together. The configurations live side by side in one process and are "
        "timed round-robin, repeat after repeat, so a noisy machine slows them alike; each one's throughput is the "
        "median of its repeats. Compile time is reported apart. A switch this device or workload cannot use is "
        "listed as skipped with the reason. Writes OUT/ablation/BENCHMARK-SCALE.json and a bar chart beside it; "
        "`trainperf report OUT` draws it too.",
    )
    p.add_argument("benchmark", metavar="BENCHMARK", help=f"benchmark key ({', '.join(BENCHMARKS)})")
    p.add_argument("--scale", choices=SCALES, default="mini", help="default mini: the workload's mini data")
    p.add_argument(
        "--steps",
        type=whole_number(1, 1_000_000),
        default=DEFAULTS["steps"],
        help="optimizer steps timed per repeat (default 20)",
    )
    p.add_argument(
        "--repeats", type=whole_number(1, 1_000), default=DEFAULTS["repeats"], help="interleaved repeats (default 5)"
    )
    p.add_argument(
        "--warmup-steps",
        type=whole_number(0, 1_000_000),
        default=DEFAULTS["warmup_steps"],
        help="untimed steps of each configuration first (compilation happens there; default 3)",
    )
    p.add_argument(
        "--prefetch",
        type=int,
        default=DEFAULTS["prefetch"],
        metavar="N",
        help="batches read ahead in the prefetch configuration (default 2)",
    )
    p.add_argument(
        "--switches",
        default=None,
        metavar="LIST",
        help="measure only these switches, comma-separated (compile, channels-last, cuda-graphs, optimizer-impl, "
        "ddp-bucket-mb, pin-memory, prefetch, device-prefetch, precision: mixed precision); default: all",
    )
    p.add_argument(
        "--precision",
        choices=("auto", "fp32", "bf16", "fp16"),
        default="auto",
        help="autocast of the baseline and of every configuration, as for run (default auto: fp32 at the mini scale "
        "and on CPUs, bf16 for the reference scale on a GPU). When it is fp32, mixed precision (bf16 autocast; "
        "fp16 with the loss scaler on a GPU without bf16) is measured as one more configuration and is part of "
        "'all'",
    )
    p.add_argument(
        "--synthetic",
        action="store_true",
        help="train on the workload's synthetic batch, repeated (no data needed: a reference scale without its "
        "dataset, or a benchmark that makes its data by self-play); the workload is built as for a dry run: no "
        "reference checkpoint, on a CPU the reference dry run's smaller shapes (shorter sequences, a smaller patch), "
        "and sharded embedding tables cut short on any device. Default: its real train_batches",
    )
    p.add_argument(
        "--seed",
        type=whole_number(0, SEED_MAX),
        default=1,
        help="seed of the weights and batches, the same in every configuration",
    )
    _add_run_options(p)
    p.set_defaults(func=cmd_ablate)
    return p


def _add_run_options(p: argparse.ArgumentParser) -> None:
    """Threads, recipe changes, folders and output: what `trainperf ablate` shares with a run."""
    p.add_argument("--threads", type=whole_number(1, 4096), default=None, help="torch threads (default: every core)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change a hyperparameter of the default recipe (e.g. global_batch_size=64), as for run",
    )
    p.add_argument(
        "--data-dir",
        type=Path,
        default=default_data_dir(),
        help="where datasets live (default: $TRAINPERF_DATA_DIR or ~/.cache/trainperf/data)",
    )
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default: {DEFAULT_OUT})")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")


__all__ = ["ablation_paths", "add_parser", "cmd_ablate", "print_table"]
