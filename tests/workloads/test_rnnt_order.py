"""rnnt's data order and when the corpus is read: the reference recipe shuffles micro-batch x world groups as the
reference's BucketingSampler does (common/data/dali/sampler.py:65-105) and reads the corpus's transcripts,
durations and duration filter on the clock; the mini recipe keeps its calibrated order and reads them before."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from trainperf import registry, seeds
from trainperf.dist import DistContext
from trainperf.errors import DataError
from trainperf.spec import RunConfig
from trainperf.workloads.rnnt import data, fixture


def _workload(scale: str, rank: int = 0, world: int = 1, n: int = 110, data_dir: Path = Path("/nonexistent"), **set_):
    spec, recipe = registry.get_spec("rnnt", scale), registry.default_recipe("rnnt", scale)
    recipe = dataclasses.replace(recipe, **set_)
    dist = DistContext(rank=rank, world_size=world)
    w = registry.workload_class("rnnt")(spec, recipe, RunConfig(seed=7), data_dir=data_dir, dist=dist)
    seconds = np.random.default_rng(3).uniform(1.0, 16.0, n)
    w.train = [data.Utterance(Path(f"u{i}.flac"), "a", float(s)) for i, s in enumerate(seconds)]
    return w, seconds


def _indices(part):
    return [int(u.path.stem[1:]) for u in part]


def test_bucket_groups_drop_the_remainder_anywhere_and_keep_groups_of_similar_length():
    seconds = np.random.default_rng(0).uniform(1, 16, 1000)
    groups = data.bucket_groups(seconds, 32, 6, np.random.default_rng(1))
    assert len(groups) == 1000 // 32 and all(len(g) == 32 for g in groups)
    assert len(set(np.concatenate(groups).tolist())) == 31 * 32
    assert np.median([np.ptp(seconds[g]) for g in groups]) < 4
    # the reference drops the 8 left over at random positions of the joined order (sampler.py:80-87), not the
    # end of the longest bucket as bucket_batches does
    longest = set(np.argsort(seconds)[-167:].tolist())
    dropped = [
        set(range(1000)) - set(np.concatenate(data.bucket_groups(seconds, 32, 6, np.random.default_rng(s))))
        for s in range(10)
    ]
    assert any(d - longest for d in dropped)


def test_reference_steps_take_shuffled_micro_batch_x_world_groups_and_ranks_interleave():
    # 16 utterances a step over 2 ranks and 2 micro-batches: groups of 8 (micro-batch 4 x world 2)
    parts = {}
    for rank in (0, 1):
        w, seconds = _workload("reference", rank, 2, global_batch_size=16, gradient_accumulation_steps=2)
        assert w.local_batch_size == 4 and w.steps_per_epoch == 6
        it = w._rank_parts()
        parts[rank] = [next(it) for _ in range(14)]
    groups = data.bucket_groups(seconds, 8, 6, seeds.numpy_rng(7, seeds.STREAM_SHUFFLE, 0))
    assert len(groups) == 13  # 110 // 8; 6 steps of 2 groups an epoch
    for rank in (0, 1):
        got = [(e, _indices(p)) for e, p in parts[rank]]
        assert got[:13] == [(0, g[rank::2].tolist()) for g in groups]  # sampler.py:96-100: rank r takes r, r + 2, ...
        assert got[13][0] == 1  # the stream runs on into the next epoch's order, as DALI's reader does
    # a step's two micro-batches are two groups, not two halves of one contiguous run of the joined order
    today = data.bucket_batches(seconds, 16, 6, seeds.numpy_rng(7, seeds.STREAM_SHUFFLE, 0))
    first_step = sorted(_indices(parts[0][0][1] + parts[0][1][1] + parts[1][0][1] + parts[1][1][1]))
    assert first_step != sorted(today[0].tolist())


def test_mini_order_is_the_calibrated_one():
    """The mini recipe's micro-batches are those of the code it was calibrated with: whole global batches of
    bucket_batches shuffled, each rank its contiguous slice of each micro-batch."""
    assert registry.default_recipe("rnnt", "mini").data_bucket_micro_batch_groups is False
    assert registry.default_recipe("rnnt", "reference").data_bucket_micro_batch_groups is True
    for rank, world in ((0, 1), (1, 2)):
        w, seconds = _workload("mini", rank, world)
        gb, n = w.global_batch_size, w.local_batch_size
        expected = []
        for epoch in (0, 1):
            rng = seeds.numpy_rng(7, seeds.STREAM_SHUFFLE, epoch)
            for batch in data.bucket_batches(seconds, gb, w.recipe.data_train_num_buckets, rng):
                for k in range(0, gb, n * world):
                    expected.append((epoch, batch[k + rank * n : k + (rank + 1) * n].tolist()))
        it = w._rank_parts()
        assert [(e, _indices(p)) for e, p in (next(it) for _ in expected)] == expected


def test_reference_reads_the_corpus_on_the_clock(tmp_path):
    """prepare() (before run_start) checks the folders; the transcripts, FLAC headers and the duration filter
    are read by load_data(), after run_start, as the reference reads its manifests (train.py:232, then
    data_loader.py:94-100): bad audio ends the run there, with the file named."""
    root = tmp_path / "rnnt" / "reference"
    fixture.write_smoke_fixture(root)
    (root / "LibriSpeech" / "train-other-500" / "20" / "205" / "20-205-0002.flac").write_bytes(b"\0" * 100)
    spec, recipe = registry.get_spec("rnnt", "reference"), registry.default_recipe("rnnt", "reference")
    w = registry.workload_class("rnnt")(
        spec, recipe, RunConfig(seed=1, smoke=True), data_dir=tmp_path, dist=DistContext()
    )
    w.prepare()
    assert w.train == [] and w.eval == []
    with pytest.raises(DataError, match=r"20-205-0002\.flac: audio cannot be decoded"):
        w.load_data()


def test_reference_vocabulary_is_trained_on_every_training_transcript(tmp_path):
    """scripts/create_sentencepieces.sh:16 reads every training transcript, before the duration filter."""
    fixture.write_smoke_fixture(tmp_path / "rnnt" / "reference")
    spec = registry.get_spec("rnnt", "reference")
    recipe = dataclasses.replace(registry.default_recipe("rnnt", "reference"), data_train_max_duration=0.01)
    w = registry.workload_class("rnnt")(
        spec, recipe, RunConfig(seed=1, smoke=True), data_dir=tmp_path, dist=DistContext()
    )
    text = w._vocabulary_text()
    assert len(text) == 10 and set(text) <= {s.lower() for s in fixture.SENTENCES}
    with pytest.raises(DataError, match="no training utterance of at most 0.01 s"):
        w._scan()  # the filter leaves nothing: the vocabulary's text was read without it
