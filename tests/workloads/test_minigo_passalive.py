"""Pass-alive areas at minigo's reference scale: Benson's algorithm as the v2.0 reference's ``cc/position.cc``
defines it (``CalculatePassAliveRegionsForColor``, ``CalculateWholeBoardPassAlive``, ``CalculateScore``) on
hand-made positions, and its uses in the search (``cc/mcts_tree.cc`` ``GetMostVisitedMove``,
``ReshapeFinalVisits``; ``cc/concurrent_selfplay.cc:565-627``; ``cc/eval.cc:239-248``). Each expected board is
worked out by hand from the reference's definition (passalive.py's docstring)."""

from __future__ import annotations

import numpy as np
import pytest

from trainperf.workloads.minigo import passalive
from trainperf.workloads.minigo import reference_search as ref
from trainperf.workloads.minigo.go import BLACK, PASS, WHITE, from_diagram

TWO_EYES = """
    .X.X.
    XXXXX
    .....
    .....
    .....
"""
# Two black chains (the top and right side, the left and bottom side) share two corner eyes, each vital to
# both; the 3x3 inside is vital to neither, but only its centre touches no black stone.
FRAME = """
    .XXXX
    X...X
    X...X
    X...X
    XXXX.
"""
# Both colours alive with three one-point eyes each: every empty point is in a pass-alive region.
SPLIT = """
    .XXO.
    XXXOO
    .XXO.
    XXXOO
    .XXO.
"""


def regions(diagram: str) -> str:
    pos = from_diagram(diagram)
    out = passalive.pass_alive_regions(pos)
    rows = ["".join(".XO"[out[r * pos.size + c]] for c in range(pos.size)) for r in range(pos.size)]
    return "\n".join(rows)


def board(diagram: str) -> str:
    return "\n".join(r.strip() for r in diagram.strip().splitlines())


@pytest.mark.parametrize(
    ("diagram", "expected"),
    [
        (TWO_EYES, "X.X.X\n.....\n.....\n.....\n....."),  # three vital eyes; the open side is not enclosed
        (".X...\nXX...\n.....\n.....\n.....", ".....\n" * 4 + "....."),  # one eye: not alive
        # position.h's example: the white stone inside a black pass-alive region is marked black
        ("X.X.OX.\nXXXXXX.\n" + ".......\n" * 4 + ".......", ".X.XX..\n" + ".......\n" * 5 + "......."),
        # cc/position.cc:598-603: a small region that is vital to none of its four enclosing chains
        ("......\n..XX..\n.X..X.\n.X..X.\n..XX..\n......", "......\n" * 5 + "......"),
        (FRAME, "X....\n.XXX.\n.XXX.\n.XXX.\n....X"),  # one interior point: pass-alive, though vital to none
        # the same frame around 4x4: four interior points, so the inside is not pass-alive (the eyes are)
        (".XXXXX\nX....X\nX....X\nX....X\nX....X\nXXXXX.", "X.....\n" + "......\n" * 4 + ".....X"),
        (SPLIT, "X...O\n.....\nX...O\n.....\nX...O"),
    ],
    ids=["two-eyes", "one-eye", "opponent-stone-inside", "vital-to-none", "small-inside", "large-inside", "both"],
)
def test_benson_regions_of_hand_made_positions(diagram, expected):
    assert regions(diagram) == board(expected)


def test_whole_board_pass_alive_and_the_score_that_counts_pass_alive_areas():
    assert passalive.whole_board_pass_alive(from_diagram(FRAME))
    assert passalive.whole_board_pass_alive(from_diagram(SPLIT))
    assert not passalive.whole_board_pass_alive(from_diagram(TWO_EYES))
    assert not passalive.whole_board_pass_alive(from_diagram("....\n" * 3 + "...."))  # nothing enclosed
    # The white stone and the empty point beside it are Black's (CalculateScore), not neutral and White's.
    pos = from_diagram("X.X.OX.\nXXXXXX.\n" + ".......\n" * 4 + ".......", komi=0.5)
    assert pos.score() == 47 - 1 - 0.5 and passalive.score(pos) == 49 - 0.5


def _node(diagram: str, moves: int = 0, to_play: int = BLACK) -> ref.Node:
    pos = from_diagram(diagram, to_play=to_play, superko=True)
    pos.moves = moves
    node = ref.Node(pos, 722)
    node.expand(np.full(pos.size**2 + 1, 1.0 / (pos.size**2 + 1)), 0.0, ref.SearchConfig())
    return node


def test_a_whole_board_pass_alive_game_ends_by_passes_from_the_reference_move_count():
    assert passalive.min_pass_alive_moves(19) == 133 and passalive.min_pass_alive_moves(5) == 10  # kN*((kN+2)/3)
    assert not passalive.whole_board_ends(_node(SPLIT, moves=9))
    node = _node(SPLIT, moves=10)
    assert passalive.whole_board_ends(node) and not passalive.whole_board_ends(_node(TWO_EYES, moves=40))
    end = passalive.pass_out(node, 722)
    assert end.terminal and end.pos.passes == 2 and end.pos.stones == node.pos.stones
    assert end.terminal_value() == (1.0 if passalive.score(end.pos) > 0 else -1.0)  # Black to move: 15 - 10 - 7.5


def test_a_restricted_pick_and_target_leave_out_pass_alive_points():
    """Black's most visited move fills its own pass-alive eye: chosen when unrestricted (the reference has no
    eye rule), not once White has passed 4 times; the target then drops those visits."""
    root = _node(TWO_EYES)
    eye, other = root.index[0], root.index[12]  # A5 (an eye) and C3
    root.n[eye], root.n[other], root.N = 6.0, 3.0, 10
    cfg = ref.SearchConfig()
    assert ref.pick(root, cfg, None) == eye and ref.pick(root, cfg, None, restrict_pass_alive=True) == other
    visits = ref.prune_visits(root, restrict_pass_alive=True)
    assert visits[eye] == 0 and visits[root.index[2]] == visits[root.index[4]] == 0
    root.n[:] = 0.0
    root.n[eye] = 9.0
    visits = ref.prune_visits(root, restrict_pass_alive=True)
    assert visits.sum() == 1 and visits[root.index[PASS]] == 1  # all visits pruned: one on pass


def test_ties_of_the_most_visited_move_go_to_the_higher_action_score():
    root = _node(".....\n" * 4 + ".....", to_play=WHITE)
    first, second = root.index[3], root.index[17]
    root.n[first] = root.n[second] = 4.0
    root.N = 9
    root.prior[second] *= 2  # the same Q, a higher U
    assert ref.pick(root, ref.SearchConfig(), None) == second
    root.w[first] += 1.0  # a higher Q
    assert ref.most_visited(root) == first
