"""The rnnt models: the full reference RNN-T (parameter count, MLPerf's tensor names), one step of the mini
model, greedy decoding and WER, and a reference smoke run on a tiny LibriSpeech fixture through the real loader."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from stepping import dry_workload, one_step
from test_contract import official_tensor_names

from trainperf import registry
from trainperf.dist import DistContext
from trainperf.harness.runner import dry_run_recipe
from trainperf.spec import RunConfig
from trainperf.workloads.rnnt import fixture, model
from trainperf.workloads.rnnt.workload import FLAVOURS


def test_reference_model_has_the_reference_s_49m_parameters():
    with torch.device("meta"):
        m = model.RNNT(FLAVOURS["reference"].model)
    # pre_rnn 13,582,336 + post_rnn 29,384,704 + pred_embed 523,776 + dec_rnn 4,202,496 + joint 1,312,768
    assert sum(p.numel() for p in m.parameters()) == 49_006_080
    # the count the scaling model all-reduces is this model's (every parameter: no table is sharded)
    assert registry.benchmark("rnnt").specs["reference"].allreduced_parameters == 49_006_080
    with torch.device("meta"):
        mini = model.RNNT(FLAVOURS["mini"].model)
    assert sum(p.numel() for p in mini.parameters()) == registry.benchmark("rnnt").specs["mini"].allreduced_parameters
    assert m.pred_embed.weight.shape == (1023, 512) and m.joint_net[-1].out_features == 1024


def test_tensor_names_match_the_v2_closed_rule_file(tmp_path):
    w = dry_workload("rnnt", "reference", tmp_path)
    assert sorted(w.reference_tensor_names(None)) == sorted(official_tensor_names("rnnt"))
    top = {name.split(".")[0] for name, _ in model.RNNT(FLAVOURS["mini"].model).named_parameters()}
    assert top == set(official_tensor_names("rnnt"))


def test_mini_model_one_step(tmp_path):
    one_step(dry_workload("rnnt", "mini", tmp_path))


def test_greedy_decoding_stops_at_the_symbol_limits():
    torch.manual_seed(0)
    m = model.RNNT(FLAVOURS["mini"].model).eval()
    with torch.no_grad():  # a joint that never emits the blank
        m.joint_net[-1].bias[-1] = -1e4
    feats, lengths = torch.randn(3, 12, 240), torch.tensor([12, 8, 2])
    hyps = model.greedy_decode(m, feats, lengths, max_symbols_per_step=2, max_symbols=10)
    # encoder frames 6, 4, 1 (time stacking by 2): two symbols per frame, at most 10 in all
    assert [len(h) for h in hyps] == [10, 8, 2]


def _smoke_workload(tmp_path):
    fixture.write_smoke_fixture(tmp_path / "rnnt" / "reference")
    cls = registry.workload_class("rnnt")
    spec = registry.get_spec("rnnt", "reference")
    dist = DistContext()
    recipe = dry_run_recipe(cls, spec, registry.default_recipe("rnnt", "reference"), dist)
    return cls(spec, recipe, RunConfig(seed=1, smoke=True), data_dir=tmp_path, dist=dist)


def test_wer_is_jiwer_s_over_the_whole_evaluation_set(tmp_path, monkeypatch):
    w = _smoke_workload(tmp_path)
    w.prepare()
    w.load_data()
    m = model.RNNT(dataclasses.replace(FLAVOURS["reference"].model, enc_n_hid=16, pred_n_hid=8, joint_n_hid=8))
    texts = [u.transcript for u in w.eval]
    perfect = [w.sp.encode(t) for t in texts]
    monkeypatch.setattr(
        "trainperf.workloads.rnnt.workload.greedy_decode", lambda net, feats, *a, **k: perfect[: feats.shape[0]]
    )
    assert w.evaluate(m) == {"wer": 0.0}
    # one word dropped from the first utterance: 1 error over all reference words
    perfect[0] = w.sp.encode(" ".join(texts[0].split()[1:]))
    assert w.evaluate(m)["wer"] == pytest.approx(1 / sum(len(t.split()) for t in texts))


def test_reference_smoke_run_on_a_tiny_librispeech(tmp_path):
    w = _smoke_workload(tmp_path)
    w.prepare()  # the vocabulary is trained from the fixture's transcripts, the reference's way
    assert (tmp_path / "rnnt" / "reference" / "sentencepieces" / "librispeech1023.model").is_file()
    w.load_data()
    assert (w.train_samples, w.eval_samples) == (10, 4)
    torch.manual_seed(0)
    m = w.build_model()
    opt, sched = w.build_optimizer(m)
    batch = next(w.train_batches())
    assert batch[0].shape[0] == w.local_batch_size == 2 and batch[0].shape[2] == 240
    before = [p.detach().clone() for p in m.parameters()]
    opt.zero_grad()
    w.loss(m, batch).backward()
    opt.step()
    assert any(not torch.equal(a, b) for a, b in zip(before, m.parameters(), strict=True))
    wer = w.evaluate(m)["wer"]
    assert wer >= 0 and w.ema is not None  # evaluated with the EMA of the weights (model_eval_ema_factor 0.999)


def test_mini_recipe_keeps_each_utterance_s_features_across_epochs(data_dir):
    """The mini recipe has no speed perturbation and no SpecAugment, so an utterance's training features are
    computed once and reused; the reference recipe's change every epoch."""
    spec, recipe = registry.get_spec("rnnt", "mini"), registry.default_recipe("rnnt", "mini")
    assert recipe.data_spec_augment is False
    assert recipe.data_speed_perturbaton_min == recipe.data_speed_perturbaton_max == 1.0
    w = registry.workload_class("rnnt")(spec, recipe, RunConfig(seed=1), data_dir=data_dir, dist=DistContext())
    w.prepare()
    w.train = w.train[: 2 * recipe.global_batch_size]  # two batches an epoch
    it = w.train_batches()
    first = [next(it) for _ in range(2)]
    second = [next(it) for _ in range(2)]
    assert len(w.feature_cache) == len(w.train)

    def by_length(batches):  # the features of each utterance, found by its frames (order differs per epoch)
        return sorted((f[:n].sum().item(), int(n)) for b in batches for f, n in zip(b[0], b[1], strict=True))

    assert by_length(first) == by_length(second)
    reference = dataclasses.replace(recipe, data_spec_augment=True)
    w2 = registry.workload_class("rnnt")(spec, reference, RunConfig(seed=1), data_dir=data_dir, dist=DistContext())
    w2.prepare()
    w2.train = w2.train[: 2 * recipe.global_batch_size]
    it2 = w2.train_batches()
    batches = [next(it2) for _ in range(4)]
    assert not w2.feature_cache and by_length(batches[:2]) != by_length(batches[2:])


def test_mini_evaluations_compute_their_features_once(data_dir, monkeypatch):
    """The evaluation's features are the same every time (same utterances, dither seeded at 0): the first
    evaluation computes them, later ones decode the very same features without the featurizer."""
    spec, recipe = registry.get_spec("rnnt", "mini"), registry.default_recipe("rnnt", "mini")
    w = registry.workload_class("rnnt")(spec, recipe, RunConfig(seed=1), data_dir=data_dir, dist=DistContext())
    w.prepare()
    w.load_data()
    w.eval = w.eval[:150]  # three batches
    seen: list[torch.Tensor] = []

    def decode(net, feats, lengths, **kwargs):
        seen.append(feats.clone())
        return [[] for _ in range(feats.shape[0])]  # nothing said: every word a deletion

    monkeypatch.setattr("trainperf.workloads.rnnt.workload.greedy_decode", decode)
    calls = []
    featurizer = w.featurizer
    w.featurizer = lambda *a, **k: calls.append(1) or featurizer(*a, **k)
    m = w.build_model()
    first = w.evaluate(m)
    batches = len(calls)
    second = w.evaluate(m)
    assert batches >= 2 and len(calls) == batches  # none computed again
    assert first == second == {"wer": 1.0}
    assert all(torch.equal(a, b) for a, b in zip(seen[:batches], seen[batches:], strict=True))


def test_the_ema_averages_from_the_initial_weights_as_the_reference_s(tmp_path):
    """The reference's EMA model starts as a copy of the initial weights and after each optimizer step becomes
    decay * ema + (1 - decay) * w (train.py, apply_ema): after one step 0.9 w0 + 0.1 w1 at decay 0.9."""
    spec, cls = registry.get_spec("rnnt", "mini"), registry.workload_class("rnnt")
    recipe = registry.default_recipe("rnnt", "mini").with_overrides({"model_eval_ema_factor": 0.9})
    w = cls(spec, recipe, RunConfig(seed=3, dry_run=True), data_dir=tmp_path, dist=DistContext())
    torch.manual_seed(0)
    m = w.build_model()
    opt, _ = w.build_optimizer(m)
    w0 = [p.detach().clone() for p in m.parameters()]
    for p in m.parameters():
        p.grad = torch.ones_like(p)
    opt.step()
    w1 = [p.detach().clone() for p in m.parameters()]
    assert any(not torch.equal(a, b) for a, b in zip(w0, w1, strict=True))
    moved = max(float((b - a).abs().max()) for a, b in zip(w0, w1, strict=True))
    for e, a, b in zip(w.ema.module.parameters(), w0, w1, strict=True):  # the EMA moved a tenth of the way
        torch.testing.assert_close(e.detach(), 0.9 * a + 0.1 * b, rtol=0, atol=0.05 * moved + 1e-7)
