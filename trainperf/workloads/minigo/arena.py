"""Evaluation: our network with tree search against a fixed external GTP opponent (GNU Go).

Every game starts from a fixed opening of a few random moves; the openings are distinct up to the 8 board
symmetries, and each is played once with each colour (game 2k: we are Black after opening k, game 2k+1:
we are White). GNU Go at level 0 and a noise-free search are deterministic, so two games from the same
opening with the same colours would be the same game: distinct openings make distinct games.

All games advance together: our moves come from one batched search over every game where it is our turn,
and the opponent's moves are requested from all its processes at once (they think in parallel) before any
answer is read. The opponent moves with ``kgs-genmove_cleanup``, GNU Go's mode that captures dead stones
before passing, and our player passes only when it has no move outside its own eyes, so the final
positions hold no dead stones and the Tromp-Taylor score is exact; every game is cross-checked against GNU
Go's own ``final_score``.
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
    black_wins: int = 0  # our wins in the games where we are Black
    black_games: int = 0
    scores: list[float] = field(default_factory=list)  # Black-minus-White Tromp-Taylor, per game

    @property
    def win_rate(self) -> float:
        return self.wins / self.games if self.games else float("nan")

    @property
    def white_wins(self) -> int:
        return self.wins - self.black_wins

    @property
    def white_games(self) -> int:
        return self.games - self.black_games

    def __add__(self, other: ArenaResult) -> ArenaResult:
        """Two matches' games together (a match played in several parts)."""
        return ArenaResult(
            wins=self.wins + other.wins,
            games=self.games + other.games,
            disagreements=self.disagreements + other.disagreements,
            black_wins=self.black_wins + other.black_wins,
            black_games=self.black_games + other.black_games,
            scores=[*self.scores, *other.scores],
        )


def parse_final_score(text: str) -> float:
    """GNU Go's ``B+3.5`` / ``W+0.5`` / ``0`` as Black-minus-White."""
    t = text.strip().upper()
    if t == "0":
        return 0.0
    if len(t) > 2 and t[0] in "BW" and t[1] == "+":
        return float(t[2:]) * (1 if t[0] == "B" else -1)
    raise OpponentError(f"GTP opponent answered final_score with {text!r}, which is not a score")


OPENINGS_SEED = 1000  # the one fixed sequence of evaluation openings (every network meets the same games)


def symmetric_point(p: int, k: int, size: int) -> int:
    """Point ``p`` under board symmetry ``k`` (0-3: quarter turns, 4-7: the same then a mirror); PASS stays."""
    if p < 0:
        return p
    r, c = divmod(p, size)
    for _ in range(k % 4):
        r, c = c, size - 1 - r
    if k >= 4:
        c = size - 1 - c
    return r * size + c


def canonical_opening(moves: list[int], size: int) -> tuple[int, ...]:
    """The smallest image of a move sequence under the 8 board symmetries: equal for symmetric openings."""
    return min(tuple(symmetric_point(p, k, size) for p in moves) for k in range(8))


def openings(count: int, size: int, komi: float, moves: int) -> list[tuple[Position, list[int]]]:
    """The first ``count`` evaluation openings: ``moves`` random moves each, no two equal up to symmetry.

    Drawn from one fixed generator, so the list is a prefix of every longer list (a screen's openings
    come first, a confirmation's follow). Raises ValueError when the board has fewer distinct openings.
    """
    rng = np.random.default_rng(OPENINGS_SEED)
    out: list[tuple[Position, list[int]]] = []
    seen: set[tuple[int, ...]] = set()
    misses = 0
    while len(out) < count:
        pos, played = Position(size, komi), []
        for _ in range(moves):
            played.append(int(rng.choice(playout_moves(pos))))
            pos.play(played[-1])
        key = canonical_opening(played, size)
        if key in seen:
            misses += 1
            if misses > 100 * count + 1000:
                raise ValueError(f"fewer than {count} distinct {moves}-move openings on {size}x{size}")
            continue
        seen.add(key)
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
    opening_moves: int = 3,
    first_opening: int = 0,
) -> ArenaResult:
    """Play ``games`` games (an even number) against the opponent from openings ``first_opening``,
    ``first_opening + 1``, ..., each once with each colour; a win is decided by our Tromp-Taylor score."""
    if games % 2:
        raise ValueError(f"a match plays each opening with both colours: an even number of games, not {games}")
    max_moves = cfg.max_moves or 3 * size * size
    ours = [BLACK if g % 2 == 0 else WHITE for g in range(games)]
    clients: list[GTPClient] = []
    try:
        for g in range(games):
            cmd = gnugo_command(
                binary=opponent.binary, size=size, level=opponent.level, seed=opponent.seed + g, komi=komi
            )
            clients.append(GTPClient(cmd, timeout=opponent.timeout))
        distinct = openings(first_opening + games // 2, size, komi, opening_moves)[first_opening:]
        starts = [distinct[g // 2] for g in range(games)]
        for c, start in zip(clients, starts, strict=True):  # the command line set these; say them again
            c.call(f"boardsize {size}")
            c.call("clear_board")
            c.call(f"komi {komi}")
            replay = Position(size, komi)
            for p in start[1]:
                c.call(f"play {COLOR[replay.to_play]} {replay.gtp(p)}")
                replay.play(p)
        roots = [Node(pos.copy(), max_moves) for pos, _ in starts]
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
            result.black_games += ours[g] == BLACK
            result.black_wins += we_won and ours[g] == BLACK
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
    roots = [Node(Position(size, komi), max_moves) for _ in range(games)]
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
        we_won = (score > 0) == (our_color[g] == BLACK)
        result.wins += we_won
        result.black_games += our_color[g] == BLACK
        result.black_wins += we_won and our_color[g] == BLACK
        result.scores.append(score)
    return result
