"""The reference scale's tree search, self-play and evaluation games, on the MLPerf v2.0 recipe.

Written after the v2.0 C++ self-play (``cc/concurrent_selfplay.cc``, ``cc/mcts_tree.cc``, ``cc/eval.cc``)
and its flags (``ml_perf/flags/19/selfplay.flags``, ``eval.flags``), in Python over our Go engine:

- **Rules**: positional superko (``superko``) and every legal point a candidate, own eyes included
  (``fill_own_eyes``), as ``cc/position.cc``; pass is always a candidate.
- **PUCT** with MiniGo's exploration scale ``U_scale = 2 (log((1 + N + 19652) / 19652) + 1.25)`` and
  ``U = U_scale sqrt(max(1, N - 1)) P / (1 + n)``, N the node's own visits; ``Q = w / (1 + n)`` with every
  move's ``w`` starting at the node's value minus ``value_init_penalty`` (0.2), clamped to [-1, 1]
  (``MctsNode::child_Q`` and ``IncorporateResults``): an unvisited move's Q is that first-play value.
- **Virtual loss**: each round selects up to ``virtual_losses`` (4) leaves in every tree, each path
  carrying a lost value (on ``w``, not a visit: ``AddVirtualLoss``) until its leaf is evaluated, so one
  round gathers up to 4 leaves per game.
- **Tree reuse**: the chosen move's subtree is the next root and a search adds its readouts to the visits
  it already has; before a full move (fast moves on) the tree starts afresh (``ClearSubtrees``). In
  evaluation each side keeps its own tree through the game.
- **Batched inference across games**: each round evaluates the leaves of *all* games in one network call
  (on the run's device), each leaf under a random board symmetry (the reference's inference symmetry).
- **Playout-cap randomisation** (``fastplay_frequency`` 0.75): a move is a fast move with that probability:
  ``fastplay_readouts`` (80) readouts, no noise, not a training example; otherwise ``num_readouts`` (800)
  readouts with Dirichlet noise (alpha 0.03, mix 0.3) at the root, and a training example whose policy is
  the visits after **target pruning** (``ReshapeFinalVisits``: a move's visits are cut to what its action
  score justifies against the best move's), raised to 0.98 before the soft-pick cutoff
  (``CalculateSearchPi``). A game's first move is a full move.
- **Moves**: for the first ``soft_pick_cutoff`` (30) moves, a point drawn with probability proportional to
  visits^0.98 (``policy_softmax_temp``); then the most visited move.
- **Resignation**: each game draws its threshold uniformly from [``min_resign_threshold``,
  ``max_resign_threshold``) = [-1, -0.9); ``disable_resign_pct`` (0) of the games never resign. A player
  resigns when its root value falls below the threshold.
- **Evaluation** (``eval.flags``): 100 readouts, no noise, no soft pick, no resignation.
- **Pass-alive areas** (``passalive.py``, Benson's algorithm as ``cc/position.cc`` has it): once a player's
  opponent has passed ``restrict_pass_alive_play_threshold`` (4) times in a row (the count latches), its most
  visited move is chosen outside pass-alive areas and its policy target loses their visits
  (``MaybePlayMove``, ``PickMove``, ``ReshapeFinalVisits``); in evaluation always (``SuggestMove``). From
  move ``size * ((size + 2) // 3)`` on, a game whose whole board is pass-alive is ended by passes.
- **Ties** of the most visited move go to the higher action score (``GetMostVisitedMove``).

Games end by two passes, resignation, or the move cap; every score counts pass-alive areas for their owner
(``Position::CalculateScore``, ``passalive.score``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from trainperf.workloads.minigo import passalive
from trainperf.workloads.minigo.features import HistoryPosition, mlperf07_planes
from trainperf.workloads.minigo.go import BLACK, PASS, WHITE, Position, playout_moves

UCT_BASE = 19652.0  # cc/constants.h kUct_base
UCT_INIT = 1.25  # kUct_init

# (positions, symmetries) -> (priors over N*N+1 actions, values for the player to move), numpy
Evaluator = Callable[[Sequence[Position], np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True, kw_only=True)
class SearchConfig:
    superko: bool = True  # positional superko (cc/position.cc)
    fill_own_eyes: bool = True  # every legal point is a candidate (the reference has no eye rule)
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
    restrict_pass_alive_play_threshold: int = 4  # cc/concurrent_selfplay.cc:109


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
    """A search node, with the v2.0 tree's statistics (``cc/mcts_tree.h``, ``mcts_tree.cc``).

    ``N`` is the node's own visit count (its expansion and every readout through it) and ``W`` their value
    sum for its player to move; ``n[i]``, ``w[i]`` are move i's. When a node is expanded every move's ``w``
    starts at the first-play value (the node's network value minus ``value_init_penalty``, clamped to
    [-1, 1]), so a move's action value is ``Q = w / (1 + n)``: the first-play value for an unvisited move,
    and the first-play value counted as one more visit after it (``child_Q``); a child's own ``W`` starts
    at that value too, from its player's side."""

    __slots__ = (
        "pos",
        "terminal",
        "moves",
        "index",
        "prior",
        "n",
        "w",
        "children",
        "value",
        "fpu",
        "pending",
        "N",
        "W",
        "final",
    )

    def __init__(self, pos: Position, max_moves: int, first_play: float = 0.0) -> None:
        self.pos = pos
        self.terminal = pos.game_over or pos.moves >= max_moves
        self.moves: np.ndarray | None = None  # candidate moves once expanded (PASS always among them)
        self.children: dict[int, Node] = {}
        self.value = 0.0  # the network's value for the player to move here
        self.pending = False  # queued for evaluation in this round
        self.N = 0
        self.W = first_play
        self.final: float | None = None  # a terminal node's value, scored once

    def expand(self, priors: np.ndarray, value: float, cfg: SearchConfig) -> None:
        points = playout_moves(self.pos, fill_own_eyes=cfg.fill_own_eyes)
        moves = np.append(points, PASS)
        size = self.pos.size
        actions = np.where(moves == PASS, size * size, moves)
        p = priors[actions].astype(np.float64) + 1e-8
        self.moves, self.prior = moves, p / p.sum()
        self.index = {int(m): i for i, m in enumerate(moves)}
        self.value = value
        self.fpu = min(1.0, max(-1.0, value - cfg.value_init_penalty))
        self.n = np.zeros(len(moves))
        self.w = np.full(len(moves), self.fpu)

    def terminal_value(self) -> float:
        """+1 or -1 for the player to move, by the reference's score (pass-alive areas counted)."""
        if self.final is None:
            black_wins = passalive.score(self.pos) > 0
            self.final = 1.0 if black_wins == (self.pos.to_play == BLACK) else -1.0
        return self.final

    def action_scores(self) -> np.ndarray:
        """``Q + U`` of every move: ``U = U_scale sqrt(max(1, N - 1)) P / (1 + n)``, N the node's visits."""
        u_scale = 2.0 * (math.log((1.0 + self.N + UCT_BASE) / UCT_BASE) + UCT_INIT)
        return self.w / (1 + self.n) + u_scale * math.sqrt(max(1.0, self.N - 1.0)) * self.prior / (1 + self.n)

    def child(self, i: int, max_moves: int) -> Node:
        node = self.children.get(i)
        if node is None:
            pos = self.pos.copy()
            pos.play(int(self.moves[i]))
            node = self.children[i] = Node(pos, max_moves, -self.fpu)
        return node

    def advance(self, move: int, max_moves: int) -> Node:
        """The root after ``move`` (tree reuse, ``MctsTree::PlayMove``): its subtree when the search has one,
        else a fresh node; the rest of this tree is dropped."""
        if self.moves is not None and move in self.index:
            node = self.child(self.index[move], max_moves)
        else:
            pos = self.pos.copy()
            pos.play(move)
            node = Node(pos, max_moves)
        self.children = {}
        return node

    def q(self) -> float:
        """The node's value for its player to move, ``W / (1 + N)`` (``MctsNode::Q_perspective``)."""
        return float(self.W / (1 + self.N))


def _backup(leaf: Node, path: list[tuple[Node, int]], value: float, virtual: bool) -> None:
    """``value`` is for the leaf's player to move; a virtual loss (on ``w`` only) is taken back first."""
    leaf.N += 1
    leaf.W += value
    for node, i in reversed(path):
        value = -value
        if virtual:
            node.w[i] += 1.0
        node.n[i] += 1
        node.w[i] += value
        node.N += 1
        node.W += value


def search(
    roots: Sequence[Node],
    readouts: Sequence[int],
    evaluate: Evaluator,
    cfg: SearchConfig,
    rng: np.random.Generator,
    noise: Sequence[bool],
) -> None:
    """Add ``readouts[g]`` readouts to every root's tree (all games' leaves batched per round). A root that
    a previous move's search grew keeps its visits (``target_readouts = N + readouts``); a fresh root's
    own evaluation is its first readout."""
    targets = [r.N + k for r, k in zip(roots, readouts, strict=True)]
    fresh = [r for r in roots if r.moves is None and not r.terminal]
    if fresh:
        priors, values = evaluate([r.pos for r in fresh], rng.integers(0, 8, len(fresh)))
        for r, p, v in zip(fresh, priors, values, strict=True):
            r.expand(p, float(v), cfg)
            _backup(r, [], float(v), virtual=False)
    for r, add_noise in zip(roots, noise, strict=True):
        if add_noise and r.moves is not None and len(r.moves) > 1:
            r.prior = (1 - cfg.noise_mix) * r.prior + cfg.noise_mix * rng.dirichlet(
                [cfg.dirichlet_alpha] * len(r.moves)
            )
    max_moves = cfg.max_game_moves
    while True:
        leaves: list[Node] = []
        paths: list[list[tuple[Node, int]]] = []
        for root, target in zip(roots, targets, strict=True):
            if root.terminal or root.moves is None:
                continue
            for _ in range(cfg.virtual_losses):
                if root.N >= target:
                    break
                node, path = root, []
                while node.moves is not None and not node.terminal and not node.pending:
                    i = int(np.argmax(node.action_scores()))
                    path.append((node, i))
                    node = node.child(i, max_moves)
                if node.terminal:
                    _backup(node, path, node.terminal_value(), virtual=False)
                    continue
                if node.pending:  # a leaf already queued this round: the round ends for this game
                    break
                for n, i in path:  # virtual loss (AddVirtualLoss): a lost value on w, not a visit
                    n.w[i] -= 1.0
                node.pending = True
                leaves.append(node)
                paths.append(path)
        if not leaves:
            return
        priors, values = evaluate([n.pos for n in leaves], rng.integers(0, 8, len(leaves)))
        for node, path, p, v in zip(leaves, paths, priors, values, strict=True):
            node.pending = False
            node.expand(p, float(v), cfg)
            _backup(node, path, float(v), virtual=True)


def most_visited(root: Node, allowed: np.ndarray | None = None) -> int:
    """The most visited of the ``allowed`` moves (all when None), ties to the higher action score
    ``Q + U_scale sqrt(1 + N) P / (1 + n)`` (``MctsNode::GetMostVisitedMove``; the first of equal scores)."""
    n = root.n if allowed is None else np.where(allowed, root.n, -1.0)
    tied = np.flatnonzero(n == n.max())
    if len(tied) == 1:
        return int(tied[0])
    u_scale = 2.0 * (math.log((1.0 + root.N + UCT_BASE) / UCT_BASE) + UCT_INIT)
    scores = root.w[tied] / (1 + root.n[tied]) + u_scale * math.sqrt(1.0 + root.N) * root.prior[tied] / (
        1 + root.n[tied]
    )
    return int(tied[int(np.argmax(scores))])


def prune_visits(root: Node, restrict_pass_alive: bool = False) -> np.ndarray:
    """``ReshapeFinalVisits``: each move's visits cut to the fewest that keep its action score below the
    best move's (the best move keeps all of its visits). With ``restrict_pass_alive`` the points in pass-alive
    areas lose all theirs, and when no visit is left pass gets one."""
    n = root.n.copy()
    best = most_visited(root)
    u_scale = 2.0 * (math.log((1.0 + root.N + UCT_BASE) / UCT_BASE) + UCT_INIT)
    u_common = u_scale * math.sqrt(1.0 + root.N)
    q = root.w / (1 + n)
    best_score = q[best] + u_common * root.prior[best] / (1 + n[best])
    gap = best_score - q
    with np.errstate(divide="ignore", invalid="ignore"):
        needed = np.where(gap > 0, np.floor(u_scale * root.prior * math.sqrt(root.N) / gap), 0.0)
    out = np.clip(np.minimum(n, needed), 0, None)
    out[best] = n[best]
    if restrict_pass_alive:
        out[~passalive.outside_pass_alive(root)] = 0.0
        if not out.any():
            out[root.index[PASS]] = 1.0
    return out


def search_policy(root: Node, visits: np.ndarray, cfg: SearchConfig | None = None) -> np.ndarray:
    """The training target (``CalculateSearchPi``): the visits, raised to ``policy_softmax_temp`` before
    the soft-pick cutoff (as the soft pick squashes them), normalized."""
    size = root.pos.size
    if cfg is not None and root.pos.moves < cfg.soft_pick_cutoff:
        visits = visits**cfg.policy_softmax_temp
    pi = np.zeros(size * size + 1, dtype=np.float32)
    actions = np.where(root.moves == PASS, size * size, root.moves)
    pi[actions] = visits / max(visits.sum(), 1)
    return pi


def pick(root: Node, cfg: SearchConfig, rng: np.random.Generator | None, restrict_pass_alive: bool = False) -> int:
    """Soft pick (visits^0.98, points only) before the cutoff in self-play, else the most visited move, outside
    pass-alive areas when ``restrict_pass_alive`` (``MctsTree::PickMove``; the soft pick is never restricted)."""
    if rng is not None and root.pos.moves < cfg.soft_pick_cutoff:
        weights = np.where(root.moves == PASS, 0.0, root.n**cfg.policy_softmax_temp)
        if weights.sum() > 0:
            return int(rng.choice(len(weights), p=weights / weights.sum()))
        return int(np.flatnonzero(root.moves == PASS)[0])
    return most_visited(root, passalive.outside_pass_alive(root) if restrict_pass_alive else None)


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
    """``games`` games of the network against itself, advancing together (one batch per search round).

    As ``cc/concurrent_selfplay.cc``: a game's first move is a full move; after each move the next is a
    fast one with probability ``fastplay_frequency``. The chosen move's subtree is the next root (tree
    reuse), except before a full move when fast moves are on, whose search starts from a fresh root
    (``ClearSubtrees``). Each game counts each colour's consecutive passes (latched at
    ``restrict_pass_alive_play_threshold``) to restrict the other's moves (``MaybePlayMove``)."""
    rng = np.random.default_rng(seed)
    thresholds = rng.uniform(cfg.min_resign_threshold, cfg.max_resign_threshold, games)
    resign_on = rng.random(games) >= cfg.disable_resign_pct
    max_moves = cfg.max_game_moves
    roots = [Node(HistoryPosition(size, komi, superko=cfg.superko), max_moves) for _ in range(games)]
    full = [True] * games
    records: list[list[tuple[Position, np.ndarray]]] = [[] for _ in range(games)]
    winner: list[int | None] = [None] * games  # set on resignation
    passes = [{BLACK: 0, WHITE: 0} for _ in range(games)]
    active = [g for g in range(games)]
    moves = 0
    while active:
        readouts = [cfg.num_readouts if full[g] else cfg.fastplay_readouts for g in active]
        search([roots[g] for g in active], readouts, evaluate, cfg, rng, noise=[full[g] for g in active])
        still = []
        for g in active:
            root = roots[g]
            if resign_on[g] and root.q() < thresholds[g]:
                winner[g] = WHITE if root.pos.to_play == BLACK else BLACK
                continue
            me, threshold = root.pos.to_play, cfg.restrict_pass_alive_play_threshold
            restrict = passes[g][WHITE if me == BLACK else BLACK] >= threshold
            i = pick(root, cfg, rng, restrict)
            if full[g]:
                visits = prune_visits(root, restrict) if cfg.target_pruning else root.n
                records[g].append((root.pos, search_policy(root, visits, cfg)))
                if i in root.children:  # the pruned visits stay on the reused edge, as in the reference
                    root.children[i].N = int(visits[i])
            move = int(root.moves[i])
            if passes[g][me] < threshold:  # latched once it reaches the threshold
                passes[g][me] = passes[g][me] + 1 if move == PASS else 0
            roots[g] = root.advance(move, max_moves)
            if passalive.whole_board_ends(roots[g]):
                roots[g] = passalive.pass_out(roots[g], max_moves)
            moves += roots[g].pos.moves - root.pos.moves
            if roots[g].terminal:
                continue
            full[g] = not (cfg.fastplay_frequency > 0 and rng.random() < cfg.fastplay_frequency)
            if full[g] and cfg.fastplay_frequency > 0:
                roots[g] = Node(roots[g].pos, max_moves)  # ClearSubtrees before a full move
            still.append(g)
        active = still
    positions = [r.pos for r in roots]
    feats, pols, outs, black_wins = [], [], [], 0
    for g in range(games):
        black_won = winner[g] == BLACK if winner[g] is not None else passalive.score(positions[g]) > 0
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
    fresh tree with ``readouts`` readouts, no noise, no soft pick, no resignation (``eval.flags``), never
    into a pass-alive area (``MctsPlayer::SuggestMove``); a game whose whole board is pass-alive ends by
    passes before the next move. The games differ through the random inference symmetries."""
    rng = np.random.default_rng(seed)
    our_color = [BLACK if g % 2 == 0 else WHITE for g in range(games)]
    max_moves = cfg.max_game_moves
    trees = {  # each side keeps its own tree through the game (MctsPlayer::PlayMove / PlayOpponentsMove)
        side: [Node(HistoryPosition(size, komi, superko=cfg.superko), max_moves) for _ in range(games)]
        for side in (True, False)
    }
    active = list(range(games))
    while active:
        for side, evaluate in ((True, ours), (False, theirs)):
            turn = [
                g
                for g in active
                if not trees[side][g].terminal and (trees[side][g].pos.to_play == our_color[g]) == side
            ]
            for g in [g for g in turn if passalive.whole_board_ends(trees[side][g])]:
                trees[True][g], trees[False][g] = (
                    passalive.pass_out(trees[True][g], max_moves),
                    passalive.pass_out(trees[False][g], max_moves),
                )
            turn = [g for g in turn if not trees[side][g].terminal]
            if not turn:
                continue
            roots = [trees[side][g] for g in turn]
            search(roots, [readouts] * len(turn), evaluate, cfg, rng, noise=[False] * len(turn))
            for g, root in zip(turn, roots, strict=True):
                move = int(root.moves[pick(root, cfg, None, restrict_pass_alive=True)])
                trees[side][g] = root.advance(move, max_moves)
                trees[not side][g] = trees[not side][g].advance(move, max_moves)
        active = [g for g in active if not trees[True][g].terminal]
    positions = [trees[True][g].pos for g in range(games)]
    result = MatchResult(games=games)
    for g in range(games):
        we_won = (passalive.score(positions[g]) > 0) == (our_color[g] == BLACK)
        result.wins += we_won
        result.black_games += our_color[g] == BLACK
        result.black_wins += we_won and our_color[g] == BLACK
    return result
