"""minigo's reference scale: the bootstrap window and each generation's training sample, as the v2.0 reference
builds them (``ml_perf/make_checkpoint.py:131-157`` copies the previous run's last 5 generations of games;
``ml_perf/train_loop.py:165-181`` samples the newest 5; ``cc/sample_records.cc:105`` keeps each example with
probability ``sample_frac``; ``train.py:226`` trains floor(examples / batch) steps). Synthetic games: no model
is run."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from trainperf import seeds
from trainperf.dist import DistContext
from trainperf.errors import DataError
from trainperf.spec import RunConfig
from trainperf.workloads.minigo import REFERENCE, REFERENCE_RECIPE, bootstrap
from trainperf.workloads.minigo import reference_search as ref
from trainperf.workloads.minigo.workload import MiniGoWorkload


def generation(examples: int, tag: int) -> ref.Games:
    """``examples`` positions of one generation, each marked with ``tag`` in its first plane."""
    feats = np.zeros((examples, 13, 19, 19), np.uint8)
    feats[:, 0, 0, 0] = tag
    policy = np.full((examples, 362), 1 / 362, np.float32)
    return ref.Games(feats, policy, np.ones(examples, np.float32), black_wins=1, games=2, resigned=0, moves=7)


def workload() -> MiniGoWorkload:
    from trainperf.harness.runner import dry_run_recipe

    recipe = dry_run_recipe(MiniGoWorkload, REFERENCE, REFERENCE_RECIPE, DistContext())  # batch 4, window 5
    return MiniGoWorkload(REFERENCE, recipe, RunConfig(seed=3), data_dir=None, dist=DistContext())


def test_generation_one_trains_on_a_window_of_five_bootstrap_generations_and_later_ones_replace_the_oldest(
    monkeypatch,
):
    w = workload()
    assert w.recipe.window_generations == 5 and w.local_batch_size == 4
    boot = [generation(40, tag) for tag in range(1, 6)]
    w.bootstrap_games = boot
    hp = w.hparams()
    assert (hp["trainperf_bootstrap_generations"], hp["trainperf_bootstrap_games"]) == (5, 10)
    assert hp["trainperf_bootstrap_examples"] == 200
    monkeypatch.setattr(ref, "self_play", lambda *a, **k: pytest.fail("generation 1 plays no self-play"))
    batches = list(w.generation_batches(None, 1))
    assert w.window == boot
    # Each of the window's 200 examples is kept with probability 0.3 (a binomial count, not 60), then
    # floor(kept / 4) steps: the same draws as the workload's stream.
    kept = int((seeds.numpy_rng(3, seeds.STREAM_WINDOW, 1).random(200) < 0.3).sum())
    assert kept != 60 and len(batches) == kept // 4
    seen = {int(t) for x, _, _ in batches for t in x[:, 0].amax(dim=(1, 2))}
    assert seen == {1, 2, 3, 4, 5}  # every bootstrap generation is in the sample
    new = generation(40, 6)
    monkeypatch.setattr(w, "_reference_self_play", lambda model, generation: new)
    list(w.generation_batches(None, 2))
    assert w.window == [*boot[1:], new]  # the oldest bootstrap generation leaves the window


def test_the_bootstrap_file_holds_the_window_and_refuses_one_of_another_size(tmp_path, monkeypatch):
    recipe = dataclasses.replace(REFERENCE_RECIPE, min_selfplay_games_per_generation=2, window_generations=3)
    played: list[int] = []

    def fake_self_play(evaluate, *, games: int, size: int, komi: float, cfg, seed: int) -> ref.Games:
        played.append(seed)
        return generation(3 + len(played), len(played))

    monkeypatch.setattr(ref, "self_play", fake_self_play)
    monkeypatch.setattr(ref, "network_evaluator", lambda model, device: None)

    class Model:
        def to(self, device):
            return self

        def eval(self):
            return self

    path = tmp_path / bootstrap.BOOTSTRAP_GAMES_FILE
    bootstrap.write_bootstrap_games(path, Model(), recipe)
    assert played == [bootstrap.BOOTSTRAP_SEED + k for k in range(3)]  # one seed per generation
    bootstrap.check_bootstrap_games(path, size=19, games=2, generations=3)
    window = bootstrap.read_bootstrap_games(path, size=19)
    assert [len(g.outcome) for g in window] == [4, 5, 6] and [g.games for g in window] == [2, 2, 2]
    assert [int(g.features[0, 0, 0, 0]) for g in window] == [1, 2, 3] and window[0].moves == 7
    with pytest.raises(DataError, match=r"1 generation\(s\).*needs 5 of 2 on 19x19.*python -m trainperf"):
        one = tmp_path / "one.npz"
        with np.load(path) as data:
            arrays = {k: data[k] for k in data.files}
        arrays |= {"examples": arrays["examples"][:1], "counts": arrays["counts"][:1]}
        arrays["settings"] = np.array(json.dumps({**json.loads(str(arrays["settings"])), "generations": 1}))
        np.savez(one, **arrays)
        bootstrap.check_bootstrap_games(one, size=19, games=2, generations=5)
