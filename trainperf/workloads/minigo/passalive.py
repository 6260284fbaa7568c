"""Pass-alive areas (Benson's algorithm) and the score that counts them, as the v2.0 reference's C++ engine has them.

The reference scale's search uses them the way ``cc/concurrent_selfplay.cc`` and ``cc/eval.cc`` do
(``reference_search.py``): a player may not move into a pass-alive area once its opponent has passed
``restrict_pass_alive_play_threshold`` times in a row (in evaluation always), a full move's policy target loses
those points' visits, a game whose whole board is pass-alive is ended by passes, and every score (a finished
game's, a terminal leaf's) counts pass-alive areas for their owner (``Position::CalculateScore``).

Written here over our flat board (``go.Position.stones``), after ``cc/position.cc``
``CalculatePassAliveRegionsForColor`` (a0671ab8, lines 590-945); no Python package implements Benson's
algorithm for this board format, and the reference's own definition has details a textbook version lacks
(below). For one colour, with *regions* the maximal connected sets of points without a stone of that colour
(empty points and opponent stones):

- a region is *vital* to one of the colour's chains when every **empty** point of the region is a liberty
  of that chain (opponent stones in the region do not count);
- chains with fewer than two vital regions are removed, and each removed chain removes the regions that hold
  one of its liberties (not a region it touches only through opponent stones), which takes their vitality
  from the other chains; this repeats until no chain is removed: the chains left are pass-alive;
- a region with at least one enclosing chain is pass-alive when all its enclosing chains are and **at most
  one** of its empty points touches none of the colour's stones; such a region need not be vital to any chain
  (a small region is enough). Its points, opponent stones included, belong to the colour; the chains
  themselves are not marked.

Black's regions are found first, then White's, into one board (``CalculatePassAliveRegions``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from trainperf.workloads.minigo.go import BLACK, EMPTY, PASS, WHITE, Position

if TYPE_CHECKING:
    from trainperf.workloads.minigo.reference_search import Node


def min_pass_alive_moves(size: int) -> int:
    """The moves a game must have before the whole-board check (``cc/constants.h:40`` ``kMinPassAliveMoves``)."""
    return size * ((size + 2) // 3)


def _chains(stones: list[int], nb, color: int) -> tuple[list[int], list[set[int]]]:
    """Per point the index of its ``color`` chain (-1 elsewhere), and each chain's liberties."""
    chain_of = [-1] * len(stones)
    liberties: list[set[int]] = []
    for p, s in enumerate(stones):
        if s != color or chain_of[p] >= 0:
            continue
        index, libs, stack = len(liberties), set(), [p]
        chain_of[p] = index
        while stack:
            q = stack.pop()
            for n in nb[q]:
                t = stones[n]
                if t == EMPTY:
                    libs.add(n)
                elif t == color and chain_of[n] < 0:
                    chain_of[n] = index
                    stack.append(n)
        liberties.append(libs)
    return chain_of, liberties


def _regions(stones: list[int], nb, color: int, chain_of: list[int]) -> tuple[list[int], list[tuple]]:
    """Per point the index of its region (-1 on ``color``'s stones), and each region's points, empty points and
    enclosing chains."""
    region_of = [-1] * len(stones)
    regions = []
    for p, s in enumerate(stones):
        if s == color or region_of[p] >= 0:
            continue
        index, points, enclosing, k = len(regions), [p], set(), 0
        region_of[p] = index
        while k < len(points):
            for n in nb[points[k]]:
                if stones[n] != color:
                    if region_of[n] < 0:
                        region_of[n] = index
                        points.append(n)
                else:
                    enclosing.add(chain_of[n])
            k += 1
        regions.append((points, [q for q in points if stones[q] == EMPTY], enclosing))
    return region_of, regions


def _mark_color(stones: list[int], nb, color: int, out: list[int]) -> None:
    """Set ``out`` to ``color`` on every point of ``color``'s pass-alive regions."""
    chain_of, liberties = _chains(stones, nb, color)
    region_of, regions = _regions(stones, nb, color, chain_of)
    vital = [[c for c in enclosing if liberties[c].issuperset(empties)] for _, empties, enclosing in regions]
    vital_count = [0] * len(liberties)
    for chains in vital:
        for c in chains:
            vital_count[c] += 1
    alive = set(range(len(liberties)))
    removed = [False] * len(regions)
    while True:
        dead = [c for c in alive if vital_count[c] < 2]
        if not dead:
            break
        alive.difference_update(dead)
        for c in dead:  # a removed chain removes the regions that hold one of its liberties
            for q in liberties[c]:
                r = region_of[q]
                if not removed[r]:
                    removed[r] = True
                    for v in vital[r]:
                        vital_count[v] -= 1
    for points, empties, enclosing in regions:
        if not enclosing or not enclosing <= alive:
            continue
        interior = sum(all(stones[n] != color for n in nb[q]) for q in empties)
        if interior <= 1:
            for q in points:
                out[q] = color


def pass_alive_regions(pos: Position) -> list[int]:
    """Per point: BLACK or WHITE inside that colour's pass-alive regions, else EMPTY (the enclosing chains
    themselves are EMPTY), as ``Position::CalculatePassAliveRegions``."""
    out = [EMPTY] * len(pos.stones)
    for color in (BLACK, WHITE):
        _mark_color(pos.stones, pos.geo.neighbors, color, out)
    return out


def whole_board_pass_alive(pos: Position) -> bool:
    """Every empty point is in a pass-alive region (``Position::CalculateWholeBoardPassAlive``)."""
    regions = pass_alive_regions(pos)
    return all(r != EMPTY for r, s in zip(regions, pos.stones, strict=True) if s == EMPTY)


def score(pos: Position) -> float:
    """Black's area minus White's, minus komi, with each pass-alive region counted as its owner's stones first
    (``Position::CalculateScore``): Tromp-Taylor's area of that board."""
    regions = pass_alive_regions(pos)
    board = pos.copy()
    board.stones = [r if r != EMPTY else s for r, s in zip(regions, pos.stones, strict=True)]
    return board.score()


# --- the reference search's uses (reference_search.py) ---------------------------------------------
def outside_pass_alive(root: Node) -> np.ndarray:
    """Per candidate move: pass, or a point outside every pass-alive area (``GetMostVisitedMove``'s
    ``out_of_bounds``)."""
    regions = pass_alive_regions(root.pos)
    return np.array([m == PASS or regions[m] == EMPTY for m in root.moves.tolist()])


def whole_board_ends(node: Node) -> bool:
    """From move ``size * ((size + 2) // 3)`` on, a game whose whole board is pass-alive is ended by passes
    (``cc/concurrent_selfplay.cc:621-627``, ``cc/eval.cc:240-249``)."""
    if node.terminal or node.pos.moves < min_pass_alive_moves(node.pos.size):
        return False
    return whole_board_pass_alive(node.pos)


def pass_out(node: Node, max_moves: int) -> Node:
    """The node after passes that end the game."""
    while not node.terminal:
        node = node.advance(PASS, max_moves)
    return node
