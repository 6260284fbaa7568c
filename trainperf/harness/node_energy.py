"""Energy to train over every node of a job: each node's local rank 0 meters its own host, rank 0 sums them.

RAPL and NVML count for a whole machine (every CPU package, every GPU the driver sees), so one process per host
meters it: the local rank 0 of each torchrun agent. Two agents can share a host (two "nodes" on one machine,
or containers on one kernel); their meters then read the same counters, and the sum keeps one reading per host,
identified by :func:`host_id`. When any host was not measured the job's energy is not measured either: a
partial sum would understate it.
"""

from __future__ import annotations

import socket
from pathlib import Path

from trainperf.dist import DistContext
from trainperf.harness.energy import EnergyReading

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def host_id() -> str:
    """The running kernel (boot id; the machine whose counters RAPL and NVML read), else the hostname."""
    try:
        return BOOT_ID.read_text().strip() or socket.gethostname()
    except OSError:
        return socket.gethostname()


def meters_here(dist: DistContext) -> bool:
    """Whether this rank meters its host: the first process of each node."""
    return dist.local_rank == 0


def job_reading(dist: DistContext, reading: EnergyReading | None, host: str | None = None) -> EnergyReading | None:
    """The job's energy on rank 0 (None elsewhere): every host's reading once. A collective: every rank calls it.

    ``reading``: this rank's own (None on ranks that do not meter); ``host``: this rank's host (default
    :func:`host_id`).
    """
    mine = None if reading is None else (host or host_id(), socket.gethostname(), reading.as_record(), reading.samples)
    gathered = dist.gather_objects(mine)
    if not dist.is_main:
        return None
    per_host: dict[str, tuple[str, dict, int]] = {}
    for item in gathered:
        if item is not None:
            per_host.setdefault(item[0], item[1:])  # a host metered twice (two agents on it) counts once
    agents = sum(item is not None for item in gathered)
    if agents <= 1:  # one node: rank 0 metered it, and its reading stands as it is
        return reading
    missing = [f"{name}: {rec['energy_note']}" for name, rec, _ in per_host.values() if rec["energy_joules"] is None]
    counted = f"{len(per_host)} host(s) metered by {agents} node process(es), each host counted once"
    if missing:
        return EnergyReading(
            joules=None, sources=[], samples=0, note=f"not measured: {counted}; not measured on " + "; ".join(missing)
        )
    return EnergyReading(
        joules=sum(rec["energy_joules"] for _, rec, _ in per_host.values()),
        sources=[f"{name}: {s}" for name, rec, _ in per_host.values() for s in rec["energy_sources"]],
        samples=min(samples for _, _, samples in per_host.values()),
        note=f"sum over {counted}; "
        + " | ".join(f"{name}: {rec['energy_note']}" for name, rec, _ in per_host.values()),
    )
