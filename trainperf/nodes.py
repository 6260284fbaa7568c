"""Runs over several nodes: torchrun's c10d rendezvous options, checked, and the node a process runs on.

``trainperf run … --nnodes N --node-rank R --rdzv-endpoint HOST:PORT [--rdzv-id ID] [--nproc P]`` starts one
torchrun agent on this node; the agents of all N nodes meet at HOST:PORT (the c10d rendezvous: the agent on HOST
serves it, the others connect) and start P processes each. Without ``--nnodes`` (or with 1) a run is a
standalone torchrun job on this node, as before. Under Slurm, :func:`slurm_job` tells which job a run belongs to
(its record in the run's log). No import-time side effects; no torch import.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping

from trainperf.errors import UsageError

DEFAULT_RDZV_ID = "trainperf"  # the rendezvous of one job; two jobs sharing an endpoint need distinct ids
_HOST_PORT = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?):(?P<port>\d{1,5})$")
_RDZV_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def check_endpoint(endpoint: str) -> tuple[str, int]:
    """``HOST:PORT`` (a host name, an IPv4 address, or ``[IPv6]``) with a port in 1..65535."""
    m = _HOST_PORT.match(endpoint)
    if not m or not 0 < int(m["port"]) < 65536:
        raise UsageError(
            f"--rdzv-endpoint {endpoint!r}: give HOST:PORT of the node that serves the rendezvous (the first node), "
            "e.g. node001:29500 or 10.0.0.1:29500, with a free port in 1..65535; the same value on every node"
        )
    return m["host"], int(m["port"])


def torchrun_node_args(
    *, nproc: int, nnodes: int, node_rank: int | None, rdzv_endpoint: str | None, rdzv_id: str | None
) -> list[str]:
    """torchrun's options for this node: ``--standalone`` on one node; the c10d rendezvous on several.

    Inconsistent options fail here, before anything starts.
    """
    if nproc < 1:
        raise UsageError("--nproc (processes per node) must be at least 1")
    if nnodes < 1:
        raise UsageError("--nnodes must be at least 1")
    if nnodes == 1:
        given = [
            name
            for name, v in (("--node-rank", node_rank), ("--rdzv-endpoint", rdzv_endpoint), ("--rdzv-id", rdzv_id))
            if v is not None
        ]
        if given:
            raise UsageError(
                f"{', '.join(given)} only mean something with --nnodes N (N > 1): a run on one node needs none; "
                "on several nodes give --nnodes N --node-rank R --rdzv-endpoint HOST:PORT on every node"
            )
        return ["--standalone", f"--nproc_per_node={nproc}"]
    if node_rank is None or rdzv_endpoint is None:
        missing = [name for name, v in (("--node-rank", node_rank), ("--rdzv-endpoint", rdzv_endpoint)) if v is None]
        raise UsageError(
            f"--nnodes {nnodes} needs {' and '.join(missing)}: on every node give --node-rank R (0 on the first "
            "node, up to N-1) and the same --rdzv-endpoint HOST:PORT (the first node's address and a free port)"
        )
    if not 0 <= node_rank < nnodes:
        raise UsageError(f"--node-rank {node_rank} is outside 0..{nnodes - 1} for --nnodes {nnodes}")
    check_endpoint(rdzv_endpoint)
    rid = DEFAULT_RDZV_ID if rdzv_id is None else rdzv_id
    if not _RDZV_ID.match(rid):
        raise UsageError(f"--rdzv-id {rid!r}: use 1-64 letters, digits, '.', '_' or '-', the same on every node")
    return [
        f"--nnodes={nnodes}",
        f"--node-rank={node_rank}",
        f"--nproc_per_node={nproc}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={rdzv_endpoint}",
        f"--rdzv-id={rid}",
    ]


def node_count() -> int:
    """The nodes of this torchrun job (torchrun's agents, ``GROUP_WORLD_SIZE``); 1 outside torchrun."""
    return _env_int("GROUP_WORLD_SIZE", 1)


def node_rank() -> int:
    """This process's node as the rendezvous numbered it (``GROUP_RANK``); 0 outside torchrun."""
    return _env_int("GROUP_RANK", 0)


def _env_int(name: str, default: int) -> int:
    text = os.environ.get(name, "").strip()
    try:
        return int(text) if text else default
    except ValueError:
        raise UsageError(
            f"${name}={text!r} is not a whole number (torchrun sets it; unset it outside torchrun)"
        ) from None


# The Slurm job a run belongs to: Slurm's variables (every task of a job has them), then `sacct` where the cluster
# keeps accounting. Values are bounded, as everything written into a log is.
_SLURM_VARS = {
    "job_id": "SLURM_JOB_ID",
    "array_job_id": "SLURM_ARRAY_JOB_ID",
    "array_task_id": "SLURM_ARRAY_TASK_ID",
    "node_list": "SLURM_JOB_NODELIST",
    "nodes": "SLURM_JOB_NUM_NODES",
    "partition": "SLURM_JOB_PARTITION",
    "account": "SLURM_JOB_ACCOUNT",
    "cluster": "SLURM_CLUSTER_NAME",
}
_SLURM_VALUE = re.compile(r"^[A-Za-z0-9_.,\[\]-]{1,256}$")
_SACCT_FIELDS = ("JobID", "NodeList", "Partition", "Account", "Cluster")
SACCT_TIMEOUT_S = 5  # accounting that does not answer in seconds is left out, never waited on


def slurm_job(environ: Mapping[str, str] | None = None, *, sacct: bool = True) -> dict[str, str] | None:
    """The Slurm job of this process (job id, node list, array task, partition, ...), or None outside Slurm.

    ``source`` says where the facts came from: ``sacct`` when the cluster's accounting answered (it then also
    fills the partition, account and cluster the job's variables may lack), else ``environment``."""
    env = os.environ if environ is None else environ
    if not _SLURM_VALUE.match(env.get("SLURM_JOB_ID", "")):
        return None
    job = {key: env[var] for key, var in _SLURM_VARS.items() if _SLURM_VALUE.match(env.get(var, ""))}
    job["source"] = "environment"
    accounted = _sacct(job["job_id"]) if sacct else None
    if accounted:
        for key, value in accounted.items():
            job.setdefault(key, value)
        job["source"] = "sacct"
    return job


def _sacct(job_id: str) -> dict[str, str] | None:
    """The job's allocation as Slurm's accounting records it; None where there is none (no slurmdbd, no sacct)."""
    exe = shutil.which("sacct")
    if exe is None:
        return None
    cmd = [exe, "-j", job_id, "-X", "-n", "-P", "-o", ",".join(_SACCT_FIELDS)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=SACCT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    rows = [line.split("|") for line in r.stdout.splitlines()[:2]]
    if r.returncode != 0 or len(rows) != 1 or len(rows[0]) != len(_SACCT_FIELDS):
        return None
    keys = ("job_id", "node_list", "partition", "account", "cluster")
    return {k: v for k, v in zip(keys, rows[0], strict=True) if _SLURM_VALUE.match(v)}
