"""The wall clocks of a job's nodes, compared with rank 0's before a run starts.

A run's time is ``run_stop - run_start``, each read as the maximum of the ranks' wall clocks
(:mod:`trainperf.harness.clock`). On one node every rank reads the same clock. Across nodes a clock that is
off by ``s`` milliseconds can move ``run_start`` or ``run_stop`` by up to ``s`` (when the node holding the
maximum changes), and it scrambles the order of events in the logs. So each rank's offset from rank 0 is
measured during initialization, logged as ``trainperf_clock_skew_ms``, and a run is refused when the skew
can exceed :data:`MAX_SKEW_MS`.

The measurement (NTP's bound, over the process group): rank 0 reads its clock (``t0``) and broadcasts;
rank ``r`` reads its clock as the broadcast arrives (``t1``), again just before an all-gather (``t2``); rank 0
reads its clock when the all-gather returns (``t3``). A message cannot arrive before it was sent, so the
offset ``theta`` of rank ``r`` (its clock minus rank 0's) satisfies ``t2 - t3 <= theta <= t1 - t0``. Of
:data:`ROUNDS` round trips the narrowest interval is kept (NTP's minimum-delay filter); its midpoint is the
estimate and its half-width the uncertainty, both in milliseconds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.distributed as torch_dist

from trainperf.dist import DistContext
from trainperf.errors import TrainperfError

# The bound (docs/manual.md, "Many nodes"): 100 ms is 0.25% of the shortest mini run (resnet, about 40 s), below the
# run-to-run spread of every benchmark, and far above what NTP keeps on a local network (about 1 ms). A host
# whose clock is unsynchronized (no NTP, a paused VM) is off by seconds and is caught.
MAX_SKEW_MS = 100.0
ROUNDS = 8  # round trips; the narrowest is kept


class ClockSkewError(TrainperfError):
    """The nodes' wall clocks disagree by more than the bound: the run's time could not be trusted."""


@dataclass(frozen=True, kw_only=True)
class RankOffset:
    rank: int
    node: int  # the node (torchrun's group rank) this rank runs on
    offset_ms: float  # this rank's clock minus rank 0's
    uncertainty_ms: float  # half-width of the interval the true offset lies in

    @property
    def worst_ms(self) -> float:
        """The largest skew consistent with the measurement."""
        return abs(self.offset_ms) + self.uncertainty_ms


@dataclass(frozen=True, kw_only=True)
class ClockSkew:
    offsets: tuple[RankOffset, ...]  # one per node: its first rank's (ranks of one node read one clock)
    bound_ms: float = MAX_SKEW_MS

    @property
    def worst_ms(self) -> float:
        return max((o.worst_ms for o in self.offsets), default=0.0)

    @property
    def within_bound(self) -> bool:
        return self.worst_ms <= self.bound_ms

    def as_event(self) -> tuple[float, dict]:
        """The ``trainperf_clock_skew_ms`` event: the worst skew, and each node's offset and uncertainty."""
        return round(self.worst_ms, 3), {
            "bound_ms": self.bound_ms,
            "nodes": [
                {
                    "node": o.node,
                    "rank": o.rank,
                    "offset_ms": round(o.offset_ms, 3),
                    "uncertainty_ms": round(o.uncertainty_ms, 3),
                }
                for o in self.offsets
            ],
        }

    def check(self) -> None:
        if self.within_bound:
            return
        worst = max(self.offsets, key=lambda o: o.worst_ms)
        raise ClockSkewError(
            f"the wall clock of node {worst.node} (rank {worst.rank}) is {worst.offset_ms:+.1f} ms "
            f"(± {worst.uncertainty_ms:.1f} ms) off rank 0's, more than the {self.bound_ms:g} ms a run allows "
            "(docs/manual.md, Many nodes): run_start and run_stop are read on every node, so the result could be off "
            "by as much. Synchronize the nodes' clocks (chrony or ntpd, `chronyc tracking` shows the offset), then run "
            "the same command: this run was not started"
        )


def measure(dist: DistContext, node: int, *, rounds: int = ROUNDS, clock=time.time) -> ClockSkew:
    """Every rank's offset from rank 0 (a collective: every rank calls it). ``node``: this rank's node."""
    if not dist.distributed:
        return ClockSkew(offsets=(RankOffset(rank=0, node=node, offset_ms=0.0, uncertainty_ms=0.0),))
    best = (float("-inf"), float("inf"))  # (low, high) of this rank's offset, seconds
    for _ in range(rounds):
        start = torch.zeros(1, dtype=torch.float64, device=dist.device)
        t0 = clock()
        torch_dist.broadcast(start, src=0)
        dist.synchronize()
        t1 = clock()
        stamps = [torch.zeros(2, dtype=torch.float64, device=dist.device) for _ in range(dist.world_size)]
        t2 = clock()
        torch_dist.all_gather(stamps, torch.tensor([t1, t2], dtype=torch.float64, device=dist.device))
        dist.synchronize()
        t3 = clock()
        # rank 0 knows t0 and t3; it sends them with the next collective (below) and the bound is computed there
        bounds = torch.tensor([t0, t3], dtype=torch.float64, device=dist.device)
        torch_dist.broadcast(bounds, src=0)
        r0_t0, r0_t3 = bounds.tolist()
        low, high = t2 - r0_t3, t1 - r0_t0
        if high - low < best[1] - best[0]:
            best = (low, high)
    mine = torch.tensor(
        [(best[0] + best[1]) / 2 * 1000, (best[1] - best[0]) / 2 * 1000, float(node)],
        dtype=torch.float64,
        device=dist.device,
    )
    everyone = [torch.zeros(3, dtype=torch.float64, device=dist.device) for _ in range(dist.world_size)]
    torch_dist.all_gather(everyone, mine)
    offsets: dict[int, RankOffset] = {}
    for rank, t in enumerate(everyone):
        offset, half, n = t.tolist()
        if rank == 0:
            offset, half = 0.0, 0.0  # rank 0 against itself
        offsets.setdefault(int(n), RankOffset(rank=rank, node=int(n), offset_ms=offset, uncertainty_ms=half))
    return ClockSkew(offsets=tuple(offsets[n] for n in sorted(offsets)))
