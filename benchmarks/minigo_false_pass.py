"""The probability that a minigo network that does not learn passes the mini evaluation, over a whole run.

    python benchmarks/minigo_false_pass.py --measured benchmarks/data/minigo_strength.jsonl

The mini evaluation (trainperf/workloads/minigo/README.md) plays a screen of ``eval_games`` games after
every generation; when the screen reaches the target it plays a confirmation match of ``confirm_games``
further games on other openings, and the run passes only when the confirmation reaches the target too.
A network that does not learn wins each game with some fixed probability p. Treating its games as
independent (each evaluation meets a slightly different network, so its games come out anew), one
evaluation passes with probability

    q(p) = P[Binomial(eval_games, p) >= ceil(target * eval_games)]
           * P[Binomial(confirm_games, p) >= ceil(target * confirm_games)]

and a run of K evaluations (the spec's budget: one per generation) with probability 1 - (1 - q)^K. The
p of each measured network (``benchmarks/minigo_strength.py`` lines: untrained and one-generation
networks over hundreds of games) is put in, with the pooled rate of each generation and the upper end of
its 95% (Clopper-Pearson) interval; the last column is the old rule (screen alone, 40 games at 0.25).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

from scipy.stats import beta, binom

from trainperf import registry


def at_least(k: int, n: int, p: float) -> float:
    """P[Binomial(n, p) >= k]."""
    return float(binom.sf(k - 1, n, p))


def wins_needed(target: float, games: int) -> int:
    return math.ceil(target * games - 1e-9)


def pass_per_evaluation(p: float, target: float, screen: int, confirm: int) -> float:
    q = at_least(wins_needed(target, screen), screen, p)
    if confirm:
        q *= at_least(wins_needed(target, confirm), confirm, p)
    return q


def over_budget(q: float, evaluations: int) -> float:
    return 1.0 - (1.0 - q) ** evaluations


def upper95(wins: int, games: int) -> float:
    """Upper end of the two-sided 95% Clopper-Pearson interval."""
    return 1.0 if wins >= games else float(beta.ppf(0.975, wins + 1, games - wins))


def main() -> int:
    spec = registry.get_spec("minigo", "mini")
    recipe = registry.default_recipe("minigo", "mini")
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--measured", type=Path, required=True, help="JSON lines of benchmarks/minigo_strength.py")
    p.add_argument("--target", type=float, default=spec.target)
    p.add_argument("--screen", type=int, default=recipe.eval_games)
    p.add_argument("--confirm", type=int, default=recipe.confirm_games)
    p.add_argument("--evaluations", type=int, default=len(spec.eval_points(recipe)))
    a = p.parse_args()
    rows = [json.loads(line) for line in a.measured.read_text().splitlines() if line.strip()]
    k = a.evaluations
    print(
        f"rule: screen {a.screen} games >= {a.target:g} ({wins_needed(a.target, a.screen)} wins), then confirmation "
        f"{a.confirm} games >= {a.target:g} ({wins_needed(a.target, a.confirm)} wins); {k} evaluations per run"
    )
    print(f"{'network':28s} {'wins/games':>11s} {'p':>6s} {'per eval':>10s} {'whole run':>10s} {'old rule':>9s}")

    def show(name: str, wins: int, games: int, rate: float | None = None) -> float:
        p_ = wins / games if rate is None else rate
        q = pass_per_evaluation(p_, a.target, a.screen, a.confirm)
        old = over_budget(at_least(wins_needed(0.25, 40), 40, p_), k)
        run = over_budget(q, k)
        print(f"{name:28s} {wins:5d}/{games:<5d} {p_:6.3f} {q:10.2e} {run:10.4f} {old:9.3f}")
        return run

    pooled: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    largest = 0.0
    for r in rows:
        largest = max(largest, show(f"seed {r['seed']}, generation {r['generation']}", r["wins"], r["games"]))
        pooled[r["generation"]][0] += r["wins"]
        pooled[r["generation"]][1] += r["games"]
    worst = 0.0
    for g, (wins, games) in sorted(pooled.items()):
        show(f"generation {g}, pooled", wins, games)
        worst = max(worst, show(f"generation {g}, pooled, upper95", wins, games, upper95(wins, games)))
    low, high = 0.0, a.target  # the true rate at which a network that stays there passes with probability 0.05
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (
            (mid, high)
            if over_budget(pass_per_evaluation(mid, a.target, a.screen, a.confirm), k) < 0.05
            else (low, mid)
        )
    print(f"a network that stays at a true win rate of {low:.3f} passes within the budget with probability 0.05")
    print(
        f"largest whole-run false-pass probability: {largest:.4f} over the measured networks, "
        f"{worst:.4f} at a pooled upper 95% bound"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
