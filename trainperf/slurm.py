"""``trainperf slurm BENCH … -o job.sbatch``: an sbatch script that runs ``trainperf run`` on N nodes with srun.

The way MLPerf submitters launch on Slurm: one task per node (``--ntasks-per-node=1``), each a torchrun agent
(``trainperf run --nnodes N --node-rank $SLURM_NODEID --rdzv-endpoint FIRST_NODE:PORT``) that starts ``--nproc``
processes on its node; the agents meet at the first node of ``$SLURM_JOB_NODELIST`` (``scontrol show
hostnames``). The run writes the system description of the job (N nodes like its first) into its output
folder; ``trainperf slurm`` also writes one beside the script, from the submitting host, for review before
the job starts.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from trainperf.errors import UsageError
from trainperf.fileio import write_output
from trainperf.nodes import DEFAULT_RDZV_ID

SCRIPT_MARK = b"# Written by `trainperf slurm`"  # in every script it writes: another file is not replaced
DEFAULT_PORT = 29500  # torchrun's own default rendezvous port
_NODE_OPTIONS = ("--nnodes", "--node-rank", "--rdzv-endpoint", "--rdzv-id", "--nproc")
_SLURM_TIME = re.compile(r"^(\d+-)?\d{1,3}(:\d{2}){0,2}$")  # minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]
_SLURM_WORD = re.compile(r"^[A-Za-z0-9_.,-]{1,128}$")  # partitions, accounts, job names


def check_run_args(run_args: list[str]) -> None:
    """The options given for ``trainperf run``: no node option (the script sets them), and parseable by it."""
    for arg in run_args:
        name = arg.split("=", 1)[0]
        if name in _NODE_OPTIONS:
            raise UsageError(
                f"{name} is set by the sbatch script (from --nodes, --nproc-per-node and Slurm's variables): "
                "give it to `trainperf slurm`, not after --"
            )


_DEPENDENCY = re.compile(r"^(singleton|[a-z]+(:\d+(_\d+)?(\+\d+)?)+)([,?][a-z]+(:\d+(_\d+)?(\+\d+)?)+)*$")
_IMAGE = re.compile(r"^[A-Za-z0-9_./:@#+-]{1,512}$")  # a registry image (nvcr.io#nvidia/pytorch:24.09-py3), a .sqsh
_MOUNTS = re.compile(r"^[A-Za-z0-9_./:,+-]{1,2048}$")  # SRC:DST[:FLAGS],...


def render(
    *,
    benchmarks: list[str],
    run_args: list[str],
    nodes: int,
    nproc_per_node: int,
    gpus_per_node: int,
    port: int = DEFAULT_PORT,
    job_name: str | None = None,
    time_limit: str | None = None,
    partition: str | None = None,
    account: str | None = None,
    dependency: str | None = None,
    array_runs: int | None = None,
    container_image: str | None = None,
    container_mounts: str | None = None,
    command: str = "trainperf",
) -> str:
    """The text of the sbatch script.

    ``array_runs`` N: a job array of N tasks, one at a time (``--array=0-(N-1)%1``), task k running ``--runs k+1``
    into the same output folder, so it resumes the k runs before it and adds one: each run is its own array task
    and the results gather in one folder. ``container_image``: srun starts each node's agent in that image with
    pyxis (``--container-image``, ``--container-mounts``)."""
    _check_numbers(nodes, nproc_per_node, gpus_per_node, port, array_runs)
    job_name = job_name or "trainperf-" + "-".join(benchmarks or ["all"])
    for option, value, pattern, what in (
        ("--job-name", job_name, _SLURM_WORD, "letters, digits, '.', '_', ',' or '-' (at most 128)"),
        ("--partition", partition, _SLURM_WORD, "letters, digits, '.', '_', ',' or '-' (at most 128)"),
        ("--account", account, _SLURM_WORD, "letters, digits, '.', '_', ',' or '-' (at most 128)"),
        ("--time", time_limit, _SLURM_TIME, "Slurm's time format, e.g. 90, 01:30:00 or 1-00:00:00"),
        ("--dependency", dependency, _DEPENDENCY, "Slurm's form, e.g. afterok:1234 or afterany:12:13 or singleton"),
        ("--container-image", container_image, _IMAGE, "an image name or file path without spaces or quotes"),
        ("--container-mounts", container_mounts, _MOUNTS, "SRC:DST[:FLAGS] pairs separated by commas"),
    ):
        if value is not None and not pattern.match(value):
            raise UsageError(f"{option} {value!r}: give {what}")
    if container_mounts is not None and container_image is None:
        raise UsageError("--container-mounts needs --container-image (the mounts are the container's)")
    check_run_args(run_args)
    header = [
        "#!/bin/bash",
        f"#SBATCH --job-name={job_name}",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",  # one torchrun agent per node; it starts the node's processes
    ]
    if gpus_per_node:
        header.append(f"#SBATCH --gpus-per-node={gpus_per_node}")
    options = (("time", time_limit), ("partition", partition), ("account", account), ("dependency", dependency))
    header += [f"#SBATCH --{k}={v}" for k, v in options if v]
    if array_runs:
        header.append(f"#SBATCH --array=0-{array_runs - 1}%1")  # one run at a time: the folder holds one suite
    header.append("#SBATCH --output=%x-%A_%a.out" if array_runs else "#SBATCH --output=%x-%j.out")
    return "\n".join(
        header
        + _body(
            benchmarks, run_args, nodes, nproc_per_node, port, array_runs, container_image, container_mounts, command
        )
    )


def _check_numbers(nodes: int, nproc_per_node: int, gpus_per_node: int, port: int, array_runs: int | None) -> None:
    if nodes < 1:
        raise UsageError("--nodes must be at least 1")
    if nproc_per_node < 1:
        raise UsageError("--nproc-per-node must be at least 1")
    if gpus_per_node < 0:
        raise UsageError("--gpus-per-node must be 0 (a CPU job) or more")
    if gpus_per_node and nproc_per_node > gpus_per_node:
        raise UsageError(
            f"--nproc-per-node {nproc_per_node} is more than --gpus-per-node {gpus_per_node}: each process of a GPU "
            "job drives one GPU"
        )
    if not 0 < port < 65536:
        raise UsageError(f"--port {port}: give a free TCP port in 1..65535 for the rendezvous")
    if array_runs is not None and not 1 <= array_runs <= 1000:
        raise UsageError(f"--array with --runs {array_runs}: give 1..1000 runs, one array task each")


def _body(
    benchmarks: list[str],
    run_args: list[str],
    nodes: int,
    nproc_per_node: int,
    port: int,
    array_runs: int | None,
    container_image: str | None,
    container_mounts: str | None,
    command: str,
) -> list[str]:
    run = shlex.join([command, "run", *benchmarks, *run_args, "--nnodes", str(nodes), "--nproc", str(nproc_per_node)])
    # expanded by each task's shell, on its own node: its node number and the job's rendezvous (one node: none, as
    # `trainperf run` refuses them without --nnodes N > 1)
    per_node = ' --node-rank "$SLURM_NODEID" --rdzv-endpoint "$TRAINPERF_RDZV_ENDPOINT" --rdzv-id "$TRAINPERF_RDZV_ID"'
    if nodes == 1:
        per_node = ""
    if array_runs:
        per_node += ' --runs "$((SLURM_ARRAY_TASK_ID + 1))"'  # the last --runs counts: resume k runs, add one
    srun = [f"srun --nodes={nodes}", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
    if container_image:
        srun.append(shlex.quote(f"--container-image={container_image}"))
        if container_mounts:
            srun.append(shlex.quote(f"--container-mounts={container_mounts}"))
    return [
        "",
        "# Written by `trainperf slurm`: submit with `sbatch`. One torchrun agent per node meets the others at",
        "# the first node of the allocation; each starts --nproc processes. The run writes its results and the",
        "# system description of the job (number_of_nodes from the rendezvous) under its --out folder.",
        *(
            ["# A job array: task k resumes the k runs before it in the same --out folder and adds run k."]
            if array_runs
            else []
        ),
        "set -euo pipefail",
        # read every line (no `head`): with pipefail, head closing the pipe early fails the job with SIGPIPE (141)
        'nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST")',
        "first_node=${nodes%%$'\\n'*}",
        f'export TRAINPERF_RDZV_ENDPOINT="$first_node:{port}"',
        f'export TRAINPERF_RDZV_ID="{DEFAULT_RDZV_ID}-$SLURM_JOB_ID"',
        " ".join(srun) + f" bash -c {shlex.quote('exec ' + run + per_node)}",
        "",
    ]


def write_script(text: str, path: Path) -> Path:
    """Write the script atomically (a temporary file, then rename), executable."""
    return write_output(Path(path), text, what="the sbatch script", mode=0o755)
