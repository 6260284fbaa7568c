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
    command: str = "trainperf",
) -> str:
    """The text of the sbatch script."""
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
    job_name = job_name or "trainperf-" + "-".join(benchmarks or ["all"])
    for option, value in (("--job-name", job_name), ("--partition", partition), ("--account", account)):
        if value is not None and not _SLURM_WORD.match(value):
            raise UsageError(f"{option} {value!r}: use letters, digits, '.', '_', ',' or '-' (at most 128)")
    if time_limit is not None and not _SLURM_TIME.match(time_limit):
        raise UsageError(f"--time {time_limit!r}: give Slurm's time format, e.g. 90, 01:30:00 or 1-00:00:00")
    check_run_args(run_args)
    header = [
        "#!/bin/bash",
        f"#SBATCH --job-name={job_name}",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",  # one torchrun agent per node; it starts the node's processes
    ]
    if gpus_per_node:
        header.append(f"#SBATCH --gpus-per-node={gpus_per_node}")
    header += [
        f"#SBATCH --{k}={v}" for k, v in (("time", time_limit), ("partition", partition), ("account", account)) if v
    ]
    header.append("#SBATCH --output=%x-%j.out")
    run = shlex.join([command, "run", *benchmarks, *run_args, "--nnodes", str(nodes), "--nproc", str(nproc_per_node)])
    # expanded by each task's shell, on its own node: its node number and the job's rendezvous
    per_node = ' --node-rank "$SLURM_NODEID" --rdzv-endpoint "$TRAINPERF_RDZV_ENDPOINT" --rdzv-id "$TRAINPERF_RDZV_ID"'
    body = [
        "",
        "# Written by `trainperf slurm`: submit with `sbatch`. One torchrun agent per node meets the others at",
        "# the first node of the allocation; each starts --nproc processes. The run writes its results and the",
        "# system description of the job (number_of_nodes from the rendezvous) under its --out folder.",
        "set -euo pipefail",
        # read every line (no `head`): with pipefail, head closing the pipe early fails the job with SIGPIPE (141)
        'nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST")',
        "first_node=${nodes%%$'\\n'*}",
        f'export TRAINPERF_RDZV_ENDPOINT="$first_node:{port}"',
        f'export TRAINPERF_RDZV_ID="{DEFAULT_RDZV_ID}-$SLURM_JOB_ID"',
        f"srun --nodes={nodes} --ntasks-per-node=1 --kill-on-bad-exit=1 "
        f"bash -c {shlex.quote('exec ' + run + per_node)}",
        "",
    ]
    return "\n".join(header + body)


def write_script(text: str, path: Path) -> Path:
    """Write the script atomically (a temporary file, then rename), executable."""
    return write_output(Path(path), text, what="the sbatch script", mode=0o755)
