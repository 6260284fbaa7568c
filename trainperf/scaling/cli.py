"""`trainperf scale`: time to train on N accelerators, predicted from a measured run."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from trainperf.arguments import whole_number
from trainperf.scaling import facts, model
from trainperf.scaling.measured import read_measured


def cmd_scale(args: argparse.Namespace) -> int:
    facts.check_benchmark(args.benchmark)
    if args.to < 1:
        from trainperf.errors import UsageError

        raise UsageError(f"--to {args.to}: the accelerator count must be at least 1")
    run = read_measured(args.results, args.benchmark)
    table = facts.rcp_table(args.benchmark, run.scale)
    nbytes = facts.gradient_bytes(args.benchmark, run.scale)
    p = model.predict(
        run,
        args.to,
        gradient_bytes=nbytes,
        table=table,
        bandwidth_gbps=args.bandwidth,
        latency_us=args.latency_us,
        topology=args.topology,
        batch_per_accelerator=args.batch_per_accelerator,
    )
    for w in p.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if args.json:
        print(json.dumps({"measured": dataclasses.asdict(run), "prediction": dataclasses.asdict(p)}, indent=2))
        return 0
    step = p.compute_s + p.communication_s
    rows: list[tuple[str, Any]] = [
        (
            "measured",
            f"{run.scale} {run.benchmark}: {run.minutes:.3f} min on {run.accelerators} accelerator(s), "
            f"global batch {run.global_batch:g}, {run.samples_to_converge:,.0f} samples to converge",
        ),
        ("throughput per accelerator", f"{p.throughput_per_accelerator:,.1f} samples/s (compute alone)"),
        (
            "gradient all-reduce",
            f"{nbytes / 1e6:,.2f} MB, {args.topology}, {args.bandwidth:g} GB/s, {args.latency_us:g} us",
        ),
        ("global batch", f"{p.global_batch:g} ({p.batch_per_accelerator:g} per accelerator)"),
        ("compute per step", f"{p.compute_s * 1e3:.4g} ms ({p.compute_s / step:.0%})"),
        (
            "communication per step",
            f"{p.communication_s * 1e3:.4g} ms ({p.communication_s / step:.0%}); "
            f"{p.measured_communication_s * 1e3:.4g} ms in the measured run",
        ),
        (
            "convergence factor",
            f"{p.convergence_factor:.3f} (samples to converge at batch {p.global_batch:g} / "
            f"at {run.global_batch:g}, {table.source if table else 'no RCP table'})",
        ),
        ("steps", f"{p.steps:,.0f}"),
        (f"predicted time to train on {p.accelerators}", f"{p.minutes:.3f} minutes"),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0


def add_parser(subparsers: Any) -> None:
    """Add `trainperf scale` to the main command's subparsers."""
    s = subparsers.add_parser(
        "scale",
        help="predict time to train on N accelerators from a measured run",
        description="Predict a benchmark's time to train on N accelerators from a measured run: compute per "
        "step from its measured throughput, the gradient all-reduce from the model's size, bandwidth and "
        "latency (ring: 2(N-1)/N x bytes/bandwidth + 2(N-1) x latency; tree: 2 log2(N) x (latency + "
        "bytes/bandwidth)), and the samples to converge at the new global batch from MLPerf's reference "
        "convergence points (trainperf/scaling/README.md).",
    )
    s.add_argument("benchmark", metavar="BENCH", help=f"one of {', '.join(facts.scalable())}")
    s.add_argument(
        "--from",
        dest="results",
        type=Path,
        required=True,
        metavar="RESULTS",
        help="a trainperf results folder (the --out of `trainperf run`) holding successful runs",
    )
    s.add_argument(
        "--to",
        type=whole_number(1, model.MAX_ACCELERATORS),
        required=True,
        metavar="N",
        help=f"accelerators to predict for (1 to {model.MAX_ACCELERATORS:,})",
    )
    s.add_argument(
        "--bandwidth",
        type=float,
        default=model.DEFAULT_BANDWIDTH_GBPS,
        metavar="GBps",
        help=f"all-reduce bandwidth per accelerator, GB/s (default {model.DEFAULT_BANDWIDTH_GBPS:g})",
    )
    s.add_argument(
        "--latency-us",
        type=float,
        default=model.DEFAULT_LATENCY_US,
        metavar="US",
        help=f"latency of one message, microseconds (default {model.DEFAULT_LATENCY_US:g})",
    )
    s.add_argument("--topology", choices=model.TOPOLOGIES, default="ring", help="all-reduce algorithm (default ring)")
    s.add_argument(
        "--batch-per-accelerator",
        type=float,
        default=None,
        metavar="B",
        help="local batch on the N accelerators (default: the measured run's)",
    )
    s.add_argument("--json", action="store_true", help="print JSON instead of a table")
    s.set_defaults(func=cmd_scale)
