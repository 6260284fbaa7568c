"""A small Go engine: legal moves, captures, suicide, simple ko, passes and Tromp-Taylor area scoring.

Written for tree search on small boards, so the hot operations (copy, play, the legal-move mask) work on a
flat Python list with precomputed neighbour tables: per-point list indexing is several times faster than
numpy element access, and numpy is used where whole-board work pays (features, scoring).

Rules (the ones GNU Go's GTP ``play`` enforces with ``--chinese-rules``): a stone without liberties after
its own captures is suicide and illegal; **simple ko** (retaking a single stone that just captured a single
stone) is illegal; positional superko is *not* checked (documented choice: GNU Go's ``play`` does not
enforce it either, and long cycles are vanishingly rare in these short games). Two consecutive passes end
the game; the score is Tromp-Taylor area: stones plus empty regions that reach only one colour, minus komi
for Black.
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
            _GEOMETRIES[size] = cls(size, tuple(nb), tuple(dg))
        return _GEOMETRIES[size]


_GEOMETRIES: dict[int, Geometry] = {}


def opponent(color: int) -> int:
    return 3 - color


class Position:
    """A Go position: stones, the player to move, the ko point, consecutive passes and move count."""

    __slots__ = ("geo", "size", "stones", "to_play", "ko", "passes", "moves", "komi")

    def __init__(self, size: int, komi: float = 7.5) -> None:
        self.geo = Geometry.of(size)
        self.size = size
        self.stones = [EMPTY] * (size * size)
        self.to_play = BLACK
        self.ko = PASS  # the point the player to move may not take back (PASS: none)
        self.passes = 0
        self.moves = 0
        self.komi = komi

    def copy(self) -> Position:
        p = Position.__new__(Position)
        p.geo, p.size, p.stones, p.to_play = self.geo, self.size, self.stones[:], self.to_play
        p.ko, p.passes, p.moves, p.komi = self.ko, self.passes, self.moves, self.komi
        return p

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
        return self._not_suicide(p, None)

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


def from_diagram(diagram: str, *, to_play: int = BLACK, komi: float = 7.5) -> Position:
    """A position from rows of ``X`` (black), ``O`` (white) and ``.`` (empty), top row first."""
    rows = [r.strip().replace(" ", "") for r in diagram.strip().splitlines() if r.strip()]
    pos = Position(len(rows), komi)
    for r, row in enumerate(rows):
        if len(row) != len(rows):
            raise ValueError("the diagram must be square")
        for c, ch in enumerate(row):
            pos.stones[r * pos.size + c] = {".": EMPTY, "X": BLACK, "O": WHITE}[ch]
    pos.to_play = to_play
    return pos


def playout_moves(pos: Position) -> np.ndarray:
    """The moves a player considers: legal and not filling its own one-point eye (empty: it must pass)."""
    return np.flatnonzero(pos.legal_mask(allow_eye_fill=False))
