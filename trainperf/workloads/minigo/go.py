"""A small Go engine: legal moves, captures, suicide, ko, passes and Tromp-Taylor area scoring.

Written for tree search on small boards, so the hot operations (copy, play, the legal-move mask) work on a
flat Python list with precomputed neighbour tables: per-point list indexing is several times faster than
numpy element access, and numpy is used where whole-board work pays (features, scoring).

Rules: a stone without liberties after its own captures is suicide and illegal; **simple ko** (retaking a
single stone that just captured a single stone) is illegal. **Positional superko** is checked when a
position is made with ``superko=True``: a move may not recreate the stones of any earlier position of the
game (whoever is to move), as the v2.0 reference's C++ engine does (``cc/position.cc`` ``UpdateLegalMoves``
against the game's Zobrist hashes). Without it (the mini scale) only simple ko is enforced, the rules GNU
Go's GTP ``play`` enforces with ``--chinese-rules``. Two consecutive passes end the game; the score is
Tromp-Taylor area: stones plus empty regions that reach only one colour, minus komi for Black.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EMPTY, BLACK, WHITE = 0, 1, 2
PASS = -1  # a move is a point index 0..N*N-1 or PASS
GTP_COLUMNS = "ABCDEFGHJKLMNOPQRST"  # GTP skips the letter I


class IllegalMove(ValueError):
    """A move the rules forbid (occupied point, suicide, ko)."""


@dataclass(frozen=True)
class Geometry:
    """Neighbour tables of one board size, shared by every position of that size."""

    size: int
    neighbors: tuple[tuple[int, ...], ...]
    diagonals: tuple[tuple[int, ...], ...]
    zobrist: tuple[tuple[int, int, int], ...]  # per point: a random 64-bit key for (empty: 0, black, white)

    @classmethod
    def of(cls, size: int) -> Geometry:
        if size not in _GEOMETRIES:
            nb, dg = [], []
            for p in range(size * size):
                r, c = divmod(p, size)
                nb.append(
                    tuple(
                        rr * size + cc
                        for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1))
                        if 0 <= rr < size and 0 <= cc < size
                    )
                )
                dg.append(
                    tuple(
                        rr * size + cc
                        for rr, cc in ((r - 1, c - 1), (r - 1, c + 1), (r + 1, c - 1), (r + 1, c + 1))
                        if 0 <= rr < size and 0 <= cc < size
                    )
                )
            keys = np.random.default_rng(ZOBRIST_SEED + size).integers(1, 2**63, (size * size, 2), dtype=np.int64)
            zobrist = tuple((0, int(b), int(w)) for b, w in keys)
            _GEOMETRIES[size] = cls(size, tuple(nb), tuple(dg), zobrist)
        return _GEOMETRIES[size]


_GEOMETRIES: dict[int, Geometry] = {}
ZOBRIST_SEED = 20220428  # fixed keys: a position's hash is the same in every process


def opponent(color: int) -> int:
    return 3 - color


class Position:
    """A Go position: stones, the player to move, the ko point, consecutive passes and move count.

    With ``superko=True`` it also keeps the Zobrist hash of its stones (``zhash``) and the hashes of every
    position of the game so far, itself included (``seen``, a frozenset shared between copies: a move
    makes a new one), and refuses a move that recreates one of them."""

    __slots__ = ("geo", "size", "stones", "to_play", "ko", "passes", "moves", "komi", "zhash", "seen")

    def __init__(self, size: int, komi: float = 7.5, *, superko: bool = False) -> None:
        self.geo = Geometry.of(size)
        self.size = size
        self.stones = [EMPTY] * (size * size)
        self.to_play = BLACK
        self.ko = PASS  # the point the player to move may not take back (PASS: none)
        self.passes = 0
        self.moves = 0
        self.komi = komi
        self.zhash = 0  # the empty board's hash
        self.seen: frozenset[int] | None = frozenset((0,)) if superko else None

    def _copy_into(self, p: Position) -> Position:
        p.geo, p.size, p.stones, p.to_play = self.geo, self.size, self.stones[:], self.to_play
        p.ko, p.passes, p.moves, p.komi = self.ko, self.passes, self.moves, self.komi
        p.zhash, p.seen = self.zhash, self.seen
        return p

    def copy(self) -> Position:
        return self._copy_into(Position.__new__(Position))

    @property
    def superko(self) -> bool:
        return self.seen is not None

    def stone_hash(self) -> int:
        """The Zobrist hash of the stones alone (not the player to move): positional superko's key."""
        z = self.geo.zobrist
        h = 0
        for p, s in enumerate(self.stones):
            if s != EMPTY:
                h ^= z[p][s]
        return h

    def _repeats(self, p: int, libs: list[int] | None = None) -> bool:
        """Whether playing ``p`` (legal but for superko) recreates an earlier position of the game; ``libs``
        (the liberty table, when known) spares the flood fill of groups that keep a liberty."""
        if self.seen is None:
            return False
        z, me, them, stones = self.geo.zobrist, self.to_play, opponent(self.to_play), self.stones
        h = self.zhash ^ z[p][me]
        around = [n for n in self.geo.neighbors[p] if stones[n] == them and (libs is None or libs[n] == 1)]
        if around:
            stones[p] = me  # try it: remove the opponent groups it captures from the hash
            try:
                done: set[int] = set()
                for n in around:
                    if n not in done:
                        members, group_libs = self.group(n)
                        done.update(members)
                        if not group_libs:
                            for q in members:
                                h ^= z[q][them]
            finally:
                stones[p] = EMPTY
        return h in self.seen

    @property
    def game_over(self) -> bool:
        return self.passes >= 2

    # --- groups -------------------------------------------------------------------------------------
    def group(self, p: int) -> tuple[list[int], set[int]]:
        """The stones of the group at ``p`` and its liberties (flood fill)."""
        color, stones, nb = self.stones[p], self.stones, self.geo.neighbors
        seen, stack, libs = {p}, [p], set()
        while stack:
            q = stack.pop()
            for n in nb[q]:
                s = stones[n]
                if s == EMPTY:
                    libs.add(n)
                elif s == color and n not in seen:
                    seen.add(n)
                    stack.append(n)
        return list(seen), libs

    def _liberty_table(self) -> list[int]:
        """Per point: the liberty count of the group standing there (0 on empty points); one flood fill per
        group (the search's hottest rules code: written with plain lists, like ``legal_mask``)."""
        stones, nb = self.stones, self.geo.neighbors
        libs = [0] * len(stones)
        done = [False] * len(stones)
        for p, color in enumerate(stones):
            if color == EMPTY or done[p]:
                continue
            done[p] = True
            members, lib, k = [p], set(), 0
            while k < len(members):
                for n in nb[members[k]]:
                    s = stones[n]
                    if s == EMPTY:
                        lib.add(n)
                    elif s == color and not done[n]:
                        done[n] = True
                        members.append(n)
                k += 1
            count = len(lib)
            for q in members:
                libs[q] = count
        return libs

    # --- legality -----------------------------------------------------------------------------------
    def is_legal(self, p: int) -> bool:
        if p == PASS:
            return True
        if self.stones[p] != EMPTY or p == self.ko:
            return False
        return self._not_suicide(p, None) and not self._repeats(p)

    def _not_suicide(self, p: int, libs: list[int] | None) -> bool:
        stones, me = self.stones, self.to_play
        for n in self.geo.neighbors[p]:
            s = stones[n]
            if s == EMPTY:
                return True
            n_libs = libs[n] if libs is not None else len(self.group(n)[1])
            if (s == me and n_libs > 1) or (s != me and n_libs == 1):
                return True  # joins a group that keeps a liberty, or captures
        return False

    def is_eye(self, p: int, color: int) -> bool:
        """A one-point eye of ``color``: filling it can only hurt (the usual playout rule)."""
        stones = self.stones
        if stones[p] != EMPTY or any(stones[n] != color for n in self.geo.neighbors[p]):
            return False
        diag = self.geo.diagonals[p]
        bad = sum(stones[d] == opponent(color) for d in diag)
        return bad == 0 if len(diag) < 4 else bad <= 1

    def legal_mask(self, *, allow_eye_fill: bool = True) -> np.ndarray:
        """Boolean mask over the N*N points of legal moves for the player to move (pass not included).

        The same tests as ``is_legal`` and ``is_eye``, inlined: the search calls this once per new node."""
        libs = self._liberty_table()
        stones, me, ko = self.stones, self.to_play, self.ko
        nb, diagonals, them = self.geo.neighbors, self.geo.diagonals, opponent(self.to_play)
        mask = [False] * len(stones)
        for p, s in enumerate(stones):
            if s != EMPTY or p == ko:
                continue
            around = nb[p]
            if not allow_eye_fill and all(stones[n] == me for n in around):
                diag = diagonals[p]
                bad = sum(stones[d] == them for d in diag)
                if (bad == 0) if len(diag) < 4 else (bad <= 1):
                    continue  # its own one-point eye
            for n in around:
                t = stones[n]
                if t == EMPTY or (libs[n] > 1 if t == me else libs[n] == 1):
                    mask[p] = True  # a liberty, a friendly group that keeps one, or a capture
                    break
        if self.seen is not None:
            for p in range(len(mask)):
                if mask[p] and self._repeats(p, libs):
                    mask[p] = False  # positional superko
        return np.array(mask, dtype=bool)

    # --- playing ------------------------------------------------------------------------------------
    def play(self, p: int) -> None:
        """Play ``p`` (a point index or PASS) for the player to move; raise IllegalMove if forbidden."""
        me = self.to_play
        self.moves += 1
        if p == PASS:
            self.passes += 1
            self.ko = PASS
            self.to_play = opponent(me)
            return
        stones = self.stones
        if stones[p] != EMPTY:
            raise IllegalMove(f"point {self.gtp(p)} is occupied")
        if p == self.ko:
            raise IllegalMove(f"{self.gtp(p)} retakes a ko")
        if self._repeats(p):
            raise IllegalMove(f"{self.gtp(p)} repeats an earlier position (positional superko)")
        stones[p] = me
        captured: list[int] = []
        for n in self.geo.neighbors[p]:
            if stones[n] == opponent(me):
                members, libs = self.group(n)
                if not libs:
                    for q in members:
                        stones[q] = EMPTY
                    captured.extend(members)
        members, libs = self.group(p)
        if not libs:
            stones[p] = EMPTY
            raise IllegalMove(f"{self.gtp(p)} is suicide")
        # Simple ko: a lone stone that captured exactly one stone and sits in atari may not be retaken at once.
        self.ko = captured[0] if len(captured) == 1 and len(members) == 1 and len(libs) == 1 else PASS
        self.passes = 0
        self.to_play = opponent(me)
        if self.seen is not None:
            z, h = self.geo.zobrist, self.zhash ^ self.geo.zobrist[p][me]
            for q in captured:
                h ^= z[q][opponent(me)]
            self.zhash = h
            self.seen = self.seen | {h}

    # --- scoring ------------------------------------------------------------------------------------
    def area(self) -> tuple[int, int]:
        """Tromp-Taylor area (black, white): stones plus empty regions reaching only that colour."""
        stones, nb = self.stones, self.geo.neighbors
        black = stones.count(BLACK)
        white = stones.count(WHITE)
        seen = [False] * len(stones)
        for p, s in enumerate(stones):
            if s != EMPTY or seen[p]:
                continue
            region, stack, border = 0, [p], set()
            seen[p] = True
            while stack:
                q = stack.pop()
                region += 1
                for n in nb[q]:
                    t = stones[n]
                    if t == EMPTY:
                        if not seen[n]:
                            seen[n] = True
                            stack.append(n)
                    else:
                        border.add(t)
            if border == {BLACK}:
                black += region
            elif border == {WHITE}:
                white += region
        return black, white

    def score(self) -> float:
        """Black's Tromp-Taylor area minus White's, minus komi (positive: Black wins)."""
        b, w = self.area()
        return b - w - self.komi

    # --- views --------------------------------------------------------------------------------------
    def array(self) -> np.ndarray:
        return np.asarray(self.stones, dtype=np.int8).reshape(self.size, self.size)

    def gtp(self, p: int) -> str:
        if p == PASS:
            return "pass"
        r, c = divmod(p, self.size)
        return f"{GTP_COLUMNS[c]}{self.size - r}"  # row 0 is the top row, GTP row N

    def from_gtp(self, text: str) -> int:
        t = text.strip().upper()
        if t == "PASS":
            return PASS
        if len(t) < 2 or t[0] not in GTP_COLUMNS[: self.size] or not t[1:].isdigit():
            raise ValueError(f"not a GTP vertex on a {self.size}x{self.size} board: {text!r}")
        c, row = GTP_COLUMNS.index(t[0]), int(t[1:])
        if not 1 <= row <= self.size:
            raise ValueError(f"not a GTP vertex on a {self.size}x{self.size} board: {text!r}")
        return (self.size - row) * self.size + c

    def __str__(self) -> str:
        chars = {EMPTY: ".", BLACK: "X", WHITE: "O"}
        rows = ["".join(chars[s] for s in self.stones[r * self.size : (r + 1) * self.size]) for r in range(self.size)]
        return "\n".join(rows)


def from_diagram(diagram: str, *, to_play: int = BLACK, komi: float = 7.5, superko: bool = False) -> Position:
    """A position from rows of ``X`` (black), ``O`` (white) and ``.`` (empty), top row first (with
    ``superko``: a game whose only earlier position is this one)."""
    rows = [r.strip().replace(" ", "") for r in diagram.strip().splitlines() if r.strip()]
    pos = Position(len(rows), komi)
    for r, row in enumerate(rows):
        if len(row) != len(rows):
            raise ValueError("the diagram must be square")
        for c, ch in enumerate(row):
            pos.stones[r * pos.size + c] = {".": EMPTY, "X": BLACK, "O": WHITE}[ch]
    pos.to_play = to_play
    if superko:
        pos.zhash = pos.stone_hash()
        pos.seen = frozenset((pos.zhash,))
    return pos


def playout_moves(pos: Position, *, fill_own_eyes: bool = False) -> np.ndarray:
    """The points a player considers: the legal ones, without those filling its own one-point eye unless
    ``fill_own_eyes`` (the v2.0 reference has no eye rule: every legal point). Empty: it must pass."""
    return np.flatnonzero(pos.legal_mask(allow_eye_fill=fill_own_eyes))
