"""Self-play throughput of the mini minigo recipe: positions/s and games/min, one process vs one per core.

    flock /tmp/trainperf-cpu.lock python benchmarks/minigo_throughput.py [--games 64] [--repeats 3]

Plays ``games`` self-play games with the untrained mini network and the recipe's search budget, all games
advancing together (one network batch per playout round), first in one process, then split over one worker
process per core as a run does; reports the median of ``repeats`` alternating repetitions (the machine is
shared and noisy). The peer row plays a quarter as many games one after another in one process, so
that each network call evaluates one position: the ratio to the batched row is what batching the search
gains. Also reports the network's batched evaluation rate alone.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time

import torch

from trainperf import registry
from trainperf.workloads.minigo import mcts
from trainperf.workloads.minigo.go import Position
from trainperf.workloads.minigo.model import mini_gonet
from trainperf.workloads.minigo.workers import init_worker, self_play_worker
from trainperf.workloads.minigo.workload import MAX_WORKERS


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--games", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    r = registry.default_recipe("minigo", "mini")
    size, cfg = r.board_size, mcts.SearchConfig(playouts=r.num_readouts, dirichlet_alpha=r.dirichlet_alpha)
    torch.manual_seed(0)
    state = mini_gonet(size).state_dict()
    workers = max(1, min(len(os.sched_getaffinity(0)), MAX_WORKERS))  # as many as a run starts
    pool = multiprocessing.get_context("fork").Pool(workers, initializer=init_worker)

    def job(games: int, seed: int) -> tuple:
        return (state, size, r.komi, games, cfg, seed, r.temperature_moves)

    unbatched = "1 process, one game at a time (peer)"
    results: dict[str, list[tuple[float, float]]] = {unbatched: [], "1 process": [], f"{workers} processes": []}
    for rep in range(a.repeats):
        t = time.perf_counter()
        singles = [self_play_worker(job(1, rep * 1000 + i)) for i in range(max(1, a.games // 4))]
        dt = time.perf_counter() - t
        results[unbatched].append((sum(len(x.outcome) for x in singles) / dt, len(singles) / dt * 60))
        t = time.perf_counter()
        g = self_play_worker(job(a.games, rep))
        dt = time.perf_counter() - t
        results["1 process"].append((len(g.outcome) / dt, g.games / dt * 60))
        t = time.perf_counter()
        parts = pool.map(self_play_worker, [job(a.games // workers, rep * 10 + w) for w in range(workers)])
        dt = time.perf_counter() - t
        positions = sum(len(x.outcome) for x in parts)
        results[f"{workers} processes"].append((positions / dt, sum(x.games for x in parts) / dt * 60))
    pool.terminate()
    pool.join()
    print(
        f"self-play, {size}x{size}, {r.num_readouts} readouts, {a.games} games in parallel batches "
        f"(median of {a.repeats}):"
    )
    for name, values in results.items():
        pos_s = statistics.median(v[0] for v in values)
        games_min = statistics.median(v[1] for v in values)
        print(f"  {name}: {pos_s:8.1f} positions/s  {games_min:7.1f} games/min")
    ratios = [b[0] / u[0] for b, u in zip(results["1 process"], results[unbatched], strict=True)]
    print(f"  batched / one game at a time (positions/s, 1 process): {statistics.median(ratios):.1f}x")
    net = mini_gonet(size).eval()
    evaluate = mcts.network_evaluator(net)
    batch = [Position(size) for _ in range(a.games // workers)]
    torch.set_num_threads(1)
    evaluate(batch)
    t = time.perf_counter()
    for _ in range(50):
        evaluate(batch)
    print(
        f"  network alone, batch {len(batch)}, 1 thread: {50 * len(batch) / (time.perf_counter() - t):8.0f} positions/s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
