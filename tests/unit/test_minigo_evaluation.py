"""minigo's mini evaluation: distinct openings, the screen and its confirmation, and what is logged."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from trainperf.dist import DistContext
from trainperf.spec import RunConfig
from trainperf.workloads.minigo import MINI, MINI_RECIPE, arena, mcts
from trainperf.workloads.minigo.go import BLACK, Position
from trainperf.workloads.minigo.gtp import GNUGO
from trainperf.workloads.minigo.workload import MiniGoWorkload

N = 5


def test_the_eight_symmetries_are_distinct_permutations_of_the_board():
    images = {tuple(arena.symmetric_point(p, k, N) for p in range(N * N)) for k in range(8)}
    assert len(images) == 8
    assert all(sorted(img) == list(range(N * N)) for img in images)
    assert arena.symmetric_point(-1, 3, N) == -1  # a pass stays a pass


def test_symmetric_openings_have_one_canonical_form():
    opening = [0, 7, 13]  # a corner, a point near it, the centre
    forms = {arena.canonical_opening([arena.symmetric_point(p, k, N) for p in opening], N) for k in range(8)}
    assert len(forms) == 1
    assert arena.canonical_opening([1, 7, 13], N) not in forms


def test_openings_are_distinct_up_to_symmetry_and_a_prefix_of_longer_lists():
    games = MINI_RECIPE.eval_games + MINI_RECIPE.confirm_games
    many = arena.openings(games // 2, N, 7.5, MINI_RECIPE.opening_moves)
    keys = [arena.canonical_opening(moves, N) for _, moves in many]
    assert len(set(keys)) == len(keys) == games // 2
    few = arena.openings(MINI_RECIPE.eval_games // 2, N, 7.5, MINI_RECIPE.opening_moves)
    assert [m for _, m in few] == [m for _, m in many[: len(few)]]
    for pos, moves in many[:5]:  # the position is the moves played
        replay = Position(N, 7.5)
        for m in moves:
            replay.play(m)
        assert replay.stones == pos.stones and replay.to_play == pos.to_play


def test_openings_refuse_more_than_the_board_has():
    with pytest.raises(ValueError, match="distinct"):
        arena.openings(7, N, 7.5, 1)  # 25 first moves are 6 up to symmetry


def test_match_results_add_up_per_colour():
    a = arena.ArenaResult(wins=5, games=10, disagreements=1, black_wins=4, black_games=5, scores=[1.0])
    b = arena.ArenaResult(wins=2, games=6, disagreements=0, black_wins=2, black_games=3, scores=[-1.0])
    c = a + b
    assert (c.wins, c.games, c.disagreements, c.black_wins, c.black_games) == (7, 16, 1, 6, 8)
    assert (c.white_wins, c.white_games, c.scores) == (1, 8, [1.0, -1.0])


def _workload(tmp_path, **overrides) -> MiniGoWorkload:
    recipe = MINI_RECIPE.with_overrides(overrides)
    return MiniGoWorkload(MINI, recipe, RunConfig(seed=100_001), data_dir=tmp_path, dist=DistContext())


def _fake_matches(monkeypatch, rates: list[float]):
    """Replace the games against GNU Go: match i wins rates[i] of its games (half as Black); record calls."""
    calls = []

    def fake(self, ours, cfg, games, *, first_opening):
        wins = round(rates[len(calls)] * games)
        calls.append((games, first_opening))
        return arena.ArenaResult(wins=wins, games=games, black_wins=wins - wins // 3, black_games=games // 2)

    monkeypatch.setattr(MiniGoWorkload, "_gnugo_match", fake)
    return calls


def test_a_screen_below_the_target_is_the_evaluation(tmp_path, monkeypatch):
    calls = _fake_matches(monkeypatch, [0.2])
    out = _workload(tmp_path).evaluate(_tiny_model())
    assert calls == [(MINI_RECIPE.eval_games, 0)]
    assert out["win_rate"] == out["screen_win_rate"] == 0.2 and out["confirmation_games"] == 0
    assert "confirmation_win_rate" not in out and not MINI.reached(out)


def test_a_lucky_screen_does_not_pass_without_the_confirmation(tmp_path, monkeypatch):
    calls = _fake_matches(monkeypatch, [0.4, MINI.target - 0.05])
    out = _workload(tmp_path).evaluate(_tiny_model())
    screen, confirm = MINI_RECIPE.eval_games, MINI_RECIPE.confirm_games
    assert calls == [(screen, 0), (confirm, screen // 2)]  # the confirmation plays the openings after the screen's
    assert out["screen_win_rate"] == 0.4 and out["win_rate"] == out["confirmation_win_rate"]
    assert not MINI.reached(out) and MINI.logged_value(out) < MINI.target
    assert out["games"] == screen + confirm and out["confirmation_games"] == confirm
    assert out["black_games"] + out["white_games"] == out["games"]
    assert out["black_wins"] + out["white_wins"] == round(0.4 * screen) + round((MINI.target - 0.05) * confirm)


def test_a_confirmed_screen_reaches_the_target(tmp_path, monkeypatch):
    _fake_matches(monkeypatch, [MINI.target, MINI.target + 0.05])
    out = _workload(tmp_path).evaluate(_tiny_model())
    assert MINI.reached(out) and out["win_rate"] == out["confirmation_win_rate"] == MINI.target + 0.05


def test_without_a_confirmation_the_screen_decides(tmp_path, monkeypatch):
    calls = _fake_matches(monkeypatch, [0.4])
    out = _workload(tmp_path, confirm_games=0).evaluate(_tiny_model())
    assert len(calls) == 1 and out["win_rate"] == 0.4


def _tiny_model():
    from trainperf.workloads.minigo.model import mini_gonet

    return mini_gonet(N)


@pytest.mark.skipif(shutil.which(GNUGO) is None, reason="GNU Go is not installed (scripts/setup.sh)")
def test_a_match_counts_each_colour_and_plays_distinct_openings():
    def uniform(positions):
        return np.full((len(positions), N * N + 1), 1.0 / (N * N + 1)), np.zeros(len(positions))

    cfg = mcts.SearchConfig(playouts=1)
    kw = dict(games=4, size=N, komi=7.5, cfg=cfg, opponent=arena.Opponent(), opening_moves=3)
    first = arena.play_match(uniform, **kw, first_opening=0)
    assert (first.games, first.black_games, first.white_games) == (4, 2, 2)
    assert first.black_wins + first.white_wins == first.wins and first.disagreements == 0
    later = arena.play_match(uniform, **kw, first_opening=2)
    assert len(first.scores) == len(later.scores) == 4
    with pytest.raises(ValueError, match="even"):
        arena.play_match(uniform, **{**kw, "games": 3})
    assert BLACK == 1  # game 2k is played as Black (arena.play_match), so black_games is half


@pytest.mark.skipif(shutil.which(GNUGO) is None, reason="GNU Go is not installed (scripts/setup.sh)")
def test_the_workers_play_the_games_one_process_would(tmp_path, monkeypatch):
    """The evaluation's games are split over the worker processes (each share with its own GNU Go seeds and
    openings): the same games, game for game, as one process playing the whole part."""
    import torch

    from trainperf.workloads.minigo import workload as mw

    monkeypatch.setattr(mw, "MATCH_PART", 8)
    monkeypatch.setattr(MiniGoWorkload, "workers", 2)
    w = _workload(tmp_path)
    cfg = mcts.SearchConfig(playouts=4)
    torch.manual_seed(3)
    model = _tiny_model().eval()
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    one = arena.ArenaResult()
    for first in (2, 6):  # two parts of 8 games, from opening 2 on
        one = one + arena.play_match(
            mcts.network_evaluator(model),
            games=8,
            size=N,
            komi=MINI_RECIPE.komi,
            cfg=cfg,
            opponent=arena.Opponent(level=MINI_RECIPE.opponent_level),
            opening_moves=MINI_RECIPE.opening_moves,
            first_opening=first,
        )
    w.prepare()
    try:
        split = w._gnugo_match(state, cfg, 16, first_opening=2)
    finally:
        w.close()
    assert split.games == one.games == 16
    assert split.scores == one.scores  # game for game, in order
    assert (split.wins, split.black_wins, split.disagreements) == (one.wins, one.black_wins, one.disagreements)
