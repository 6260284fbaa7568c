"""`trainperf run`'s options, the optimization switches' among them, and the suite they ask for.

What each switch does is :mod:`trainperf.harness.switches`; the switches as data are
:mod:`trainperf.contract.switches`.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from trainperf import registry, rounds
from trainperf.arguments import MAX_RUNS, SEED_MAX, whole_number
from trainperf.contract.switches import MAX_BUCKET_MB, MAX_PREFETCH, OPTIMIZER_IMPLS
from trainperf.errors import UsageError
from trainperf.harness.switches import from_args
from trainperf.paths import DEFAULT_OUT
from trainperf.registry import BENCHMARKS
from trainperf.rules.closed import parse_overrides
from trainperf.spec import SCALES


def add_run_arguments(r: argparse.ArgumentParser) -> None:
    """The options of `trainperf run` beyond the data folder and the system's (which other commands share)."""
    r.add_argument(
        "benchmarks",
        nargs="*",
        metavar="BENCHMARK",
        help=f"benchmark keys ({', '.join(BENCHMARKS)}) or 'all' (default: all available of the round)",
    )
    r.add_argument(
        "--round",
        default=None,
        metavar="ROUND",
        help=f"the MLPerf Training round whose benchmarks 'all' runs: {', '.join(rounds.versions())} (default "
        f"{rounds.DEFAULT_ROUND}); named benchmarks run by their own round's rules, and must be of this round if given",
    )
    r.add_argument(
        "--scale",
        choices=SCALES,
        default="mini",
        help="mini: CPU, minutes, offline data; reference: the MLPerf v2.0 model and data",
    )
    r.add_argument(
        "--runs",
        type=whole_number(1, MAX_RUNS),
        default=1,
        help="runs per benchmark (default 1: a quick preview; a valid score needs the count of the rules, "
        "shown by `trainperf list`)",
    )
    r.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default: {DEFAULT_OUT})")
    r.add_argument(
        "--seed",
        type=whole_number(0, SEED_MAX - MAX_RUNS),
        default=None,
        help="make the runs reproducible: run i uses seed SEED+i, logged as a fixed seed (default: each run "
        "draws its seed from the system's randomness and logs it, as MLPerf's closed division requires)",
    )
    _add_launch_arguments(r)  # --nproc, --nnodes, ...
    r.add_argument(
        "--dry-run",
        action="store_true",
        help="a few steps on synthetic data at full model size, to check the path and the log",
    )
    r.add_argument(
        "--smoke",
        action="store_true",
        help="reference scale: check a machine and the data path on a tiny fixture that trainperf writes in the "
        "reference's on-disk format under OUT/smoke-data (the real loader, a few real training steps at the dry "
        "run's batch size, one full evaluation); not a result",
    )
    r.add_argument(
        "--precision",
        choices=("auto", "fp32", "bf16", "fp16"),
        default="auto",
        help="autocast of the training step, logged as trainperf_precision / trainperf_autocast. auto (default): "
        "bf16 for reference runs on a CUDA GPU with bf16 (fp16 with a loss scaler on older GPUs), as MLPerf "
        "reference and top submissions train; fp32 for mini runs and on CPUs. bf16 also runs on a CPU when asked; "
        "fp16 needs CUDA. Evaluation stays fp32",
    )
    add_switch_arguments(r)  # --compile, --channels-last, --cuda-graphs, --optimizer-impl, ...
    r.add_argument(
        "--drop-caches",
        action="store_true",
        help="drop the OS page cache before each run (needs root), logged as cache_clear",
    )
    r.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change a hyperparameter of the default recipe (repeatable). Closed division: only the keys the "
        "rules list as tunable, within their allowed values; open: any recipe key",
    )
    r.add_argument("--quiet", action="store_true", help="print nothing but errors")


def _add_launch_arguments(r: argparse.ArgumentParser) -> None:
    """How the job starts: the processes per node under torchrun, and the nodes' rendezvous."""
    r.add_argument(
        "--nproc", type=int, default=1, help="processes to launch with torchrun (gloo on CPU, NCCL on GPU); default 1"
    )
    r.add_argument(
        "--nnodes",
        type=int,
        default=1,
        help="nodes of the job (default 1): start the same command on each node with its --node-rank and the same "
        "--rdzv-endpoint; --nproc processes run on each node (torchrun's c10d rendezvous)",
    )
    r.add_argument("--node-rank", type=int, default=None, help="this node's number, 0..NNODES-1 (with --nnodes)")
    r.add_argument(
        "--rdzv-endpoint",
        default=None,
        metavar="HOST:PORT",
        help="where the nodes meet (with --nnodes): the first node's address and a free port, the same on every node",
    )
    r.add_argument(
        "--rdzv-id",
        default=None,
        help="the job's rendezvous id, the same on every node (default: trainperf); "
        "distinct for jobs sharing an endpoint",
    )


def suite_options(args: argparse.Namespace, keys: tuple[str, ...]) -> Any:
    """The suite that `trainperf run`'s options ask for (a :class:`~trainperf.harness.suite.SuiteOptions`); a
    malformed --set fails here."""
    from trainperf.harness.suite import SuiteOptions  # the harness imports torch: kept out of `trainperf --help`

    return SuiteOptions(
        benchmarks=keys,
        scale=args.scale,
        runs=args.runs,
        out=args.out,
        data_dir=args.data_dir,
        seed=args.seed,
        division=default_division(args.division, args.scale),
        org=args.org,
        availability=args.availability,
        system_name=args.system_name,
        dry_run=args.dry_run,
        smoke=args.smoke,
        drop_caches=args.drop_caches,
        overrides=tuple(parse_overrides(args.set).items()),
        precision=args.precision,
        switches=from_args(args),
    )


def default_division(division: str | None, scale: str) -> str:
    """--division, or its default: closed at the reference scale, open at the mini scale."""
    return division or ("closed" if scale == "reference" else "open")


def add_switch_arguments(parser: Any, *, prefetch_default: int = 0) -> None:
    """The optimization switches' options."""
    g = parser.add_argument_group(
        "optimization switches",
        "system optimizations, allowed in both divisions; each is logged (trainperf_<switch>) and compared on resume. "
        "With none given, a run is made as before",
    )
    g.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the model (after DDP). Compiling takes the first steps, on the clock (20-35 s for a "
        "mini model on a 2-core CPU)",
    )
    g.add_argument(
        "--channels-last",
        action="store_true",
        help="convolutional models: parameters and input batches in channels-last memory layout (channels_last_3d "
        "for 3-D convolutions); left off, with the reason logged, for a model without convolutions",
    )
    g.add_argument(
        "--cuda-graphs",
        action="store_true",
        help="replay the compiled step as CUDA graphs (torch.compile mode reduce-overhead; implies --compile). "
        "CUDA only: an error on a CPU",
    )
    g.add_argument(
        "--optimizer-impl",
        choices=OPTIMIZER_IMPLS,
        default="default",
        help="default: the workload's optimizer as it builds it; foreach: multi-tensor kernels; fused: one fused "
        "kernel (torch's SGD, Adam, AdamW, Adagrad). Applied where the optimizer has it; what ran is logged as "
        "trainperf_optimizer_impl_used",
    )
    g.add_argument(
        "--ddp-bucket-mb",
        type=_positive_float,
        default=None,
        metavar="MB",
        help="DDP gradient bucket size in MiB (default: DDP's 25). Each full bucket is all-reduced while backward "
        "goes on, so smaller buckets overlap more communication with computation (and send more messages); a "
        "bucket larger than the model all-reduces once, after backward. Several processes only",
    )
    g.add_argument(
        "--pin-memory",
        action="store_true",
        help="input batches in page-locked host memory, for faster asynchronous copies to the GPU. CUDA only: an "
        "error on a CPU",
    )
    g.add_argument(
        "--device-prefetch",
        action="store_true",
        help="copy each batch to the GPU one step ahead, on a side CUDA stream, so the copy overlaps the step "
        "before it and the step finds its data on the device (with --pin-memory the copies are asynchronous). "
        "CUDA only: an error on a CPU",
    )
    g.add_argument(
        "--prefetch",
        type=_count,
        default=prefetch_default,
        metavar="N",
        help="a background thread reads N batches ahead of the training step (default "
        f"{prefetch_default}: none). Batches stay in order; a workload whose batches draw from the global random "
        "generators is then no longer bit-reproducible",
    )


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of MiB (e.g. 25)") from None
    if not math.isfinite(value) or not 0 < value <= MAX_BUCKET_MB:
        raise argparse.ArgumentTypeError(f"{text!r}: give a size above 0 and at most {MAX_BUCKET_MB:g} MiB")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of batches (e.g. 2)") from None
    if not 0 <= value <= MAX_PREFETCH:
        raise argparse.ArgumentTypeError(f"{text!r}: give 0 (off) to {MAX_PREFETCH} batches")
    return value


def benchmark_keys(
    names: list[str], scale: str, dry_run: bool = True, round_version: str | None = None
) -> tuple[str, ...]:
    """The benchmark keys a command names: 'all' (or none) is every benchmark of the round (``--round``, default
    2.0) that runs this kind of run; named keys are checked, and must be of the round where one is given."""
    if not names or names == ["all"]:  # all that run this kind of run
        chosen = round_version or rounds.DEFAULT_ROUND
        keys = [k for k in registry.available(scale, chosen) if dry_run or not registry.get_spec(k, scale).dry_run_only]
        if not keys:
            raise UsageError(f"no benchmark of round {chosen} has a {scale} scale yet")
        return tuple(keys)
    for name in names:
        registry.get_spec(name, scale)  # unknown or unavailable -> clear error
        if round_version is not None and name not in rounds.get(round_version).keys:
            raise UsageError(
                f"benchmark {name!r} is not in round {rounds.get(round_version).version} (it is in round "
                f"{registry.round_of(name).version}); leave --round out or name the benchmarks of the round"
            )
    return tuple(dict.fromkeys(names))
