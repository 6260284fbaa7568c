"""minigo at the reference scale (MLPerf v2.0): the network, the 13 feature planes, the bootstrap and target
model files, the converter, the batched search and the workload's generation."""

from __future__ import annotations

import math
import sys
import types

import numpy as np
import pytest
import torch

from trainperf import registry
from trainperf.dist import DistContext
from trainperf.errors import DataError
from trainperf.spec import RunConfig
from trainperf.workloads.minigo import REFERENCE, REFERENCE_RECIPE, SMOKE_OVERRIDES
from trainperf.workloads.minigo import reference_search as ref
from trainperf.workloads.minigo.features import MLPERF07_PLANES, HistoryPosition, mlperf07_planes
from trainperf.workloads.minigo.model import reference_gonet
from trainperf.workloads.minigo.tfweights import (
    load_reference_weights,
    reference_arrays,
    tf_layout,
    write_arrays,
)
from trainperf.workloads.minigo.workload import MiniGoWorkload


# --- the network -------------------------------------------------------------------------------------
def test_reference_network_is_the_v2_dual_net_of_the_19x19_flags():
    with torch.device("meta"):
        net = reference_gonet()
    # 6 blocks x 64 filters on 13 planes, fc_width 64: counted by hand from dual_net.model_inference_fn
    stem = 3 * 3 * 13 * 64 + 2 * 64
    block = 2 * (3 * 3 * 64 * 64 + 2 * 64)
    policy = 64 * 2 + (2 * 361 * 362 + 362)  # conv, BN without scale/offset, dense
    value = 64 * 1 + (361 * 64 + 64) + (64 + 1)
    assert sum(p.numel() for p in net.parameters()) == stem + 6 * block + policy + value == 736_671
    trainable_tf = sum(math.prod(s) for n, s in tf_layout().items() if "moving_" not in n)
    assert trainable_tf == 736_671  # the TF layout holds exactly the same weights
    assert not net.policy_conv[1].affine and not net.value_conv[1].affine
    assert net.stem[1].momentum == pytest.approx(0.05) and net.stem[1].eps == 1e-5  # TF momentum .95
    policy_out, value_out = reference_gonet().eval()(torch.zeros(2, MLPERF07_PLANES, 19, 19))
    assert policy_out.shape == (2, 362) and value_out.shape == (2,)


def test_reference_recipe_is_the_v2_flags():
    r = REFERENCE_RECIPE
    assert (r.train_batch_size, r.lr_boundaries, r.lr_rates) == (
        4096,
        (128, 10000, 20000),
        (0.016, 0.16, 0.016, 0.0016),
    )
    assert (r.num_readouts, r.fastplay_frequency, r.fastplay_readouts, r.virtual_losses) == (800, 0.75, 80, 4)
    assert (r.dirichlet_alpha, r.noise_mix, r.value_init_penalty, r.value_cost_weight) == (0.03, 0.3, 0.2, 0.5)
    assert (r.window_generations, r.train_filter, r.eval_games, r.eval_readouts) == (5, 0.3, 256, 100)
    assert r.min_selfplay_games_per_generation == 8192 and r.weight_decay == 1e-4
    assert REFERENCE.dry_run_only == "" and registry.benchmark("minigo").available_at("reference")


# --- the feature planes ------------------------------------------------------------------------------
def _plane(x: np.ndarray, k: int) -> set[int]:
    return set(np.flatnonzero(x[k].ravel()).tolist())


def test_mlperf07_planes_of_a_hand_set_position():
    pos = HistoryPosition(5)
    for move in (1, 0, 12, 6):  # B b5, W a5, B c3, W b4 (point = row * 5 + column, row 0 on top)
        pos.play(move)
    # Black to move; White's a5 stone is in atari (its liberty a4 = 5), Black's b5 has one liberty (c5 = 2)
    [x] = mlperf07_planes([pos])
    assert x.shape == (13, 5, 5) and x.dtype == np.uint8
    mine, theirs = [_plane(x, k) for k in range(0, 8, 2)], [_plane(x, k) for k in range(1, 8, 2)]
    assert mine == [{1, 12}, {1, 12}, {1}, {1}]  # now, then 1, 2 and 3 moves before
    assert theirs == [{0, 6}, {0}, {0}, set()]
    assert x[8].all()  # Black to play
    assert _plane(x, 9) == {0, 1} and _plane(x, 10) == set() and _plane(x, 11) == {6}  # 1, 2, 3 liberties
    assert _plane(x, 12) == {5}  # playing a4 captures a5


def test_mlperf07_planes_repeat_the_oldest_board_and_follow_the_player_to_move():
    pos = HistoryPosition(5)
    pos.play(12)  # Black c3; White to move
    [x] = mlperf07_planes([pos])
    assert not x[8].any()  # White to play
    assert [_plane(x, k) for k in range(1, 8, 2)] == [{12}, set(), set(), set()]  # Black's stone is "theirs"
    assert not x[0:8:2].any()
    copy = pos.copy()
    copy.play(7)
    assert pos.history == ([0] * 25,) and len(copy.history) == 2  # a copy's moves leave the original alone


# --- the bootstrap and target files ------------------------------------------------------------------
def test_tf_layout_file_round_trips_into_the_network(tmp_path):
    torch.manual_seed(0)
    src = reference_gonet()
    for m in src.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
    arrays = reference_arrays(src)
    assert set(arrays) == set(tf_layout()) and arrays["conv2d/kernel"].shape == (3, 3, 13, 64)
    write_arrays(arrays, tmp_path / "m.safetensors")
    dst = reference_gonet()
    load_reference_weights(dst, tmp_path / "m.safetensors", what="target")
    x = (torch.rand(3, 13, 19, 19) < 0.3).float()
    for a, b in zip(src.eval()(x), dst.eval()(x), strict=True):
        assert torch.equal(a, b)


def _broken(tmp_path, edit):
    arrays = reference_arrays(reference_gonet())
    edit(arrays)
    path = tmp_path / "bad.safetensors"
    write_arrays(arrays, path)
    return path


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda a: a.pop("conv2d_7/kernel"), "lacks the tensor(s) conv2d_7/kernel"),
        (lambda a: a.__setitem__("dense/kernel", np.zeros((722, 361), np.float32)), "tensor dense/kernel has shape"),
        (lambda a: a.__setitem__("conv2d_15/kernel", np.zeros((1,), np.float32)), "holds tensor 'conv2d_15/kernel'"),
        (lambda a: a["dense_2/bias"].__setitem__(0, np.nan), "tensor dense_2/bias holds NaN"),
    ],
)
def test_a_faulty_model_file_names_the_file_and_the_tensor(tmp_path, edit, message):
    path = _broken(tmp_path, edit)
    with pytest.raises(DataError, match="target") as e:
        load_reference_weights(reference_gonet(), path, what="the target model")
    assert message in str(e.value) and str(path) in str(e.value)


def test_a_file_that_is_not_safetensors_is_refused_without_being_run(tmp_path):
    path = tmp_path / "target.safetensors"
    path.write_bytes(b"\x80\x04cos\nsystem\n(S'echo hi'\ntR.")  # a pickle that would run a command
    with pytest.raises(DataError, match="cannot be read as a safetensors file"):
        load_reference_weights(reference_gonet(), path, what="the target model")
    with pytest.raises(DataError, match="is missing"):
        load_reference_weights(reference_gonet(), tmp_path / "none.safetensors", what="the target model")


def test_converter_writes_the_tf_checkpoints_variables_and_checks_them(tmp_path, monkeypatch):
    from trainperf.workloads.minigo import convert

    arrays = reference_arrays(reference_gonet())
    ckpt = dict(arrays) | {"global_step": np.int64(7), "conv2d/kernel/Momentum": np.zeros((3, 3, 13, 64))}

    class Reader:  # tf.train.load_checkpoint's reader, as TF 1.15 and 2.x give it
        def get_variable_to_shape_map(self):
            return {k: list(np.shape(v)) for k, v in ckpt.items()}

        def get_tensor(self, name):
            return ckpt[name]

    fake_tf = types.SimpleNamespace(train=types.SimpleNamespace(load_checkpoint=lambda prefix: Reader()))
    monkeypatch.setitem(sys.modules, "tensorflow", fake_tf)
    out = tmp_path / "target.safetensors"
    assert convert.main(["ml_perf/target/19/target", str(out)]) == 0
    net = reference_gonet()
    load_reference_weights(net, out, what="target")
    assert torch.equal(net.policy_fc.weight, torch.from_numpy(arrays["dense/kernel"].T))
    del ckpt["dense_1/bias"]
    with pytest.raises(
        DataError, match=r"minigo checkpoint ml_perf/target/19/target lacks the tensor\(s\) dense_1/bias"
    ):
        convert.convert("ml_perf/target/19/target", tmp_path / "x.safetensors")


# --- the search --------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", range(8))
def test_inference_symmetry_is_undone_on_the_policy(k):
    board = np.arange(2 * 19 * 19, dtype=np.float32).reshape(2, 19, 19)
    assert np.array_equal(ref._untransform(ref._transform(board, k), k), board)


def counting_evaluator(calls: list[int]):
    def evaluate(positions, syms):
        calls.append(len(positions))
        n = positions[0].size ** 2 + 1
        return np.full((len(positions), n), 1.0 / n, np.float32), np.zeros(len(positions), np.float32)

    return evaluate


def test_search_batches_up_to_four_virtual_loss_leaves_of_every_game_per_call():
    calls: list[int] = []
    cfg = ref.SearchConfig(virtual_losses=4)
    roots = [ref.Node(HistoryPosition(9), cfg.max_game_moves) for _ in range(5)]
    ref.search(roots, [12] * 5, counting_evaluator(calls), cfg, np.random.default_rng(0), noise=[True] * 5)
    assert calls[0] == 5  # the roots, in one call
    # 4 leaves of each of the 5 games per round; the root's own evaluation is its first readout and the
    # target (12) is checked before each leaf as the reference's SelectLeaves does: 1 + 4 + 4 + 4 = 13
    assert calls[1:] == [20, 20, 20]
    assert all(r.N == 13 and r.n.sum() == 12 for r in roots)
    assert all(not r.children[i].pending for r in roots for i in r.children)  # every virtual loss taken back


def test_target_pruning_cuts_visits_to_what_their_action_score_justifies():
    root = ref.Node(HistoryPosition(9), 722)
    root.moves, root.prior = np.array([0, 1, 2]), np.array([0.5, 0.3, 0.2])
    # Q = w / (1 + n) = 0.1, -0.5, 0.0; the root's own N = 83 (its expansion and the 82 readouts below it)
    root.n, root.w, root.N = np.array([50.0, 30.0, 2.0]), np.array([5.1, -15.5, 0.0]), 83
    # ReshapeFinalVisits by hand: U_scale = 2 (log((1 + 83 + 19652) / 19652) + 1.25) = 2.5085; the best
    # move's score 0.1 + 2.5085 sqrt(1 + 83) 0.5 / 51 = 0.3254; a move keeps floor(U_scale P sqrt(83) / (0.3254 - Q))
    # visits at most: move 1 (Q -0.5) floor(8.31) = 8, move 2 (Q 0) floor(14.05) = 14 > its 2 visits.
    assert ref.prune_visits(root).tolist() == [50.0, 8.0, 2.0]


def test_self_play_records_full_moves_only_and_scores_every_game():
    cfg = ref.SearchConfig(num_readouts=4, fastplay_readouts=2, fastplay_frequency=0.5, max_game_moves=10)
    games = ref.self_play(counting_evaluator([]), games=3, size=9, komi=7.5, cfg=cfg, seed=3)
    assert games.games == 3 and games.moves <= 30
    assert 0 < len(games.outcome) < games.moves  # about half the moves are fast: not training examples
    assert games.features.shape[1:] == (13, 9, 9) and games.features.dtype == np.uint8
    assert np.allclose(games.policy.sum(1), 1.0) and set(np.unique(games.outcome)) <= {-1.0, 1.0}


def test_match_alternates_colours_and_counts_wins():
    cfg = ref.SearchConfig(max_game_moves=6)
    result = ref.play_match(
        counting_evaluator([]), counting_evaluator([]), games=4, size=9, komi=7.5, readouts=4, cfg=cfg, seed=0
    )
    assert result.games == 4 and result.black_games == 2 and 0 <= result.wins <= 4
    # six moves on an open 9x9 board and komi 7.5: White wins every game, so we win exactly our White games
    assert result.wins == 2 and result.black_wins == 0


# --- the workload --------------------------------------------------------------------------------------
def smoke_workload(tmp_path) -> MiniGoWorkload:
    from trainperf.harness.runner import dry_run_recipe
    from trainperf.workloads.minigo.data import write_smoke_fixture

    folder = tmp_path / "minigo" / "reference"
    folder.mkdir(parents=True)
    write_smoke_fixture(folder)
    recipe = dry_run_recipe(MiniGoWorkload, REFERENCE, REFERENCE_RECIPE, DistContext())
    w = MiniGoWorkload(REFERENCE, recipe, RunConfig(seed=1, smoke=True), data_dir=tmp_path, dist=DistContext())
    w.prepare()
    return w


def test_a_generation_self_plays_from_the_bootstrap_and_trains_on_a_sample_of_the_window(tmp_path):
    w = smoke_workload(tmp_path)
    assert w.recipe.min_selfplay_games_per_generation == SMOKE_OVERRIDES["min_selfplay_games_per_generation"]
    model = w.build_model()
    for a, b in zip(model.state_dict().values(), w.bootstrap_model.state_dict().values(), strict=True):
        assert torch.equal(a, b)  # the run starts from the bootstrap model
    batches = list(w.generation_batches(model, 1))  # the smoke's train_filter is 1: every example once
    examples = sum(len(g.outcome) for g in w.window)
    assert len(batches) == examples // w.local_batch_size  # floor(sample / batch) steps
    x, pi, z = batches[0]
    assert x.shape == (4, 13, 19, 19) and pi.shape == (4, 362) and z.shape == (4,)
    assert torch.allclose(pi.sum(1), torch.ones(4))
    loss = w.loss(model, batches[0])
    assert loss.ndim == 0 and torch.isfinite(loss)
    opt, _ = w.build_optimizer(model)
    no_decay = {id(p) for g in opt.param_groups if g["weight_decay"] == 0 for p in g["params"]}
    assert {n for n, p in model.named_parameters() if id(p) in no_decay} == {
        n for n, _ in model.named_parameters() if n.endswith(".bias")
    }  # biases and BN offsets: dual_net's L2 cost leaves out 'bias' and 'beta'
    assert w.hparams()["actual_selfplay_games_per_generation"] == 2
