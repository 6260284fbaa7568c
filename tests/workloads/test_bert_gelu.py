"""bert's GELU against the v2.0 reference's (mlcommons/training @ a0671ab8, language_model/tensorflow/bert/
modeling.py, ``gelu``: the tanh form, used by the intermediate layers and the masked-LM transform), and the
mini recipe's exact (erf) form that it was calibrated with."""

from __future__ import annotations

import math

import pytest
import torch

from trainperf import registry
from trainperf.dist import DistContext
from trainperf.errors import UsageError
from trainperf.spec import RunConfig
from trainperf.workloads.bert.model import BertConfig, Intermediate, Transform

POINTS = [-3.0, -1.0, -0.5, 0.5, 1.0, 2.0]


def tanh_gelu(x: float) -> float:  # the reference's formula
    return 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def erf_gelu(x: float) -> float:
    return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))


def _identity_dense(module: torch.nn.Module, n: int) -> None:
    with torch.no_grad():
        module.dense.weight.copy_(torch.eye(n))
        module.dense.bias.zero_()


def _workload(scale: str, tmp_path, **overrides):
    spec, cls = registry.get_spec("bert", scale), registry.workload_class("bert")
    recipe = registry.default_recipe("bert", scale).with_overrides(overrides)
    return cls(spec, recipe, RunConfig(seed=3, dry_run=True), data_dir=tmp_path, dist=DistContext())


def test_the_formulas_differ_at_the_chosen_points():
    assert tanh_gelu(1.0) == pytest.approx(0.841192, abs=1e-6) and erf_gelu(1.0) == pytest.approx(0.841345, abs=1e-6)
    assert tanh_gelu(-3.0) == pytest.approx(-0.003637, abs=1e-6) and erf_gelu(-3.0) == pytest.approx(
        -0.004050, abs=1e-6
    )


def test_reference_recipe_uses_the_reference_s_tanh_gelu(tmp_path):
    c = _workload("reference", tmp_path).model_config
    assert c.gelu_approximate == "tanh"
    small = BertConfig(
        vocab_size=10, hidden_size=len(POINTS), num_layers=1, num_heads=1, intermediate_size=len(POINTS),
        gelu_approximate=c.gelu_approximate,
    )  # fmt: skip
    x = torch.tensor([POINTS], dtype=torch.float64)
    intermediate = Intermediate(small).double()
    _identity_dense(intermediate, len(POINTS))
    got = intermediate(x)[0].tolist()
    for p, v in zip(POINTS, got, strict=True):
        assert v == pytest.approx(tanh_gelu(p), abs=1e-12), p
        assert abs(v - erf_gelu(p)) > 1e-5, p  # not the exact form (1.7e-5 to 4.1e-4 apart here)
    transform = Transform(small).double()  # the masked-LM head: the same activation, then LayerNorm
    _identity_dense(transform, len(POINTS))
    expected = torch.nn.functional.layer_norm(
        torch.tensor([[tanh_gelu(p) for p in POINTS]], dtype=torch.float64), (len(POINTS),), eps=small.layer_norm_eps
    )
    torch.testing.assert_close(transform(x), expected, rtol=0, atol=1e-12)


def test_mini_recipe_keeps_the_exact_gelu_it_was_calibrated_with(tmp_path):
    w = _workload("mini", tmp_path)
    assert w.recipe.model_gelu_approximate == w.model_config.gelu_approximate == "none"
    small = BertConfig(
        vocab_size=10, hidden_size=len(POINTS), num_layers=1, num_heads=1, intermediate_size=len(POINTS),
        gelu_approximate=w.model_config.gelu_approximate,
    )  # fmt: skip
    intermediate = Intermediate(small).double()
    _identity_dense(intermediate, len(POINTS))
    got = intermediate(torch.tensor([POINTS], dtype=torch.float64))[0].tolist()
    assert got == pytest.approx([erf_gelu(p) for p in POINTS], abs=1e-12)
    model = w.build_model()
    assert {m.gelu for m in model.modules() if isinstance(m, Intermediate | Transform)} == {"none"}


def test_the_recipe_s_gelu_reaches_every_layer_and_a_bad_form_is_refused(tmp_path):
    model = _workload("mini", tmp_path, model_gelu_approximate="tanh").build_model()
    forms = [m.gelu for m in model.modules() if isinstance(m, Intermediate | Transform)]
    assert forms == ["tanh"] * 3  # two layers' intermediate and the masked-LM transform
    with pytest.raises(UsageError, match="model_gelu_approximate 'erf' is not one of 'tanh', 'none'"):
        _workload("reference", tmp_path, model_gelu_approximate="erf")
