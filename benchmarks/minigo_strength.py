"""Measure the strength of minigo networks that have not learned (or barely): the evidence for the mini target.

    python benchmarks/minigo_strength.py --seeds 100011 100012 --generations 0 1 --games 200 \
        --out /tmp/minigo-strength.jsonl

For each seed it builds the network a run of that seed starts from (the harness seeds the same way),
trains it for the largest of ``--generations`` generations exactly as a run does (the workload's own
self-play, window batches, loss, optimizer and schedule, without evaluating), and after each listed
generation plays ``--games`` games against GNU Go level 0 with the evaluation's search, from the
openings that follow the screen's (the confirmation's openings, ``--first-opening``). One JSON line per
network: wins, wins as Black and as White, disagreements with GNU Go's score, seconds. The lines feed
``benchmarks/minigo_false_pass.py``. Wrap it in `flock /tmp/trainperf-cpu.lock`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from trainperf import registry
from trainperf.dist import DistContext
from trainperf.harness.runner import seed_everything
from trainperf.spec import RunConfig
from trainperf.workloads.minigo import arena, mcts
from trainperf.workloads.minigo.workers import worker_state


def strength(w, model: torch.nn.Module, games: int, first_opening: int) -> arena.ArenaResult:
    """``games`` games of ``model`` against GNU Go, from openings ``first_opening``, ..."""
    model.eval()
    cfg = mcts.SearchConfig(playouts=w.recipe.num_readouts)
    result = w._gnugo_match(worker_state(model), cfg, games, first_opening=first_opening)
    model.train()
    return result


def measure(seed: int, generations: list[int], games: int, first_opening: int, data_dir: Path, overrides: dict):
    spec = registry.get_spec("minigo", "mini")
    recipe = registry.default_recipe("minigo", "mini").with_overrides(overrides)
    w = registry.workload_class("minigo")(spec, recipe, RunConfig(seed=seed), data_dir=data_dir, dist=DistContext())
    w.prepare()
    try:
        seed_everything(seed)
        model = w.build_model()
        opt, sched = w.build_optimizer(model)
        for g in range(max(generations) + 1):
            if g > 0:  # one generation as the harness trains it: self-play, then one step per batch
                for batch in w.generation_batches(model, g):
                    opt.zero_grad(set_to_none=True)
                    w.loss(model, batch).backward()
                    opt.step()
                    sched.step()
            if g in generations:
                t = time.perf_counter()
                torch.set_num_threads(2)
                r = strength(w, model, games, first_opening)
                yield {
                    "seed": seed,
                    "generation": g,
                    "games": r.games,
                    "wins": r.wins,
                    "black_wins": r.black_wins,
                    "white_wins": r.white_wins,
                    "disagreements": r.disagreements,
                    "win_rate": round(r.win_rate, 4),
                    "seconds": round(time.perf_counter() - t, 1),
                }
    finally:
        w.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", required=True)
    p.add_argument("--generations", type=int, nargs="+", default=[0, 1])
    p.add_argument("--games", type=int, default=200)
    p.add_argument("--first-opening", type=int, default=None, help="default: the confirmation's first opening")
    p.add_argument("--out", type=Path, default=None, help="append the JSON lines to this file too")
    p.add_argument("--data-dir", type=Path, default=Path("/tmp"))
    p.add_argument(
        "--overrides", type=json.loads, default={}, help="recipe changes, e.g. '{\"train_steps_per_generation\": 20}'"
    )
    a = p.parse_args()
    first = a.first_opening
    if first is None:
        first = registry.default_recipe("minigo", "mini").eval_games // 2
    for seed in a.seeds:
        for row in measure(seed, sorted(set(a.generations)), a.games, first, a.data_dir, a.overrides):
            line = json.dumps(row)
            print(line, flush=True)
            if a.out is not None:
                with a.out.open("a") as f:
                    f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
