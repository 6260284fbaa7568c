"""minigo's reference scale against the v2.0 reference's C++ engine and run scripts (mlcommons/training @
a0671ab8, reinforcement/tensorflow/minigo): positional superko, no eye rule, the tree's Q and N, tree
reuse, the search policy's soft-pick squash, the evaluation's 256 games and the bootstrap games played
before the run. Each case is worked out by hand from the reference's code (README.md, "Conformance")."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trainperf.dist import DistContext
from trainperf.errors import DataError
from trainperf.spec import RunConfig
from trainperf.workloads.minigo import MINI_RECIPE, REFERENCE, REFERENCE_RECIPE, mcts
from trainperf.workloads.minigo import reference_search as ref
from trainperf.workloads.minigo.bootstrap import BOOTSTRAP_GAMES_FILE, search_config
from trainperf.workloads.minigo.features import HistoryPosition
from trainperf.workloads.minigo.go import BLACK, PASS, IllegalMove, Position, from_diagram
from trainperf.workloads.minigo.workload import MiniGoWorkload

# Two kos on a 7x7 board: at the top Black can take the white stone B6 by playing C6; at the bottom White
# can take the black stone B2 by playing C2.
DOUBLE_KO = """
    .XO....
    XO.O...
    .XO....
    .......
    .OX....
    OX.X...
    .OX....
"""


def _double_ko_cycle(superko: bool) -> Position:
    """Black takes the top ko, White takes the bottom ko, Black passes, White retakes the top ko: Black to
    move, and taking the bottom ko back would recreate the first position's stones."""
    pos = Position(7, superko=superko)
    start = from_diagram(DOUBLE_KO)
    pos.stones = start.stones[:]
    if superko:
        pos.zhash = pos.stone_hash()
        pos.seen = frozenset((pos.zhash,))
    for move in ("C6", "C2", "pass", "B6"):
        pos.play(pos.from_gtp(move))
    return pos


def test_positional_superko_refuses_the_double_ko_repetition_that_simple_ko_allows():
    simple, superko = _double_ko_cycle(False), _double_ko_cycle(True)
    assert simple.stones == superko.stones and simple.to_play == BLACK
    b2 = simple.from_gtp("B2")
    assert simple.ko == simple.from_gtp("C6")  # simple ko bans only the top ko's retake
    assert simple.is_legal(b2) and simple.legal_mask()[b2]
    assert not superko.is_legal(b2) and not superko.legal_mask()[b2]
    # every other point is judged alike by both
    others = np.arange(49) != b2
    assert np.array_equal(simple.legal_mask()[others], superko.legal_mask()[others])
    start = from_diagram(DOUBLE_KO)
    after = simple.copy()
    after.play(b2)
    assert after.stones == start.stones  # the repetition itself
    with pytest.raises(IllegalMove, match="superko"):
        superko.play(b2)


def test_the_reference_search_tree_sees_the_games_history():
    """The tree's positions carry the game's hashes (the reference's ZobristHistory walks to the game root):
    the repeating move is not among the root's candidates."""
    pos = HistoryPosition(7, superko=True)
    start = from_diagram(DOUBLE_KO, superko=True)
    pos.stones, pos.zhash, pos.seen = start.stones[:], start.zhash, start.seen
    for move in ("C6", "C2", "pass", "B6"):
        pos.play(pos.from_gtp(move))
    root = ref.Node(pos, 722)
    n = 7 * 7 + 1
    root.expand(np.full(n, 1 / n), 0.0, search_config(REFERENCE_RECIPE))
    assert pos.from_gtp("B2") not in root.moves.tolist() and PASS in root.moves.tolist()


def test_the_reference_has_no_eye_rule_and_the_mini_keeps_its_own():
    pos = from_diagram(
        """
        .X...
        X....
        .....
        .....
        .....""",
        superko=True,
    )  # A5 is Black's one-point eye in the corner
    eye, n = pos.from_gtp("A5"), 26
    assert pos.is_eye(eye, BLACK)
    node = ref.Node(pos, 50)
    node.expand(np.full(n, 1 / n), 0.0, search_config(REFERENCE_RECIPE))
    assert eye in node.moves.tolist()  # every legal point: cc/position.cc has no eye rule
    mini = mcts.Node(pos, 50)
    mini.expand(np.full(n, 1 / n), MINI_RECIPE.fill_own_eyes)
    assert eye not in mini.moves.tolist()  # the calibrated mini scale leaves own eyes out
    assert (REFERENCE_RECIPE.positional_superko, REFERENCE_RECIPE.fill_own_eyes) == (True, True)
    assert (MINI_RECIPE.positional_superko, MINI_RECIPE.fill_own_eyes) == (False, False)


def constant_evaluator(value: float):
    def evaluate(positions, syms):
        n = positions[0].size ** 2 + 1
        return np.full((len(positions), n), 1.0 / n, np.float32), np.full(len(positions), value, np.float32)

    return evaluate


def test_q_of_an_unvisited_child_is_the_first_play_value_and_a_visit_folds_it_in():
    """IncorporateResults sets every move's W to the value minus value_init_penalty; child_Q = W / (1 + N)."""
    cfg = ref.SearchConfig(virtual_losses=1, value_init_penalty=0.2)
    root = ref.Node(HistoryPosition(9), cfg.max_game_moves)
    ref.search([root], [2], constant_evaluator(0.5), cfg, np.random.default_rng(0), noise=[False])
    assert root.N == 2 and root.n.sum() == 1  # the root's own evaluation, then one readout
    visited, unvisited = int(np.flatnonzero(root.n)[0]), int(np.flatnonzero(root.n == 0)[0])
    u_scale = 2 * (math.log((1 + 2 + 19652) / 19652) + 1.25)
    prior = 1 / 82  # uniform over 81 points and pass
    scores = root.action_scores()
    # unvisited: Q = 0.5 - 0.2 = 0.3; U = U_scale sqrt(max(1, N - 1)) P / (1 + 0)
    assert scores[unvisited] == pytest.approx(0.3 + u_scale * prior)
    # visited once with the child's value 0.5 for its player (-0.5 for ours): Q = (0.3 - 0.5) / 2 = -0.1
    assert scores[visited] == pytest.approx(-0.1 + u_scale * prior / 2)
    assert root.q() == pytest.approx(0.0)  # W / (1 + N) for the root's player: (0.5 - 0.5) / 3


def test_tree_reuse_keeps_the_chosen_childs_visits():
    cfg = ref.SearchConfig(virtual_losses=1)
    rng = np.random.default_rng(1)
    root = ref.Node(HistoryPosition(9), cfg.max_game_moves)
    ref.search([root], [30], constant_evaluator(0.0), cfg, rng, noise=[False])
    i = int(np.argmax(root.n))
    kept = root.children[i]
    visits, below = int(root.n[i]), kept.n.sum()
    assert visits > 1 and kept.N == visits and below == visits - 1
    nxt = root.advance(int(root.moves[i]), cfg.max_game_moves)
    assert nxt is kept and nxt.N == visits  # the subtree and its counts become the next root
    ref.search([nxt], [10], constant_evaluator(0.0), cfg, rng, noise=[False])
    assert nxt.N == visits + 10  # target = N + readouts (MctsPlayer::SuggestMove)
    blank = ref.Node(HistoryPosition(9), cfg.max_game_moves)
    fresh = blank.advance(0, cfg.max_game_moves)  # a root never searched: a new node after the move
    assert fresh.N == 0 and fresh.moves is None and fresh.pos.stones[0] == BLACK


def test_a_games_first_move_is_a_full_move():
    """concurrent_selfplay.cc starts each game with fastplay_ = false: with every later move a fast one,
    each game has exactly one training example."""
    cfg = ref.SearchConfig(num_readouts=4, fastplay_readouts=2, fastplay_frequency=1.0, max_game_moves=8)
    games = ref.self_play(constant_evaluator(0.0), games=3, size=9, komi=7.5, cfg=cfg, seed=5)
    assert len(games.outcome) == 3


def test_the_search_policy_is_squashed_before_the_soft_pick_cutoff():
    """CalculateSearchPi raises the visits to policy_softmax_temp for the soft-picked opening moves."""
    cfg = ref.SearchConfig(soft_pick_cutoff=2, policy_softmax_temp=0.98)
    pos = HistoryPosition(9)
    root = ref.Node(pos, 722)
    root.moves = np.array([0, PASS])
    visits = np.array([8.0, 2.0])
    early = ref.search_policy(root, visits, cfg)
    assert early[0] == pytest.approx(8**0.98 / (8**0.98 + 2**0.98)) and early[81] == pytest.approx(
        2**0.98 / (8**0.98 + 2**0.98)
    )
    pos.play(0)
    pos.play(1)  # move 2: past the cutoff
    late = ref.search_policy(root, visits, cfg)
    assert late[0] == pytest.approx(0.8) and late[81] == pytest.approx(0.2)


def test_the_reference_evaluation_plays_the_v2_runs_256_games():
    assert REFERENCE_RECIPE.eval_games == 256  # eval_models.py --num_games; eval_games 256 in every v2.0 log
    w = MiniGoWorkload(REFERENCE, REFERENCE_RECIPE, RunConfig(seed=1), data_dir=None, dist=DistContext())
    assert w.eval_samples == 256


# --- the bootstrap generation -------------------------------------------------------------------------
def smoke_workload(tmp_path, *, fixture: bool = True) -> MiniGoWorkload:
    from trainperf.harness.runner import dry_run_recipe
    from trainperf.workloads.minigo.data import write_smoke_fixture

    folder = tmp_path / "minigo" / "reference"
    folder.mkdir(parents=True)
    write_smoke_fixture(folder)
    if not fixture:
        (folder / BOOTSTRAP_GAMES_FILE).unlink()
    recipe = dry_run_recipe(MiniGoWorkload, REFERENCE, REFERENCE_RECIPE, DistContext())
    return MiniGoWorkload(REFERENCE, recipe, RunConfig(seed=1, smoke=True), data_dir=tmp_path, dist=DistContext())


def test_generation_one_trains_on_the_bootstrap_games_played_before_the_run(tmp_path, monkeypatch):
    """init_from_checkpoint.py copies the checkpoint's games before the clock; the loop's first step trains
    on them. Here the games file (the smoke window: 2 generations of 2 games) is written beforehand, read by
    load_data, and generation 1 plays nothing."""
    w = smoke_workload(tmp_path)
    w.prepare()
    w.load_data()
    boot = w.bootstrap_games
    assert boot is not None and [g.games for g in boot] == [2, 2] and all(len(g.outcome) for g in boot)
    played: list[int] = []
    real = ref.self_play

    def counting(*args, **kwargs):
        played.append(kwargs["games"])
        return real(*args, **kwargs)

    monkeypatch.setattr(ref, "self_play", counting)
    model = w.build_model()
    hp = w.hparams()
    assert hp["trainperf_bootstrap_games"] == 4 and hp["trainperf_bootstrap_generations"] == 2
    assert hp["trainperf_bootstrap_examples"] == sum(len(g.outcome) for g in boot)
    list(w.generation_batches(model, 1))
    assert played == [] and w.window == boot  # no self-play on the clock in generation 1
    list(w.generation_batches(model, 2))
    assert played == [2] and len(w.window) == 2 and w.window[0] is boot[1]  # the oldest generation left


def test_a_missing_bootstrap_games_file_is_refused_before_the_clock(tmp_path):
    w = smoke_workload(tmp_path, fixture=False)
    with pytest.raises(DataError, match=r"bootstrap_games\.npz are missing.*python -m trainperf\.workloads\.minigo"):
        w.prepare()


@pytest.mark.parametrize("seed", range(4))
def test_superko_games_never_repeat_and_the_mask_agrees_with_play(seed):
    """Random 5x5 games under superko, captures and kos included: the mask, is_legal and play agree at every
    point of every move, the incremental hash is the stones' hash, and no position of a game comes twice."""
    rng = np.random.default_rng(seed)
    pos, boards = Position(5, superko=True), set()
    for _ in range(120):
        assert pos.zhash == pos.stone_hash() and pos.zhash in pos.seen
        boards.add(tuple(pos.stones))
        mask = pos.legal_mask()
        for p in range(25):
            assert mask[p] == pos.is_legal(p)
            trial = pos.copy()
            if mask[p]:
                trial.play(p)
                assert tuple(trial.stones) not in boards  # a legal move never recreates a position
            else:
                with pytest.raises(IllegalMove):
                    trial.play(p)
        legal = np.flatnonzero(pos.legal_mask(allow_eye_fill=False))  # random play that keeps its eyes
        pos.play(int(rng.choice(legal)) if len(legal) else PASS)  # a pass repeats the stones: no new hash
        if pos.game_over:
            break
    boards.add(tuple(pos.stones))
    assert len(boards) > 20 and len(pos.seen) == len(boards)  # one hash per position, none twice
