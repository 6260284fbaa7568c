"""rnnt's features and decoding at the reference scale as the reference makes them (mlcommons/training a0671ab8
rnn_speech_recognition/pytorch): each mel channel over its population standard deviation (common/data/dali/
pipeline.py:115, :207), time masks at most round(0.03 * frames) wide starting anywhere in the padded batch
(common/data/features.py:96-103), the 300-symbol cap checked before each frame (rnnt/decoder.py:94-96); the mini
scale keeps its calibrated normalization and cap."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from trainperf import registry
from trainperf.dist import DistContext
from trainperf.spec import RunConfig
from trainperf.workloads.rnnt import data
from trainperf.workloads.rnnt.model import greedy_decode
from trainperf.workloads.rnnt.workload import FLAVOURS


def _featurizer(scale: str) -> data.Featurizer:
    spec, recipe = registry.get_spec("rnnt", scale), registry.default_recipe("rnnt", scale)
    w = registry.workload_class("rnnt")(
        spec, recipe, RunConfig(seed=7), data_dir=Path("/nonexistent"), dist=DistContext(rank=0, world_size=1)
    )
    return w.featurizer


def _audio() -> torch.Tensor:
    rng = np.random.default_rng(0)
    t = np.arange(8000) / 16000.0
    return torch.from_numpy((0.3 * np.sin(2 * np.pi * 440 * t) + 0.05 * rng.standard_normal(8000)).astype(np.float32))


def test_reference_features_divide_each_channel_by_its_population_std():
    audio = _audio()
    spec = _featurizer("reference").log_mel(audio, torch.Generator().manual_seed(1))
    # DALI's Normalize(axes=[1]) with ddof 0 and epsilon 0: every channel has mean 0 and population std 1
    assert torch.allclose(spec.mean(dim=1), torch.zeros(80), atol=1e-5)
    assert torch.allclose(spec.std(dim=1, correction=0), torch.ones(80), atol=1e-5)
    # 51 frames: the sample std (N - 1), as before this change, gives sqrt(50/51) of it
    assert not torch.allclose(spec.std(dim=1), torch.ones(80), atol=1e-3)


def test_the_mini_features_keep_their_calibrated_normalization():
    audio = _audio()
    spec = _featurizer("mini").log_mel(audio, torch.Generator().manual_seed(1))
    g = torch.Generator().manual_seed(1)
    raw = audio + data.DITHER * torch.randn(audio.shape, generator=g)
    raw = torch.cat([raw[:1], raw[1:] - data.PREEMPH * raw[:-1]])
    log = torch.log(data.Featurizer().mel(raw) + 1e-20)
    mean, std = log.mean(dim=1, keepdim=True), log.std(dim=1, keepdim=True)
    assert torch.equal(spec, (log - mean) / (std + 1e-5))


def test_time_masks_round_their_width_and_start_anywhere_in_the_padded_batch(monkeypatch):
    monkeypatch.setitem(data.SPEC_AUGMENT, "freq_n", 0)
    monkeypatch.setitem(data.SPEC_AUGMENT, "time_n", 1)
    g = torch.Generator().manual_seed(0)
    widths, outside = set(), 0
    for _ in range(300):
        masked = data.augment(torch.ones(80, 50), g, padded_frames=200)
        zero = (masked == 0).all(dim=0)
        widths.add(int(zero.sum()))
        outside += int(not zero.any())
    # 0.03 * 50 = 1.5: the reference's int(round(1.5)) = 2 (int(1.5) = 1 allowed at most 1 frame)
    assert max(widths) == 2
    # a mask that starts past this utterance's 50 frames falls on the batch's padding, as in the reference
    assert outside > 150
    g = torch.Generator().manual_seed(0)
    own = [data.augment(torch.ones(80, 50), g) for _ in range(100)]
    assert sum(int(not (m == 0).all(dim=0).any()) for m in own) < 50


def test_a_training_batch_masks_its_utterances_over_the_longest_one(monkeypatch):
    monkeypatch.setitem(data.SPEC_AUGMENT, "freq_n", 0)
    monkeypatch.setitem(data.SPEC_AUGMENT, "time_n", 1)
    seen = []
    real = data.augment

    def spy(spec, generator=None, *, padded_frames=None):
        seen.append((spec.shape[1], padded_frames))
        return real(spec, generator, padded_frames=padded_frames)

    monkeypatch.setattr(data, "augment", spy)
    wave = (np.sin(np.arange(16000) / 7.0) * 8000).astype(np.int16)
    _, lengths = data.Featurizer()([wave, wave[:8000]], spec_augment=True)
    (long_frames, long_pad), (short_frames, short_pad) = seen
    assert short_frames < long_frames == long_pad == short_pad and lengths.tolist() == [34, 17]


class _AlwaysSpeaks:
    """A transducer whose joint always prefers symbol 0 to the blank (1): it emits at every chance."""

    blank = 1

    def encode(self, feats, lengths):
        return feats, lengths

    def predict(self, labels, state=None, batch=None):
        b = batch if labels is None else labels.shape[0]
        return torch.zeros(b, 1, 2), (torch.zeros(1, b, 2),)

    def joint(self, f, g):
        out = torch.zeros(f.shape[0], 1, 1, 2)
        out[..., 0] = 1.0
        return out


def test_the_reference_checks_its_300_symbol_cap_before_each_frame():
    feats, lengths = torch.zeros(1, 20, 3), torch.tensor([20])
    kwargs = {"max_symbols_per_step": 30, "max_symbols": 300}
    # the reference's decoder stops once an utterance holds more than 300 symbols, checked as a frame begins:
    # 30 a frame, 300 after frame 10, 330 after frame 11, then no more
    ref = greedy_decode(
        _AlwaysSpeaks(), feats, lengths, cap_before_frames=FLAVOURS["reference"].cap_before_frames, **kwargs
    )
    mini = greedy_decode(
        _AlwaysSpeaks(), feats, lengths, cap_before_frames=FLAVOURS["mini"].cap_before_frames, **kwargs
    )
    assert len(ref[0]) == 330 and len(mini[0]) == 300
