"""The Go engine's rules on known positions, and agreement with GNU Go on random legal games."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from trainperf.workloads.minigo.go import BLACK, PASS, WHITE, IllegalMove, Position, from_diagram, playout_moves
from trainperf.workloads.minigo.gtp import GNUGO, GTPClient, gnugo_command


def test_capture_removes_a_stone_without_liberties():
    pos = from_diagram("""
        .X...
        XOX..
        .....
        .....
        .....""")
    assert pos.stones[pos.from_gtp("B4")] == WHITE
    pos.play(pos.from_gtp("B3"))  # black closes the white stone's last liberty
    assert pos.stones[pos.from_gtp("B4")] == 0
    assert pos.to_play == WHITE and pos.ko == PASS


def test_capture_of_a_group_in_the_corner():
    pos = from_diagram("""
        OO...
        XX...
        .....
        .....
        .....""")
    pos.play(pos.from_gtp("C5"))
    assert pos.stones[0] == 0 and pos.stones[1] == 0
    assert pos.stones[2] == BLACK


def test_suicide_is_illegal_but_a_capturing_move_is_not():
    pos = from_diagram("""
        .O...
        O....
        .....
        .....
        .....""")
    assert not pos.is_legal(0)
    assert not pos.legal_mask()[0]
    with pytest.raises(IllegalMove, match="suicide"):
        pos.copy().play(0)
    # the same point is legal when it captures
    cap = from_diagram("""
        .OX..
        OX...
        X....
        .....
        .....""")
    assert cap.is_legal(0)
    cap.play(0)
    assert cap.stones[1] == 0 and cap.stones[5] == 0


def test_simple_ko_forbids_the_immediate_retake_only():
    pos = from_diagram(
        """
        .XO..
        XO.O.
        .XO..
        .....
        .....""",
        to_play=BLACK,
    )
    take = pos.from_gtp("C4")  # black captures the white stone at B4
    pos.play(take)
    retake = pos.from_gtp("B4")
    assert pos.stones[retake] == 0
    assert not pos.is_legal(retake) and not pos.legal_mask()[retake]
    with pytest.raises(IllegalMove, match="ko"):
        pos.copy().play(retake)
    pos.play(pos.from_gtp("E1"))  # a ko threat elsewhere
    pos.play(pos.from_gtp("E2"))
    assert pos.is_legal(retake)  # the ko may be retaken after an exchange


def test_two_passes_end_the_game_and_a_move_resets_the_count():
    pos = Position(5)
    pos.play(PASS)
    pos.play(12)
    pos.play(PASS)
    assert not pos.game_over
    pos.play(PASS)
    assert pos.game_over


def test_tromp_taylor_area_counts_stones_and_single_colour_regions():
    pos = from_diagram(
        """
        .X.O.
        .X.O.
        .X.O.
        .X.O.
        .X.O.""",
        komi=0.5,
    )
    assert pos.area() == (10, 10)  # column C reaches both colours: neutral
    assert pos.score() == -0.5
    assert Position(5, komi=7.5).score() == -7.5  # an empty board is neutral


def test_eyes_are_not_candidate_moves():
    pos = from_diagram("""
        .X...
        X....
        .....
        .....
        .....""")
    assert pos.is_eye(0, BLACK) and 0 not in playout_moves(pos)
    pos.to_play = WHITE
    assert not pos.legal_mask()[0]  # suicide for white


def test_gtp_vertices_round_trip():
    pos = Position(9)
    for p in range(81):
        assert pos.from_gtp(pos.gtp(p)) == p
    assert pos.gtp(0) == "A9" and pos.gtp(80) == "J1"
    with pytest.raises(ValueError):
        pos.from_gtp("I5")


needs_gnugo = pytest.mark.skipif(shutil.which(GNUGO) is None, reason="GNU Go is not installed (scripts/setup.sh)")


def _random_game_against_gnugo(size: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    pos = Position(size, komi=7.5)
    with GTPClient(gnugo_command(size=size, seed=seed)) as g:
        while not pos.game_over and pos.moves < 4 * size * size:
            color = "black" if pos.to_play == BLACK else "white"
            theirs = {pos.from_gtp(v) for v in g.call(f"all_legal {color}").split()}
            ours = set(np.flatnonzero(pos.legal_mask()).tolist())
            assert ours == theirs, f"legal moves differ at move {pos.moves}:\n{pos}"
            moves = playout_moves(pos)
            move = int(rng.choice(moves)) if len(moves) else PASS
            g.call(f"play {color} {pos.gtp(move)}")
            pos.play(move)
        board = g.call("showboard")
        assert pos.game_over, "random play must end with two passes"
        black = {pos.from_gtp(v) for v in g.call("list_stones black").split()}
        white = {pos.from_gtp(v) for v in g.call("list_stones white").split()}
        assert black == {p for p, s in enumerate(pos.stones) if s == BLACK}, board
        assert white == {p for p, s in enumerate(pos.stones) if s == WHITE}, board
        # played out until no move outside an eye is left: no dead stones, so GNU Go's score is the area score
        final = g.call("final_score")
        ours_text = "0" if pos.score() == 0 else f"{'B' if pos.score() > 0 else 'W'}+{abs(pos.score()):g}"
        assert final == ours_text, f"{final} vs {ours_text}\n{pos}"


@needs_gnugo
@pytest.mark.parametrize("size,seed", [(5, 1), (5, 2), (7, 3), (9, 4), (9, 5)])
def test_random_games_match_gnugo_legality_captures_and_score(size, seed):
    _random_game_against_gnugo(size, seed)


def _random_positions(size: int, count: int, seed: int) -> list[Position]:
    """Positions along random games (captures, kos and eyes included), every few moves."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        pos = Position(size)
        for _ in range(3 * size * size):
            moves = [p for p in range(size * size) if pos.is_legal(p)]
            if not moves or pos.game_over:
                break
            pos.play(int(rng.choice(moves)) if rng.random() > 0.05 else PASS)
            if pos.ko != PASS or rng.random() < 0.2:  # every ko position: the mask must leave the ko point out
                out.append(pos.copy())
    return out[:count]


@pytest.mark.parametrize("size", [5, 9])
def test_the_legal_move_mask_agrees_with_the_rules_point_by_point(size):
    """legal_mask inlines is_legal and is_eye for speed: it must say what they say on every point."""
    positions = _random_positions(size, 200, seed=size)
    assert any(pos.ko != PASS for pos in positions)
    for pos in positions:
        legal = [pos.is_legal(p) for p in range(size * size)]
        assert pos.legal_mask().tolist() == legal
        no_eyes = [ok and not pos.is_eye(p, pos.to_play) for p, ok in enumerate(legal)]
        assert pos.legal_mask(allow_eye_fill=False).tolist() == no_eyes
