"""Batched Monte Carlo tree search (PUCT, as in MiniGo/AlphaZero) over many games at once, and self-play.

The hot path is the network: every playout round descends once in each game's tree, gathers the leaf
positions of *all* games, and evaluates them in one network call (a batch as large as the number of games),
never one position at a time. Trees are reused between moves (the chosen child becomes the next root).

Conventions: a node's ``w[i]`` is the value of its i-th move for the player to move at that node; the
network's value is for the player to move at the leaf; terminal positions (two passes, or the move cap) are
valued by the Tromp-Taylor score. A player passes only when it has no legal move outside its own one-point
eyes, so games are played out until every dead stone is captured and Tromp-Taylor scoring is exact.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from trainperf.workloads.minigo.go import BLACK, PASS, Position, playout_moves

# (positions) -> (priors over N*N+1 actions, values for the player to move), both numpy
Evaluator = Callable[[Sequence[Position]], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True, kw_only=True)
class SearchConfig:
    playouts: int = 24
    c_puct: float = 1.5
    dirichlet_alpha: float = 0.3  # root noise in self-play (MiniGo: 0.03 on 19x19, ~10 / legal moves)
    noise_mix: float = 0.25  # MiniGo's noise mix
    max_moves: int = 0  # 0: 3 * N * N
    superko: bool = False  # the recipe's positional_superko (self-play games; the mini keeps simple ko)
    fill_own_eyes: bool = False  # the recipe's fill_own_eyes (the mini leaves own-eye moves out)


def features(positions: Sequence[Position]) -> np.ndarray:
    """(B, 3, N, N) float32 planes: stones of the player to move, of the opponent, and 1 when Black is to move."""
    size = positions[0].size
    stones = np.array([p.stones for p in positions], dtype=np.int8).reshape(-1, size, size)
    me = np.array([p.to_play for p in positions], dtype=np.int8)[:, None, None]
    out = np.empty((len(positions), 3, size, size), dtype=np.float32)
    out[:, 0] = stones == me
    out[:, 1] = (stones != 0) & (stones != me)
    out[:, 2] = me == BLACK
    return out


def network_evaluator(model: torch.nn.Module) -> Evaluator:
    """Batched evaluation with ``model`` in eval mode, no gradients."""

    def evaluate(positions: Sequence[Position]) -> tuple[np.ndarray, np.ndarray]:
        with torch.inference_mode():
            logits, value = model(torch.from_numpy(features(positions)))
            return torch.softmax(logits, 1).numpy(), value.numpy()

    return evaluate


class Node:
    """A search node. The per-move statistics are Python lists: on a 5x5 board a node has about 20 moves,
    where numpy's per-call overhead costs more than the arithmetic (select and backup are the search's
    innermost loop)."""

    __slots__ = ("pos", "terminal", "moves", "move_list", "prior", "n", "w", "visits", "children")

    def __init__(self, pos: Position, max_moves: int) -> None:
        self.pos = pos
        self.terminal = pos.game_over or pos.moves >= max_moves
        self.moves: np.ndarray | None = None  # candidate moves once expanded
        self.children: dict[int, Node] = {}

    def expand(self, priors: np.ndarray, fill_own_eyes: bool = False) -> None:
        moves = playout_moves(self.pos, fill_own_eyes=fill_own_eyes)
        if len(moves) == 0:
            moves = np.array([PASS])
        actions = np.where(moves == PASS, self.pos.size * self.pos.size, moves)
        p = priors[actions].astype(np.float64) + 1e-8
        self.moves, self.move_list, self.prior = moves, moves.tolist(), (p / p.sum()).tolist()
        self.n = [0.0] * len(moves)
        self.w = [0.0] * len(moves)
        self.visits = 0  # sum(n), kept as playouts pass

    def terminal_value(self) -> float:
        """+1 when the player to move wins on the Tromp-Taylor score, else -1."""
        black_wins = self.pos.score() > 0
        return 1.0 if black_wins == (self.pos.to_play == BLACK) else -1.0

    def select(self, c_puct: float) -> int:
        """argmax over moves of Q + c_puct * P * sqrt(N + 1) / (1 + n) (Q = 0 for unvisited moves; the first
        of equal scores)."""
        s = math.sqrt(self.visits + 1)
        best, best_i = -math.inf, 0
        for i, (p, n, w) in enumerate(zip(self.prior, self.n, self.w, strict=True)):
            v = (w / n if n > 0 else 0.0) + c_puct * p * s / (1 + n)
            if v > best:
                best, best_i = v, i
        return best_i

    def child(self, i: int, max_moves: int) -> Node:
        node = self.children.get(i)
        if node is None:
            pos = self.pos.copy()
            pos.play(self.move_list[i])
            node = self.children[i] = Node(pos, max_moves)
        return node


def search(roots: Sequence[Node], evaluate: Evaluator, cfg: SearchConfig, rng: np.random.Generator | None) -> None:
    """Run ``cfg.playouts`` playouts in every (non-terminal) root; root noise when ``rng`` is given."""
    max_moves = _max_moves(cfg, roots[0].pos.size)
    fresh = [r for r in roots if r.moves is None]
    if fresh:
        priors, _ = evaluate([r.pos for r in fresh])
        for r, p in zip(fresh, priors, strict=True):
            r.expand(p, cfg.fill_own_eyes)
    if rng is not None:
        for r in roots:
            if len(r.moves) > 1:
                noise = rng.dirichlet([cfg.dirichlet_alpha] * len(r.moves))
                r.prior = ((1 - cfg.noise_mix) * np.asarray(r.prior) + cfg.noise_mix * noise).tolist()
    for _ in range(cfg.playouts):
        leaves, paths = [], []
        for root in roots:
            node, path = root, []
            while node.moves is not None and not node.terminal:
                i = node.select(cfg.c_puct)
                path.append((node, i))
                node = node.child(i, max_moves)
            if node.terminal:
                _backup(path, node.terminal_value())
            else:
                leaves.append(node)
                paths.append(path)
        if leaves:
            priors, values = evaluate([n.pos for n in leaves])
            for node, path, p, v in zip(leaves, paths, priors, values, strict=True):
                node.expand(p, cfg.fill_own_eyes)
                _backup(path, float(v))


def _backup(path: list[tuple[Node, int]], value: float) -> None:
    for node, i in reversed(path):
        value = -value  # the leaf's value is for its player to move; its parent chose the move
        node.n[i] += 1
        node.w[i] += value
        node.visits += 1


def _max_moves(cfg: SearchConfig, size: int) -> int:
    return cfg.max_moves or 3 * size * size


def visit_policy(node: Node) -> np.ndarray:
    """The search's move distribution over N*N+1 actions (the policy training target)."""
    size = node.pos.size
    pi = np.zeros(size * size + 1, dtype=np.float32)
    actions = np.where(node.moves == PASS, size * size, node.moves)
    pi[actions] = np.asarray(node.n) / max(node.visits, 1)
    return pi


def choose(node: Node, rng: np.random.Generator | None, temperature: bool) -> int:
    """Index of the move to play: proportional to visits early in self-play, else the most visited."""
    n = np.asarray(node.n)
    if temperature and rng is not None and node.visits > 0:
        return int(rng.choice(len(n), p=n / n.sum()))
    return int(np.argmax(n))


@dataclass
class Games:
    """Training examples of finished self-play games (augmented later by the 8 board symmetries)."""

    features: np.ndarray  # (M, 3, N, N) float32
    policy: np.ndarray  # (M, N*N+1) float32
    outcome: np.ndarray  # (M,) float32, +1 when the player to move won
    black_wins: int
    games: int


def self_play(
    evaluate: Evaluator,
    *,
    games: int,
    size: int,
    komi: float,
    cfg: SearchConfig,
    seed: int,
    temperature_moves: int,
) -> Games:
    """Play ``games`` games of the network against itself, all advancing together (one batch per playout)."""
    rng = np.random.default_rng(seed)
    max_moves = _max_moves(cfg, size)
    roots = [Node(Position(size, komi, superko=cfg.superko), max_moves) for _ in range(games)]
    records: list[list[tuple[Position, np.ndarray]]] = [[] for _ in range(games)]
    active = list(range(games))
    while active:
        search([roots[g] for g in active], evaluate, cfg, rng)
        still = []
        for g in active:
            root = roots[g]
            records[g].append((root.pos, visit_policy(root)))
            i = choose(root, rng, root.pos.moves < temperature_moves)
            roots[g] = root.child(i, max_moves)
            if not roots[g].terminal:
                still.append(g)
        active = still
    feats, pols, outs, black_wins = [], [], [], 0
    for g in range(games):
        black_won = roots[g].pos.score() > 0
        black_wins += black_won
        positions = [p for p, _ in records[g]]
        feats.append(features(positions))
        pols.append(np.stack([pi for _, pi in records[g]]))
        outs.append(np.array([1.0 if black_won == (p.to_play == BLACK) else -1.0 for p in positions], np.float32))
    return Games(np.concatenate(feats), np.concatenate(pols), np.concatenate(outs), black_wins, games)
