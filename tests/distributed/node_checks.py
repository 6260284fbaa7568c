"""Run under torchrun with two processes (gloo), each posing as a node: the clock-skew measurement and the sum of
the nodes' energy readings. Rank 0 writes what it found as JSON to argv[1]."""

from __future__ import annotations

import json
import sys
import time

from trainperf import dist as dist_mod
from trainperf.harness import node_energy, skew
from trainperf.harness.energy import EnergyReading


def reading(joules: float | None, label: str) -> EnergyReading:
    note = f"measured by {label}" if joules is not None else "not measured: no RAPL here"
    return EnergyReading(joules=joules, sources=[label] if joules is not None else [], samples=5, note=note)


def main(path: str) -> None:
    ctx = dist_mod.init_from_env(60.0)
    found: dict = {"world_size": ctx.world_size}
    same = skew.measure(ctx, node=ctx.rank)  # two processes posing as two nodes on one clock
    found["same_clock"] = same.as_event()
    off = 0.5 if ctx.rank == 1 else 0.0  # node 1's clock 500 ms ahead
    shifted = skew.measure(ctx, node=ctx.rank, clock=lambda: time.time() + off)
    found["shifted"] = shifted.as_event()
    try:
        shifted.check()
        found["refused"] = None
    except skew.ClockSkewError as e:
        found["refused"] = str(e)
    joules = 100.0 if ctx.rank == 0 else 40.0
    label = f"rapl:package-0 of rank {ctx.rank}"
    two_hosts = node_energy.job_reading(ctx, reading(joules, label), host=f"host-{ctx.rank}")
    one_host = node_energy.job_reading(ctx, reading(joules, label), host="host-0")  # two agents, one machine
    unmeasured = node_energy.job_reading(ctx, reading(joules if ctx.rank == 0 else None, label), host=f"h{ctx.rank}")
    if ctx.is_main:
        found["two_hosts"] = two_hosts.as_record()
        found["one_host"] = one_host.as_record()
        found["unmeasured"] = unmeasured.as_record()
        with open(path, "w") as f:
            json.dump(found, f)
    else:
        assert two_hosts is None and one_host is None
    dist_mod.shutdown(ctx, completed=True)


if __name__ == "__main__":
    main(sys.argv[1])
