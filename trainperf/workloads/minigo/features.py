"""The reference network's 13 input planes (MLPerf v2.0 ``features.py``, ``MLPERF07_FEATURES``), from our board.

Plane order, as ``--input_features=mlperf07`` concatenates them (channels first, ``--input_layout=nchw``):

- 0-7 ``stone_features_4``: the stones of the player to move (even planes) and of the opponent (odd
  planes) on the current board and the 3 before it, newest first; where a game has fewer boards, the
  oldest is repeated (all relative to the player to move *now*);
- 8 ``color_to_play_feature``: 1 everywhere when Black is to move, else 0;
- 9-11 ``few_liberties_feature``: on every stone of either colour, 1 in plane 9, 10 or 11 when its group
  has 1, 2 or 3 liberties;
- 12 ``would_capture_feature``: 1 on the single liberty of every opponent group in atari (playing there
  captures).

``HistoryPosition`` is our :class:`~trainperf.workloads.minigo.go.Position` that also keeps the 3 boards
before it; the mini scale keeps using the plain position and its own 3 planes (``mcts.features``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from trainperf.workloads.minigo.go import BLACK, EMPTY, Position, opponent

HISTORY = 4  # boards in stone_features_4: the current one and the 3 before it
MLPERF07_PLANES = 2 * HISTORY + 1 + 3 + 1


class HistoryPosition(Position):
    """A position that remembers the boards of the last ``HISTORY - 1`` moves (newest first)."""

    __slots__ = ("history",)

    def __init__(self, size: int, komi: float = 7.5, *, superko: bool = False) -> None:
        super().__init__(size, komi, superko=superko)
        self.history: tuple[list[int], ...] = ()

    def copy(self) -> HistoryPosition:
        p = self._copy_into(HistoryPosition.__new__(HistoryPosition))
        p.history = self.history  # a tuple of boards never changed in place: shared, not copied
        return p

    def play(self, p: int) -> None:
        before = self.stones[:]
        super().play(p)
        self.history = (before, *self.history)[: HISTORY - 1]


def _groups(pos: Position) -> tuple[np.ndarray, np.ndarray]:
    """Per point: the liberty count of its group (0 when empty), and the would-capture mask."""
    stones = pos.stones
    libs = np.zeros(len(stones), dtype=np.int16)
    capture = np.zeros(len(stones), dtype=bool)
    done = [False] * len(stones)
    them = opponent(pos.to_play)
    for p, s in enumerate(stones):
        if s == EMPTY or done[p]:
            continue
        members, lib = pos.group(p)
        for q in members:
            libs[q] = len(lib)
            done[q] = True
        if s == them and len(lib) == 1:
            capture[next(iter(lib))] = True
    return libs, capture


def mlperf07_planes(positions: Sequence[Position]) -> np.ndarray:
    """(B, 13, N, N) uint8 planes of ``positions`` (HistoryPosition: with history; Position: no history)."""
    size = positions[0].size
    out = np.zeros((len(positions), MLPERF07_PLANES, size, size), dtype=np.uint8)
    for b, pos in enumerate(positions):
        boards = [pos.stones, *getattr(pos, "history", ())]
        boards += [boards[-1]] * (HISTORY - len(boards))  # repeat the oldest board
        arr = np.asarray(boards, dtype=np.int8).reshape(HISTORY, size, size)
        me, them = pos.to_play, opponent(pos.to_play)
        out[b, 0 : 2 * HISTORY : 2] = arr == me
        out[b, 1 : 2 * HISTORY : 2] = arr == them
        out[b, 2 * HISTORY] = pos.to_play == BLACK
        libs, capture = _groups(pos)
        libs = libs.reshape(size, size)
        for k in range(3):
            out[b, 2 * HISTORY + 1 + k] = libs == k + 1
        out[b, 2 * HISTORY + 4] = capture.reshape(size, size)
    return out
