"""The reference scale's tree search, self-play and evaluation games, on the MLPerf v2.0 recipe.

Written after the v2.0 C++ self-play (``cc/concurrent_selfplay.cc``, ``cc/mcts_tree.cc``, ``cc/eval.cc``)
and its flags (``ml_perf/flags/19/selfplay.flags``, ``eval.flags``), in Python over our Go engine:

- **PUCT** with MiniGo's exploration scale ``U_scale = 2 (log((1 + N + 19652) / 19652) + 1.25)`` and
  ``U = U_scale sqrt(max(1, N - 1)) P / (1 + n)``; an unvisited child starts at the parent's value minus
  ``value_init_penalty`` (0.2, first-play urgency), clamped to [-1, 1].
- **Virtual loss**: each round selects up to ``virtual_losses`` (4) leaves in every tree, each path
  counting as a visit that lost until its leaf is evaluated, so one round gathers up to 4 leaves per game.
- **Batched inference across games**: each round evaluates the leaves of *all* games in one network call
  (on the run's device), each leaf under a random board symmetry (the reference's inference symmetry).
- **Playout-cap randomisation** (``fastplay_frequency`` 0.75): a move is a fast move with that probability:
  ``fastplay_readouts`` (80) readouts, no noise, not a training example; otherwise ``num_readouts`` (800)
  readouts with Dirichlet noise (alpha 0.03, mix 0.3) at the root, and a training example whose policy is
  the visits after **target pruning** (``ReshapeFinalVisits``: a move's visits are cut to what its action
  score justifies against the best move's).
- **Moves**: for the first ``soft_pick_cutoff`` (30) moves, a point drawn with probability proportional to
  visits^0.98 (``policy_softmax_temp``); then the most visited move.
- **Resignation**: each game draws its threshold uniformly from [``min_resign_threshold``,
  ``max_resign_threshold``) = [-1, -0.9); ``disable_resign_pct`` (0) of the games never resign. A player
  resigns when its root value falls below the threshold.
- **Evaluation** (``eval.flags``): 100 readouts, no noise, no soft pick, no resignation.

Games end by two passes (Tromp-Taylor score), resignation, or the move cap. Each move searches a fresh
tree (README: the reference reuses the subtree between fast moves).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from trainperf.workloads.minigo.features import HistoryPosition, mlperf07_planes
from trainperf.workloads.minigo.go import BLACK, PASS, WHITE, Position, playout_moves

UCT_BASE = 19652.0  # cc/constants.h kUct_base
UCT_INIT = 1.25  # kUct_init

# (positions, symmetries) -> (priors over N*N+1 actions, values for the player to move), numpy
Evaluator = Callable[[Sequence[Position], np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True, kw_only=True)
class SearchConfig:
    num_readouts: int = 800
    fastplay_frequency: float = 0.75
    fastplay_readouts: int = 80
    virtual_losses: int = 4
    dirichlet_alpha: float = 0.03
    noise_mix: float = 0.3
    value_init_penalty: float = 0.2
    target_pruning: bool = True
    policy_softmax_temp: float = 0.98
    soft_pick_cutoff: int = 30  # ((N * N // 12) // 2) * 2 on 19x19
    min_resign_threshold: float = -1.0
    max_resign_threshold: float = -0.9
    disable_resign_pct: float = 0.0
    max_game_moves: int = 722  # 2 * N * N


# --- the network, batched, under board symmetries -----------------------------------------------------
def _transform(planes: np.ndarray, k: int) -> np.ndarray:
    """Board symmetry k (0-3: quarter turns, 4-7: the same then a mirror) on the last two axes."""
    out = np.rot90(planes, k % 4, axes=(-2, -1))
    return out[..., ::-1] if k >= 4 else out


def _untransform(board: np.ndarray, k: int) -> np.ndarray:
    """The inverse of :func:`_transform` (a mirror is its own inverse; quarter turns turn back)."""
    if k >= 4:
        board = board[..., ::-1]
    return np.rot90(board, -(k % 4), axes=(-2, -1))


def network_evaluator(model: torch.nn.Module, device: torch.device | str = "cpu") -> Evaluator:
    """One forward pass for a list of positions, each under its symmetry; priors mapped back to the board."""

    def evaluate(positions: Sequence[Position], syms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        size = positions[0].size
        x = mlperf07_planes(positions)
        for k in range(1, 8):
            sel = syms == k
            if sel.any():
                x[sel] = _transform(x[sel], k)
        with torch.inference_mode():
            logits, value = model(torch.from_numpy(np.ascontiguousarray(x)).to(device, torch.float32))
            priors = torch.softmax(logits.float(), 1).cpu().numpy()
            values = value.float().cpu().numpy()
        board = priors[:, : size * size].reshape(-1, size, size)
        for k in range(1, 8):
            sel = syms == k
            if sel.any():
                board[sel] = _untransform(board[sel], k)
        priors[:, : size * size] = board.reshape(-1, size * size)
        return priors, values

    return evaluate


# --- the tree ---------------------------------------------------------------------------------------------
class Node:
    __slots__ = ("pos", "terminal", "moves", "prior", "n", "w", "children", "value", "pending")

    def __init__(self, pos: Position, max_moves: int) -> None:
        self.pos = pos
        self.terminal = pos.game_over or pos.moves >= max_moves
        self.moves: np.ndarray | None = None  # candidate moves once expanded (PASS always among them)
        self.children: dict[int, Node] = {}
        self.value = 0.0  # the network's value for the player to move here
        self.pending = False  # queued for evaluation in this round

    def expand(self, priors: np.ndarray, value: float) -> None:
        points = playout_moves(self.pos)
        moves = np.append(points, PASS)
        size = self.pos.size
        actions = np.where(moves == PASS, size * size, moves)
        p = priors[actions].astype(np.float64) + 1e-8
        self.moves, self.prior = moves, p / p.sum()
        self.n = np.zeros(len(moves))
        self.w = np.zeros(len(moves))
        self.value = value

    def terminal_value(self) -> float:
        black_wins = self.pos.score() > 0
        return 1.0 if black_wins == (self.pos.to_play == BLACK) else -1.0

    def action_scores(self, penalty: float) -> np.ndarray:
        n, total = self.n, self.n.sum()
        fpu = min(1.0, max(-1.0, self.value - penalty))
        q = np.where(n > 0, self.w / np.maximum(n, 1), fpu)
        u_scale = 2.0 * (math.log((1.0 + total + UCT_BASE) / UCT_BASE) + UCT_INIT)
        return q + u_scale * math.sqrt(max(1.0, total - 1.0)) * self.prior / (1 + n)

    def child(self, i: int, max_moves: int) -> Node:
        node = self.children.get(i)
        if node is None:
            pos = self.pos.copy()
            pos.play(int(self.moves[i]))
            node = self.children[i] = Node(pos, max_moves)
        return node

    def q(self) -> float:
        """The root's value for its player to move: the visits' mean, or the network's before any visit."""
        total = self.n.sum()
        return float(self.w.sum() / total) if total else self.value


def _backup(path: list[tuple[Node, int]], value: float, virtual: bool) -> None:
    """``value`` is for the leaf's player to move; a virtual visit (a loss) is taken back first."""
    for node, i in reversed(path):
        value = -value
        if virtual:
            node.n[i] -= 1
            node.w[i] += 1.0
        node.n[i] += 1
        node.w[i] += value


def search(
    roots: Sequence[Node],
    readouts: Sequence[int],
    evaluate: Evaluator,
    cfg: SearchConfig,
    rng: np.random.Generator,
    noise: Sequence[bool],
) -> None:
    """Grow every root's tree until it has ``readouts[g]`` visits (all games' leaves batched per round)."""
    fresh = [r for r in roots if r.moves is None and not r.terminal]
    if fresh:
        priors, values = evaluate([r.pos for r in fresh], rng.integers(0, 8, len(fresh)))
        for r, p, v in zip(fresh, priors, values, strict=True):
            r.expand(p, float(v))
    for r, add_noise in zip(roots, noise, strict=True):
        if add_noise and r.moves is not None and len(r.moves) > 1:
            r.prior = (1 - cfg.noise_mix) * r.prior + cfg.noise_mix * rng.dirichlet(
                [cfg.dirichlet_alpha] * len(r.moves)
            )
    max_moves = cfg.max_game_moves
    while True:
        leaves: list[Node] = []
        paths: list[list[tuple[Node, int]]] = []
        for root, target in zip(roots, readouts, strict=True):
            if root.terminal or root.moves is None:
                continue
            for _ in range(cfg.virtual_losses):
                if root.n.sum() >= target:
                    break
                node, path = root, []
                while node.moves is not None and not node.terminal and not node.pending:
                    i = int(np.argmax(node.action_scores(cfg.value_init_penalty)))
                    path.append((node, i))
                    node = node.child(i, max_moves)
                if node.terminal:
                    _backup(path, node.terminal_value(), virtual=False)
                    continue
                if node.pending:  # a leaf already queued this round: the round ends for this game
                    break
                for n, i in path:  # virtual loss: a visit that lost, until the leaf's value arrives
                    n.n[i] += 1
                    n.w[i] -= 1.0
                node.pending = True
                leaves.append(node)
                paths.append(path)
        if not leaves:
            return
        priors, values = evaluate([n.pos for n in leaves], rng.integers(0, 8, len(leaves)))
        for node, path, p, v in zip(leaves, paths, priors, values, strict=True):
            node.pending = False
            node.expand(p, float(v))
            _backup(path, float(v), virtual=True)


def prune_visits(root: Node, penalty: float) -> np.ndarray:
    """``ReshapeFinalVisits``: each move's visits cut to the fewest that keep its action score below the
    best move's (the best move keeps all of its visits)."""
    n = root.n.copy()
    best = int(np.argmax(n))
    total = n.sum()
    u_scale = 2.0 * (math.log((1.0 + total + UCT_BASE) / UCT_BASE) + UCT_INIT)
    u_common = u_scale * math.sqrt(1.0 + total)
    q = np.where(n > 0, root.w / np.maximum(n, 1), min(1.0, max(-1.0, root.value - penalty)))
    best_score = q[best] + u_common * root.prior[best] / (1 + n[best])
    gap = best_score - q
    with np.errstate(divide="ignore", invalid="ignore"):
        needed = np.where(gap > 0, np.floor(u_scale * root.prior * math.sqrt(total) / gap), 0.0)
    out = np.clip(np.minimum(n, needed), 0, None)
    out[best] = n[best]
    return out


def search_policy(root: Node, visits: np.ndarray) -> np.ndarray:
    size = root.pos.size
    pi = np.zeros(size * size + 1, dtype=np.float32)
    actions = np.where(root.moves == PASS, size * size, root.moves)
    pi[actions] = visits / max(visits.sum(), 1)
    return pi


def pick(root: Node, cfg: SearchConfig, rng: np.random.Generator | None) -> int:
    """Soft pick (visits^0.98, points only) before the cutoff in self-play, else the most visited move."""
    if rng is not None and root.pos.moves < cfg.soft_pick_cutoff:
        weights = np.where(root.moves == PASS, 0.0, root.n**cfg.policy_softmax_temp)
        if weights.sum() > 0:
            return int(rng.choice(len(weights), p=weights / weights.sum()))
        return int(np.flatnonzero(root.moves == PASS)[0])
    return int(np.argmax(root.n))


def _over(pos: Position, cfg: SearchConfig) -> bool:
    return pos.game_over or pos.moves >= cfg.max_game_moves


# --- self-play --------------------------------------------------------------------------------------
@dataclass
class Games:
    """Training examples of finished games: full-readout moves only (fast moves are not examples)."""

    features: np.ndarray  # (M, 13, N, N) uint8
    policy: np.ndarray  # (M, N*N+1) float32: visits after target pruning
    outcome: np.ndarray  # (M,) float32: +1 when the player to move won
    black_wins: int
    games: int
    resigned: int = 0
    moves: int = 0  # moves played, fast ones included


def self_play(evaluate: Evaluator, *, games: int, size: int, komi: float, cfg: SearchConfig, seed: int) -> Games:
    """``games`` games of the network against itself, advancing together (one batch per search round)."""
    rng = np.random.default_rng(seed)
    thresholds = rng.uniform(cfg.min_resign_threshold, cfg.max_resign_threshold, games)
    resign_on = rng.random(games) >= cfg.disable_resign_pct
    positions = [HistoryPosition(size, komi) for _ in range(games)]
    records: list[list[tuple[Position, np.ndarray]]] = [[] for _ in range(games)]
    winner: list[int | None] = [None] * games  # set on resignation
    active = [g for g in range(games)]
    moves = 0
    while active:
        full = [bool(rng.random() >= cfg.fastplay_frequency) for _ in active]
        roots = [Node(positions[g], cfg.max_game_moves) for g in active]
        readouts = [cfg.num_readouts if f else cfg.fastplay_readouts for f in full]
        search(roots, readouts, evaluate, cfg, rng, noise=full)
        still = []
        for g, root, is_full in zip(active, roots, full, strict=True):
            if resign_on[g] and root.q() < thresholds[g]:
                winner[g] = WHITE if root.pos.to_play == BLACK else BLACK
                continue
            if is_full:
                visits = prune_visits(root, cfg.value_init_penalty) if cfg.target_pruning else root.n
                records[g].append((root.pos, search_policy(root, visits)))
            nxt = root.pos.copy()
            nxt.play(int(root.moves[pick(root, cfg, rng)]))
            moves += 1
            positions[g] = nxt
            if not _over(nxt, cfg):
                still.append(g)
        active = still
    feats, pols, outs, black_wins = [], [], [], 0
    for g in range(games):
        black_won = winner[g] == BLACK if winner[g] is not None else positions[g].score() > 0
        black_wins += black_won
        if not records[g]:
            continue
        ps = [p for p, _ in records[g]]
        feats.append(mlperf07_planes(ps))
        pols.append(np.stack([pi for _, pi in records[g]]))
        outs.append(np.array([1.0 if black_won == (p.to_play == BLACK) else -1.0 for p in ps], np.float32))
    n = size * size
    return Games(
        np.concatenate(feats) if feats else np.zeros((0, 13, size, size), np.uint8),
        np.concatenate(pols) if pols else np.zeros((0, n + 1), np.float32),
        np.concatenate(outs) if outs else np.zeros(0, np.float32),
        black_wins,
        games,
        resigned=sum(w is not None for w in winner),
        moves=moves,
    )


# --- evaluation against the target model -------------------------------------------------------------
@dataclass
class MatchResult:
    wins: int = 0
    games: int = 0
    black_wins: int = 0  # our wins with Black
    black_games: int = 0

    @property
    def win_rate(self) -> float:
        return self.wins / self.games if self.games else float("nan")


def play_match(
    ours: Evaluator,
    theirs: Evaluator,
    *,
    games: int,
    size: int,
    komi: float,
    readouts: int,
    cfg: SearchConfig,
    seed: int,
) -> MatchResult:
    """``games`` games, colours alternating (we are Black in the even ones), each side searching its own
    fresh tree with ``readouts`` readouts, no noise, no soft pick, no resignation (``eval.flags``); the
    games differ through the random inference symmetries."""
    rng = np.random.default_rng(seed)
    our_color = [BLACK if g % 2 == 0 else WHITE for g in range(games)]
    positions = [HistoryPosition(size, komi) for _ in range(games)]
    active = list(range(games))
    while active:
        for side, evaluate in ((True, ours), (False, theirs)):
            turn = [
                g for g in active if not _over(positions[g], cfg) and (positions[g].to_play == our_color[g]) == side
            ]
            if not turn:
                continue
            roots = [Node(positions[g], cfg.max_game_moves) for g in turn]
            search(roots, [readouts] * len(turn), evaluate, cfg, rng, noise=[False] * len(turn))
            for g, root in zip(turn, roots, strict=True):
                nxt = root.pos.copy()
                nxt.play(int(root.moves[pick(root, cfg, None)]))
                positions[g] = nxt
        active = [g for g in active if not _over(positions[g], cfg)]
    result = MatchResult(games=games)
    for g in range(games):
        we_won = (positions[g].score() > 0) == (our_color[g] == BLACK)
        result.wins += we_won
        result.black_games += our_color[g] == BLACK
        result.black_wins += we_won and our_color[g] == BLACK
    return result
