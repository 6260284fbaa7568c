"""rnnt data: LibriSpeech's layout checked (when: tests/workloads/test_rnnt_order.py), the reference's features,
bucketing, the LR policy and the mini corpus's voice split."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import soundfile as sf
import torch

from trainperf import registry
from trainperf.errors import DataError
from trainperf.workloads.rnnt import data, fixture, generator
from trainperf.workloads.rnnt.workload import lr_policy


@pytest.fixture
def libri(tmp_path):
    fixture.write_smoke_fixture(tmp_path)
    return tmp_path / "LibriSpeech"


def test_scan_reads_the_layout(libri):
    utts = data.scan_subset(libri / "dev-clean")
    assert len(utts) == 4 and all(0.5 < u.seconds < 1.5 for u in utts)
    assert utts[0].transcript == fixture.SENTENCES[12 % len(fixture.SENTENCES)].lower()  # 174/50561 sorts first
    audio = data.read_audio(utts[0].path)
    assert audio.dtype == np.int16 and len(audio) == round(utts[0].seconds * data.SAMPLE_RATE)


def _chapter(libri):
    return libri / "dev-clean" / "84" / "121123"


def test_undecodable_audio_names_the_file(libri):
    bad = _chapter(libri) / "84-121123-0001.flac"
    bad.write_bytes(b"not a flac file at all" * 10)
    with pytest.raises(DataError, match=r"84-121123-0001\.flac: audio cannot be decoded"):
        data.scan_subset(libri / "dev-clean")


def test_transcript_line_without_its_utterance(libri):
    (_chapter(libri) / "84-121123-0001.flac").unlink()
    with pytest.raises(DataError, match=r"84-121123\.trans\.txt line 2: utterance 84-121123-0001 has no audio file"):
        data.scan_subset(libri / "dev-clean")


def test_utterance_without_its_transcript_line(libri):
    trans = _chapter(libri) / "84-121123.trans.txt"
    trans.write_text(trans.read_text().splitlines()[0] + "\n")
    with pytest.raises(DataError, match=r"84-121123-0001\.flac: no line for 84-121123-0001"):
        data.scan_subset(libri / "dev-clean")


def test_a_sample_rate_other_than_16k_is_refused(libri):
    path = _chapter(libri) / "84-121123-0000.flac"
    audio, _ = sf.read(path, dtype="int16")
    sf.write(path, audio[::2], 8000, format="FLAC")
    with pytest.raises(DataError, match=r"84-121123-0000\.flac: sample rate 8000 Hz, the reference's is 16000 Hz"):
        data.scan_subset(libri / "dev-clean")


def test_features_are_the_reference_s_shape():
    wave = (np.sin(np.arange(16000) / 7.0) * 8000).astype(np.int16)
    feats, lengths = data.Featurizer()([wave, wave[:8000]])
    # 16,000 samples -> 101 frames of 10 ms -> 34 stacked frames of 240 features
    assert feats.shape == (2, 34, 240) and lengths.tolist() == [34, 17]
    spec = torch.arange(12.0).reshape(2, 6)
    stacked = data.stack_frames(spec)
    assert stacked.shape == (6, 2) and stacked[:, 1].tolist() == [3.0, 9.0, 4.0, 10.0, 5.0, 11.0]


def test_spec_augment_masks_and_speed_perturbation_resamples():
    g = torch.Generator().manual_seed(0)
    spec = torch.ones(80, 300)
    masked = data.augment(spec, g)
    assert (masked == 0).any() and masked.shape == spec.shape
    audio = torch.randn(16000)
    # the reference's DALI pipeline decodes at U x 16 kHz and reads the result as 16 kHz audio: a factor U makes
    # the utterance U times as long (pipeline.py:185-186), so durations range over [0.85, 1.15] x the original
    assert len(data.perturb_speed(audio, 1.15)) == pytest.approx(16000 * 1.15, rel=0.004)
    assert len(data.perturb_speed(audio, 0.85)) == pytest.approx(16000 * 0.85, rel=0.004)
    assert len(data.perturb_speed(audio, 1.0123)) == pytest.approx(16000 * 1.0123, rel=0.004)


def test_bucketing_keeps_every_batch_full_and_similar_in_length():
    seconds = np.random.default_rng(0).uniform(1, 16, 1000)
    batches = data.bucket_batches(seconds, 32, 6, np.random.default_rng(1))
    assert len(batches) == 1000 // 32 and all(len(b) == 32 for b in batches)
    assert len(set(np.concatenate(batches).tolist())) == 31 * 32
    assert np.median([np.ptp(seconds[b]) for b in batches]) < 4


def test_lr_policy_is_the_reference_s():
    r = dataclasses.replace(
        registry.default_recipe("rnnt", "reference"),
        opt_learning_rate_warmup_epochs=2,
        opt_lamb_learning_rate_hold_epochs=1,
        opt_lamb_learning_rate_decay_poly_power=0.5,
    )
    f = lr_policy(r, steps_per_epoch=10)
    # the reference's train.py counts its first optimizer step as 1: (1 + 1) / (20 + 1), and its step 20 (our
    # 19) is at the full rate; its decay is gamma ** (epoch - 3) from its step 30, epoch 3 counted from 1
    assert f(0) == pytest.approx(2 / 21) and f(18) == pytest.approx(20 / 21)
    assert f(19) == f(20) == f(29) == 1.0
    assert f(30) == 0.5 and f(39) == 0.5 and f(40) == 0.25
    assert f(10_000) == pytest.approx(1e-5 / r.opt_base_learning_rate)


def test_mini_recipe_keeps_its_calibrated_warm_up_one_step_behind():
    mini = registry.default_recipe("rnnt", "mini")
    assert mini.opt_learning_rate_step_count_from_one is False
    r = dataclasses.replace(
        mini,
        opt_learning_rate_warmup_epochs=2,
        opt_lamb_learning_rate_hold_epochs=1,
        opt_lamb_learning_rate_decay_poly_power=0.5,
    )
    f = lr_policy(r, steps_per_epoch=10)
    assert f(0) == pytest.approx(1 / 21) and f(19) == pytest.approx(20 / 21)
    assert f(20) == f(29) == 1.0
    assert f(30) == 0.5 and f(39) == 0.5 and f(40) == 0.25


def test_mini_corpus_splits_voices():
    train, evaluation = generator.voices(np.random.default_rng(generator.GENERATOR_SEED))
    variant = lambda v: v.name.split("+")[-1]  # noqa: E731
    assert not {variant(v) for v in train} & {variant(v) for v in evaluation}
    assert len(train) == generator.TRAIN_SPEAKERS and len(evaluation) == generator.EVAL_SPEAKERS


def test_mini_corpus_is_prepared_in_librispeech_layout(data_dir):
    assert generator.verify_mini(data_dir, trust_cache=True) == []
    root = generator.mini_dir(data_dir)
    assert len(data.scan_subset(root / generator.EVAL_SUBSET)) == generator.EVAL_SPEAKERS * generator.EVAL_UTTERANCES
