"""rnnt's LSTM initialization against the v2.0 reference's (mlcommons/training @ a0671ab8,
rnn_speech_recognition/pytorch/common/rnn.py, run with train.py's weights_init_scale 0.5): torch's default draw,
the forget gate's input bias set to forget_gate_bias and its hidden-hidden bias zeroed, then every LSTM weight and
bias times the scale. The mini recipe keeps the initialization it was calibrated with."""

from __future__ import annotations

import pytest
import torch
from stepping import dry_workload

from trainperf import registry
from trainperf.dist import DistContext
from trainperf.spec import RunConfig
from trainperf.workloads.rnnt import model

H = 4  # torch's gate order in a bias of 4H: input [0, H), forget [H, 2H), cell [2H, 3H), output [3H, 4H)
GATES = {"input": slice(0, H), "forget": slice(H, 2 * H), "cell": slice(2 * H, 3 * H), "output": slice(3 * H, 4 * H)}


def _pair(**init):
    """Ours and a plain torch LSTM drawn from the same seed (the same default values before the reference's
    changes)."""
    torch.manual_seed(7)
    ours = model.LSTM(6, H, 2, 0.0, **init).lstm
    torch.manual_seed(7)
    plain = torch.nn.LSTM(6, H, num_layers=2)
    return {n: p.detach() for n, p in ours.named_parameters()}, {n: p.detach() for n, p in plain.named_parameters()}


def test_reference_init_scales_every_weight_and_bias_after_setting_the_forget_gate():
    ours, plain = _pair(forget_gate_bias=1.0, weights_init_scale=0.5)
    assert sorted(ours) == sorted(plain) and len(ours) == 8  # two layers: weight_ih/hh, bias_ih/hh each
    for name, p in ours.items():
        expected = 0.5 * plain[name]
        if name.startswith("bias_ih"):
            expected[GATES["forget"]] = 0.5  # forget_gate_bias 1.0, then scaled: 0.5
        elif name.startswith("bias_hh"):
            expected[GATES["forget"]] = 0.0  # hidden_hidden_bias_scale 0.0: the forget slice only
        assert torch.equal(p, expected), name


def test_reference_init_gate_by_gate():
    ours, _ = _pair(forget_gate_bias=1.0, weights_init_scale=0.5)
    bound = 0.5 / H**0.5  # torch's U(-1/sqrt(H), 1/sqrt(H)) halved
    for layer in (0, 1):
        ih, hh = ours[f"bias_ih_l{layer}"], ours[f"bias_hh_l{layer}"]
        assert ih[GATES["forget"]].tolist() == [0.5] * H
        assert hh[GATES["forget"]].tolist() == [0.0] * H
        for gate in ("input", "cell", "output"):  # torch's draw, halved: every entry nonzero, within the bound
            for b in (ih[GATES[gate]], hh[GATES[gate]]):
                assert bool((b != 0).all()) and float(b.abs().max()) <= bound, (layer, gate)


def test_reference_init_weight_distribution_bounds():
    torch.manual_seed(0)
    lstm = model.LSTM(64, 64, 1, 0.0, weights_init_scale=0.5).lstm
    bound = 0.5 / 64**0.5  # 0.0625, half of torch's 0.125
    for w in (
        lstm.weight_ih_l0.detach(),
        lstm.weight_hh_l0.detach(),
    ):  # 16,384 draws each: they fill the halved interval
        assert float(w.abs().max()) <= bound and float(w.abs().max()) > 0.99 * bound
        assert abs(float(w.std()) - bound / 3**0.5) < 0.02 * bound  # a uniform's standard deviation


def test_mini_init_is_the_calibrated_one():
    ours, plain = _pair(forget_gate_bias=1.0, weights_init_scale=1.0, zero_all_bias_hh=True)
    for name, p in ours.items():
        if name.startswith("bias_hh"):
            assert not p.any(), name
        elif name.startswith("bias_ih"):
            expected = plain[name].clone()
            expected[GATES["forget"]] = 1.0
            assert torch.equal(p, expected), name
        else:
            assert torch.equal(p, plain[name]), name


@pytest.mark.parametrize(
    ("scale", "init_scale", "all_hh"), [("reference", 0.5, False), ("mini", 1.0, True)]
)  # fmt: skip
def test_each_recipe_builds_and_logs_its_init(tmp_path, scale, init_scale, all_hh):
    w = dry_workload("rnnt", scale, tmp_path)
    assert w.recipe.model_weights_initialization_scale == init_scale
    assert (w.model_config.weights_init_scale, w.model_config.zero_all_bias_hh) == (init_scale, all_hh)
    assert w.hparams()["model_weights_initialization_scale"] == init_scale


def test_a_changed_init_scale_reaches_the_model_and_the_log(tmp_path):
    """--set model_weights_initialization_scale=0.25 (tunable in the closed division: "unconstrained" in the v2.0
    rules) builds the model with it and logs it."""
    spec, cls = registry.get_spec("rnnt", "mini"), registry.workload_class("rnnt")
    recipe = registry.default_recipe("rnnt", "mini").with_overrides({"model_weights_initialization_scale": 0.25})
    w = cls(spec, recipe, RunConfig(seed=3, dry_run=True), data_dir=tmp_path, dist=DistContext())
    assert w.hparams()["model_weights_initialization_scale"] == 0.25
    m = w.build_model()
    assert m.pre_rnn.lstm.bias_ih_l0[192:384].detach().unique().tolist() == [0.25]  # forget_gate_bias 1.0 x 0.25
    assert not m.pre_rnn.lstm.bias_hh_l0.any()  # the mini recipe's: all of bias_hh zeroed
    assert float(m.dec_rnn.lstm.weight_hh_l0.detach().abs().max()) <= 0.25 / 96**0.5
