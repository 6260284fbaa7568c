"""One optimizer step of each minigo network on fake data, the generation hook, the worker pool, the batched
search, and the reference's facts."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from stepping import dry_workload, one_step

from trainperf import registry, seeds
from trainperf.dist import DistContext
from trainperf.spec import RunConfig
from trainperf.workloads.minigo import MINI, REFERENCE_RECIPE, mcts
from trainperf.workloads.minigo.go import Position
from trainperf.workloads.minigo.gtp import GNUGO
from trainperf.workloads.minigo.model import mini_gonet, reference_gonet
from trainperf.workloads.minigo.workload import MiniGoWorkload, symmetry


def test_mini_network_one_step(tmp_path):
    _, value = one_step(dry_workload("minigo", "mini", tmp_path))
    assert value == {"win_rate": 0.0}  # a dry run plays no games


def test_reference_dry_run_uses_a_cpu_sized_batch(tmp_path):
    # The full-size step itself is tests/workloads/test_contract.py's.
    w = dry_workload("minigo", "reference", tmp_path)
    assert w.global_batch_size == MiniGoWorkload.DRY_RUN_LOCAL_BATCH  # the full-size network on a CPU-sized batch
    assert w.hparams()["train_batch_size"] == MiniGoWorkload.DRY_RUN_LOCAL_BATCH


def test_facts_import_without_torch():
    code = "import sys, trainperf.workloads.minigo; assert 'torch' not in sys.modules, 'torch imported'"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_reference_network_shape_and_closed_keys():
    net = reference_gonet().eval()
    policy, value = net(torch.zeros(2, 13, 19, 19))  # the v2.0 mlperf07 planes
    assert policy.shape == (2, 362) and value.shape == (2,)
    assert REFERENCE_RECIPE.min_selfplay_games_per_generation == 8192  # closed_minigo.yaml requires == 8192
    assert registry.benchmark("minigo").mlperf_rcps is False
    assert MINI.unit == "generations" and MINI.eval_points(registry.default_recipe("minigo", "mini"))[:2] == [1.0, 2.0]


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
    assert all(sum(r.n) == r.visits == 8 for r in roots)


def small_games(seed: int) -> mcts.Games:
    return mcts.self_play(
        mcts.network_evaluator(mini_gonet(5).eval()),
        games=4,
        size=5,
        komi=7.5,
        cfg=mcts.SearchConfig(playouts=2),
        seed=seed,
        temperature_moves=4,
    )


def test_self_play_produces_consistent_examples():
    games = small_games(1)
    assert games.games == 4 and len(games.features) == len(games.policy) == len(games.outcome)
    assert np.allclose(games.policy.sum(1), 1.0)
    assert set(np.unique(games.outcome)) <= {-1.0, 1.0}


def mini_workload(tmp_path, seed: int) -> MiniGoWorkload:
    """A real (not dry) mini workload without prepare(): neither GNU Go nor the workers are started."""
    recipe = registry.default_recipe("minigo", "mini")
    return MiniGoWorkload(MINI, recipe, RunConfig(seed=seed), data_dir=tmp_path, dist=DistContext())


def test_generation_batches_differ_within_a_generation_and_repeat_for_a_seed(tmp_path, monkeypatch):
    played = {1: small_games(1), 2: small_games(2)}  # stand-ins for two generations of self-play
    model = mini_gonet(5)

    def generations(seed: int) -> list[list[tuple[torch.Tensor, ...]]]:
        w = mini_workload(tmp_path, seed)
        monkeypatch.setattr(w, "_self_play", lambda model, generation: played[generation])
        out = [list(w.generation_batches(model, g)) for g in (1, 2)]
        assert len(w.window) == 2  # each generation's games joined the window
        return out

    first, second = generations(1)
    steps = registry.default_recipe("minigo", "mini").train_steps_per_generation
    assert len(first) == len(second) == steps
    assert all(x.shape == (256, 3, 5, 5) and p.shape == (256, 26) and z.shape == (256,) for x, p, z in first)
    distinct = {b[0].numpy().tobytes() + b[1].numpy().tobytes() for b in first}
    assert len(distinct) == len(first)  # every step of a generation trains on new positions
    again = generations(1)
    for a, b in zip(first + second, again[0] + again[1], strict=True):
        assert all(torch.equal(u, v) for u, v in zip(a, b, strict=True))  # the same seed draws the same batches
    assert not torch.equal(second[0][0], first[0][0])  # the next generation draws anew
    other = generations(2)
    assert not torch.equal(other[0][0][0], first[0][0])  # another seed draws other positions


def test_self_play_jobs_take_their_seeds_from_the_seed_scheme(tmp_path):
    w = mini_workload(tmp_path, seed=7)
    jobs = []

    class FakePool:
        def map(self, fn, items):
            jobs.extend(items)
            return [small_games(1) for _ in items]

    w._pool = FakePool()
    games = w._self_play(mini_gonet(5), 4)
    assert games.games == 4 * w.workers
    assert [job[5] for job in jobs] == [seeds.derive(7, seeds.STREAM_SELF_PLAY, 4, k) for k in range(w.workers)]
    assert all(job[3] * w.workers >= w.recipe.min_selfplay_games_per_generation for job in jobs)


def test_generation_batches_need_the_workers_and_train_batches_is_not_a_data_source(tmp_path):
    w = mini_workload(tmp_path, seed=1)
    with pytest.raises(RuntimeError, match="prepare"):
        next(iter(w.generation_batches(mini_gonet(5), 1)))
    batches = w.train_batches()  # taking the iterator is harmless (the harness does); drawing from it is not
    with pytest.raises(RuntimeError, match="generation_batches"):
        next(batches)


@pytest.mark.skipif(shutil.which(GNUGO) is None, reason="GNU Go is not installed (scripts/setup.sh)")
def test_close_terminates_the_worker_pool_and_is_idempotent(tmp_path):
    w = mini_workload(tmp_path, seed=1)
    w.prepare()  # checks GNU Go, starts one worker per core
    processes = list(w._pool._pool)
    assert len(processes) == w.workers and all(p.is_alive() for p in processes)
    w.close()
    assert w._pool is None and not any(p.is_alive() for p in processes)
    w.close()  # a second close does nothing


def _signal_dispositions(_: int) -> tuple[bool, bool]:
    import signal

    return signal.getsignal(signal.SIGTERM) == signal.SIG_DFL, signal.getsignal(signal.SIGINT) == signal.SIG_IGN


def test_workers_die_on_sigterm_even_when_the_run_turns_it_into_an_exception(tmp_path):
    """The CLI turns SIGTERM into an exception (a run ends on it like on Ctrl-C); a forked worker that kept
    that handler could survive Pool.terminate() and leave close() waiting for it (seen: a run hung after
    its run_stop). The workers reset SIGTERM to its default and ignore Ctrl-C, which the run handles."""
    import signal

    from trainperf.errors import Terminated

    def raising(signum, frame):
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, raising)
    try:
        w = mini_workload(tmp_path, seed=1)
        w.prepare()
        try:
            assert w._pool.map(_signal_dispositions, range(w.workers), chunksize=1) == [(True, True)] * w.workers
        finally:
            w.close()
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_symmetry_moves_planes_and_policy_together():
    x = np.zeros((1, 3, 5, 5), np.float32)
    x[0, 0, 0, 1] = 1
    pi = np.zeros((1, 26), np.float32)
    pi[0, 1] = 1
    for k in range(8):
        xs, ps = symmetry(x, pi, k, 5)
        assert np.flatnonzero(xs[0, 0].ravel()).tolist() == np.flatnonzero(ps[0, :25]).tolist()


def test_reference_dry_run_fails_ruleset_2_only_on_the_target(tmp_path):
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


def test_select_is_the_puct_formula():
    """Node.select loops over Python lists for speed: the same choice as the PUCT formula over arrays (ties
    to the first), on random statistics including unvisited moves."""
    rng = np.random.default_rng(0)
    for _ in range(300):
        node = mcts.Node(Position(5), 75)
        node.expand(rng.random(26).astype(np.float32))
        k = len(node.moves)
        n = rng.integers(0, 4, k).astype(np.float64) * (rng.random(k) < 0.7)
        w = rng.uniform(-1, 1, k) * n
        node.n, node.w, node.visits = n.tolist(), w.tolist(), int(n.sum())
        prior = np.asarray(node.prior)
        q = np.divide(w, n, out=np.zeros_like(w), where=n > 0)
        expected = int(np.argmax(q + 1.5 * prior * np.sqrt(n.sum() + 1) / (1 + n)))
        assert node.select(1.5) == expected
