"""`trainperf slurm`: its options, and the sbatch script and system description it writes."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path

from trainperf import slurm
from trainperf.arguments import add_force_argument, whole_number
from trainperf.cli_run import benchmark_keys, default_division
from trainperf.fileio import Output, check_outputs
from trainperf.registry import BENCHMARKS
from trainperf.text import printable, shell_command

_COUNT = whole_number(0, 1_000_000)  # nodes, GPUs or processes: the rules below each say which may be 0
_PORT = whole_number(0, 65_535)  # 0 and the rest refused by trainperf.slurm.render, naming the option


def add_parser(sub: argparse._SubParsersAction, func: Callable[[argparse.Namespace], int]) -> None:
    sl = sub.add_parser(
        "slurm",
        help="write an sbatch script that runs benchmarks on N nodes (srun, one torchrun agent per node)",
        description="Write an sbatch script that launches `trainperf run BENCHMARK… RUN_OPTIONS` on N nodes with "
        "srun: one torchrun agent per node, meeting at the first node of the allocation (c10d rendezvous). Run "
        f"options go after --, e.g. `trainperf slurm {BENCHMARKS[0]} --nodes 4 --gpus-per-node 8 -o job.sbatch "
        "-- --scale reference --runs 5`.",
    )
    sl.add_argument(
        "benchmarks",
        nargs="*",
        metavar="BENCHMARK [-- RUN_OPTIONS]",
        help="benchmark keys or 'all' (as for run); after --, options for trainperf run",
    )
    sl.add_argument("-o", "--output", type=Path, required=True, help="the sbatch script to write")
    sl.add_argument("--nodes", type=_COUNT, required=True, help="nodes of the job (#SBATCH --nodes)")
    sl.add_argument("--gpus-per-node", type=_COUNT, default=0, help="GPUs per node (#SBATCH --gpus-per-node; 0: CPU)")
    sl.add_argument(
        "--nproc-per-node", type=_COUNT, default=None, help="processes per node (default: one per GPU, or 1)"
    )
    sl.add_argument("--port", type=_PORT, default=29500, help="rendezvous port on the first node (default 29500)")
    sl.add_argument("--job-name", default=None, help="#SBATCH --job-name (default: trainperf-BENCHMARKS)")
    sl.add_argument("--time", default=None, help="#SBATCH --time, e.g. 02:00:00")
    sl.add_argument("--partition", default=None, help="#SBATCH --partition")
    sl.add_argument("--account", default=None, help="#SBATCH --account")
    sl.add_argument("--dependency", default=None, help="#SBATCH --dependency, e.g. afterok:1234")
    sl.add_argument(
        "--array",
        action="store_true",
        help="one array task per run of --runs N (#SBATCH --array=0-(N-1)%%1): task k resumes the runs before it "
        "in the same --out folder and adds one, so the N runs of a score gather in one folder",
    )
    sl.add_argument(
        "--container-image",
        default=None,
        help="run each node's agent in this container image with pyxis/enroot (srun --container-image); trainperf "
        "and the data must be in the image or mounted",
    )
    sl.add_argument(
        "--container-mounts", default=None, help="srun --container-mounts=SRC:DST[,...] (with --container-image)"
    )
    add_force_argument(sl)
    sl.set_defaults(func=func)


def write_job(args: argparse.Namespace, run_args: list[str], run: argparse.Namespace) -> int:
    """Write the sbatch script and the system description of its nodes; ``run``: the parsed `trainperf run`
    options the job will run with."""
    # the system description and the host probe (psutil): 20 ms to import, not for `trainperf --help`
    from trainperf.system import (
        NOT_APPLICABLE,
        SYSTEM_MARK,
        UNKNOWN,
        check_system_file,
        describe_system,
        write_system,
    )

    benchmarks = list(args.benchmarks)
    slurm.check_run_args(run_args)
    system_output = args.output.with_name(args.output.name + ".system.json")
    check_outputs(
        [Output(args.output, "-o", slurm.SCRIPT_MARK), Output(system_output, "-o (its system)", SYSTEM_MARK)],
        force=args.force,
    )
    benchmark_keys(run.benchmarks, run.scale, dry_run=run.dry_run)
    gpus = args.gpus_per_node
    text = slurm.render(
        benchmarks=benchmarks,
        run_args=run_args,
        nodes=args.nodes,
        nproc_per_node=args.nproc_per_node or max(1, gpus),
        gpus_per_node=gpus,
        port=args.port,
        job_name=args.job_name,
        time_limit=args.time,
        partition=args.partition,
        account=args.account,
        dependency=args.dependency,
        array_runs=run.runs if args.array else None,
        container_image=args.container_image,
        container_mounts=args.container_mounts,
    )
    script = slurm.write_script(text, args.output)
    desc = describe_system(
        org=run.org,
        division=default_division(run.division, run.scale),
        availability=run.availability,
        system_name=run.system_name,
        nodes=args.nodes,
    )
    if gpus and desc["accelerators_per_node"] != str(gpus):  # this host is not a compute node: say what is asked
        desc = {k: UNKNOWN if v == NOT_APPLICABLE and k.startswith("accelerator") else v for k, v in desc.items()}
        desc["accelerators_per_node"] = str(gpus)
        desc["hw_notes"] += f" Host fields describe {os.uname().nodename}, where the job was written, not its nodes."
    system_path = write_system(desc, system_output)
    problems = check_system_file(system_path)
    print(
        printable(f"{script}: written; submit it with `{shell_command('sbatch', script)}`")
        + f" ({args.nodes} node(s), one torchrun agent each)"
    )
    print(
        f"{printable(str(system_path))}: the system for {args.nodes} node(s) as seen from this host"
        + ("" if not problems else f"; the official system_desc_checker found problems: {'; '.join(problems)}")
        + ". The run writes the description of its own nodes under its --out folder"
    )
    return 1 if problems else 0
