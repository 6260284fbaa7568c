"""One optimizer step of each minigo network on fake data, the batched search, and the reference's facts."""

from __future__ import annotations

import numpy as np
import torch

from trainperf.harness.dist import DistContext
from trainperf.spec import RunConfig
from trainperf.workloads.minigo import mcts
from trainperf.workloads.minigo.go import Position
from trainperf.workloads.minigo.model import mini_gonet, reference_gonet
from trainperf.workloads.minigo.workload import MINI, REFERENCE, MiniGoWorkload, symmetry


def one_step(spec, tmp_path) -> None:
    w = MiniGoWorkload(spec, RunConfig(seed=3, dry_run=True), data_dir=tmp_path, dist=DistContext())
    w.prepare()
    model = w.build_model()
    opt, sched = w.build_optimizer(model)
    before = [p.detach().clone() for p in model.parameters()]
    loss = w.train_steps(model, opt, sched, 1, lambda samples, loss: None)
    assert np.isfinite(loss)
    changed = sum(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert changed > 0
    assert set(w.hparams()) >= set(spec.hparam_keys)
    assert w.steps_per_epoch == 1 and spec.eval_every_epochs == 1  # one harness block = one generation


def test_mini_network_one_step(tmp_path):
    one_step(MINI, tmp_path)


def test_reference_network_one_step_at_full_size(tmp_path):
    one_step(REFERENCE, tmp_path)


def test_reference_network_shape_and_closed_keys():
    net = reference_gonet().eval()
    policy, value = net(torch.zeros(2, 17, 19, 19))
    assert policy.shape == (2, 362) and value.shape == (2,)
    hp = MiniGoWorkload.REFERENCE_RECIPE
    assert hp["min_selfplay_games_per_generation"] == 8192  # closed_minigo.yaml requires == 8192


def test_search_batches_all_games_into_one_network_call():
    calls = []
    net = mini_gonet(5).eval()
    base = mcts.network_evaluator(net)

    def counting(positions):
        calls.append(len(positions))
        return base(positions)

    roots = [mcts.Node(Position(5), 75) for _ in range(6)]
    mcts.search(roots, counting, mcts.SearchConfig(playouts=8), np.random.default_rng(0))
    assert calls[0] == 6 and len(calls) == 1 + 8  # root expansion, then one batch per playout round
    assert all(c == 6 for c in calls)
    assert all(r.n.sum() == 8 for r in roots)


def test_self_play_produces_consistent_examples():
    games = mcts.self_play(
        mcts.network_evaluator(mini_gonet(5).eval()),
        games=4,
        size=5,
        komi=7.5,
        cfg=mcts.SearchConfig(playouts=4),
        seed=1,
        temperature_moves=4,
    )
    assert games.games == 4 and len(games.features) == len(games.policy) == len(games.outcome)
    assert np.allclose(games.policy.sum(1), 1.0)
    assert set(np.unique(games.outcome)) <= {-1.0, 1.0}


def test_training_batches_differ_within_a_generation_and_repeat_for_a_seed(tmp_path):
    import dataclasses

    w = MiniGoWorkload(MINI, RunConfig(seed=1, dry_run=True), data_dir=tmp_path, dist=DistContext())
    w.prepare()  # a dry run starts neither GNU Go nor the workers
    w.config = dataclasses.replace(w.config, dry_run=False)
    w.window = [
        mcts.self_play(
            mcts.network_evaluator(mini_gonet(5).eval()),
            games=4,
            size=5,
            komi=7.5,
            cfg=mcts.SearchConfig(playouts=2),
            seed=s,
            temperature_moves=4,
        )
        for s in (1, 2)
    ]
    batches = list(w.train_loader(3))
    assert len(batches) == w.recipe["train_steps_per_generation"]
    assert all(x.shape == (w.global_batch_size, 3, 5, 5) for x, _, _ in batches)
    distinct = {b[0].numpy().tobytes() + b[1].numpy().tobytes() for b in batches}
    assert len(distinct) == len(batches)  # every step of a generation trains on new positions
    again = list(w.train_loader(3))
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(batches, again, strict=True))
    assert not torch.equal(next(iter(w.train_loader(4)))[0], batches[0][0])  # the next generation draws anew


def test_symmetry_moves_planes_and_policy_together():
    x = np.zeros((1, 3, 5, 5), np.float32)
    x[0, 0, 0, 1] = 1
    pi = np.zeros((1, 26), np.float32)
    pi[0, 1] = 1
    for k in range(8):
        xs, ps = symmetry(x, pi, k, 5)
        assert np.flatnonzero(xs[0, 0].ravel()).tolist() == np.flatnonzero(ps[0, :25]).tolist()


def test_reference_dry_run_fails_ruleset_2_only_on_the_target(tmp_path):
    import subprocess
    import sys

    from trainperf.rules.compliance import check_log, is_target_only_failure

    out = tmp_path / "o"
    r = subprocess.run(
        [sys.executable, "-m", "trainperf", "run", "minigo", "--scale", "reference", "--dry-run", "--out", out],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    [log] = list((out / "results").rglob("result_0.txt"))
    res = check_log(log)
    assert res.scale == "reference" and res.ruleset == "2.0.0"
    assert is_target_only_failure(res), res.problems
    assert '"min_selfplay_games_per_generation"' in log.read_text()
