"""Evaluation: our network with tree search against a fixed external GTP opponent (GNU Go).

Games alternate colours (even games: we are Black). All games advance together: our moves come from one
batched search over every game where it is our turn, and the opponent's moves are requested from all its
processes at once (they think in parallel) before any answer is read. The opponent moves with
``kgs-genmove_cleanup``, GNU Go's mode that captures dead stones before passing, and our player passes only
when it has no move outside its own eyes, so the final positions hold no dead stones and the Tromp-Taylor
score is exact; every game is cross-checked against GNU Go's own ``final_score``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from trainperf.workloads.minigo.go import BLACK, WHITE, Position, playout_moves
from trainperf.workloads.minigo.gtp import GNUGO, GTPClient, OpponentError, gnugo_command
from trainperf.workloads.minigo.mcts import Evaluator, Node, SearchConfig, choose, search

COLOR = {BLACK: "black", WHITE: "white"}


@dataclass(frozen=True, kw_only=True)
class Opponent:
    binary: str = GNUGO
    level: int = 0
    seed: int = 0  # game g uses seed + g: distinct, reproducible opponent games
    timeout: float = 20.0


@dataclass
class ArenaResult:
    wins: int = 0
    games: int = 0
    disagreements: int = 0  # games where GNU Go's final_score names the other winner
    scores: list[float] = field(default_factory=list)  # Black-minus-White Tromp-Taylor, per game

    @property
    def win_rate(self) -> float:
        return self.wins / self.games if self.games else float("nan")


def parse_final_score(text: str) -> float:
    """GNU Go's ``B+3.5`` / ``W+0.5`` / ``0`` as Black-minus-White."""
    t = text.strip().upper()
    if t == "0":
        return 0.0
    if len(t) > 2 and t[0] in "BW" and t[1] == "+":
        return float(t[2:]) * (1 if t[0] == "B" else -1)
    raise OpponentError(f"GTP opponent answered final_score with {text!r}, which is not a score")


def openings(games: int, size: int, komi: float, moves: int) -> list[tuple[Position, list[int]]]:
    """Fixed starting positions: ``moves`` random moves, the same for games 2k and 2k+1 (one per colour).

    GNU Go and a noise-free search are both deterministic, so without varied openings every game with the
    same colours would be the same game.
    """
    out = []
    for g in range(games):
        rng = np.random.default_rng(1000 + g // 2)
        pos, played = Position(size, komi), []
        for _ in range(moves):
            played.append(int(rng.choice(playout_moves(pos))))
            pos.play(played[-1])
        out.append((pos, played))
    return out


def check_opponent(opponent: Opponent, size: int, komi: float) -> None:
    """Start the opponent once and ask for a move: a missing or broken binary fails before the clock starts."""
    cmd = gnugo_command(binary=opponent.binary, size=size, level=opponent.level, seed=opponent.seed, komi=komi)
    with GTPClient(cmd, timeout=opponent.timeout) as c:
        c.call("genmove black")


def play_match(
    evaluate: Evaluator,
    *,
    games: int,
    size: int,
    komi: float,
    cfg: SearchConfig,
    opponent: Opponent,
    opening_moves: int = 2,
) -> ArenaResult:
    """Play ``games`` games against the opponent; a win is decided by our Tromp-Taylor score."""
    max_moves = cfg.max_moves or 3 * size * size
    ours = [BLACK if g % 2 == 0 else WHITE for g in range(games)]
    clients: list[GTPClient] = []
    try:
        for g in range(games):
            cmd = gnugo_command(
                binary=opponent.binary, size=size, level=opponent.level, seed=opponent.seed + g, komi=komi
            )
            clients.append(GTPClient(cmd, timeout=opponent.timeout))
        starts = openings(games, size, komi, opening_moves)
        for c, start in zip(clients, starts, strict=True):  # the command line set these; say them again
            c.call(f"boardsize {size}")
            c.call("clear_board")
            c.call(f"komi {komi}")
            replay = Position(size, komi)
            for p in start[1]:
                c.call(f"play {COLOR[replay.to_play]} {replay.gtp(p)}")
                replay.play(p)
        roots = [Node(pos, max_moves) for pos, _ in starts]
        active = list(range(games))
        while active:
            mine = [g for g in active if roots[g].pos.to_play == ours[g]]
            if mine:
                search([roots[g] for g in mine], evaluate, cfg, None)
                for g in mine:
                    root = roots[g]
                    i = choose(root, None, False)
                    move = root.pos.gtp(int(root.moves[i]))
                    roots[g] = root.child(i, max_moves)
                    clients[g].send(f"play {COLOR[ours[g]]} {move}")
                for g in mine:
                    clients[g].receive()
            theirs = [g for g in active if not roots[g].terminal and roots[g].pos.to_play != ours[g]]
            for g in theirs:
                clients[g].send(f"kgs-genmove_cleanup {COLOR[roots[g].pos.to_play]}")
            for g in theirs:
                roots[g] = _advance(roots[g], clients[g].receive(), max_moves, clients[g].binary)
            active = [g for g in active if not roots[g].terminal]
        result = ArenaResult(games=games)
        for g in range(games):
            score = roots[g].pos.score()
            theirs_score = parse_final_score(clients[g].call("final_score"))
            we_won = (score > 0) == (ours[g] == BLACK)
            result.wins += we_won
            result.disagreements += (theirs_score > 0) != (score > 0)
            result.scores.append(score)
        return result
    finally:
        for c in clients:
            c.close()


def _advance(root: Node, vertex: str, max_moves: int, binary: str) -> Node:
    """The node after the opponent's move (the existing subtree when our search had explored it)."""
    try:
        move = root.pos.from_gtp(vertex)
    except ValueError:
        raise OpponentError(f"GTP opponent {binary!r} answered a move with {vertex!r}, which is no vertex") from None
    if root.moves is not None:
        hits = np.flatnonzero(root.moves == move)
        if len(hits):
            return root.child(int(hits[0]), max_moves)
    pos = root.pos.copy()
    pos.play(move)  # an illegal move from the opponent raises IllegalMove: a broken opponent
    return Node(pos, max_moves)


def play_network_match(
    ours: Evaluator, theirs: Evaluator, *, games: int, size: int, komi: float, cfg: SearchConfig
) -> ArenaResult:
    """Our network against another (the reference target model), both with the same search; colours alternate."""
    max_moves = cfg.max_moves or 3 * size * size
    our_color = [BLACK if g % 2 == 0 else WHITE for g in range(games)]
    roots = [Node(p, max_moves) for p, _ in openings(games, size, komi, 0)]
    active = list(range(games))
    while active:
        for side, evaluate in ((True, ours), (False, theirs)):
            turn = [g for g in active if not roots[g].terminal and (roots[g].pos.to_play == our_color[g]) == side]
            if turn:
                fresh = [Node(roots[g].pos, max_moves) for g in turn]  # each side searches its own tree
                search(fresh, evaluate, cfg, None)
                for g, node in zip(turn, fresh, strict=True):
                    roots[g] = node.child(choose(node, None, False), max_moves)
        active = [g for g in active if not roots[g].terminal]
    result = ArenaResult(games=games)
    for g in range(games):
        score = roots[g].pos.score()
        result.wins += (score > 0) == (our_color[g] == BLACK)
        result.scores.append(score)
    return result
