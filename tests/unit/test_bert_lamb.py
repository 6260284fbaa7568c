"""bert's optimizer: timm's LAMB, as the workload builds it, against the reference's update written out by hand,
and the reference's learning-rate policy."""

from __future__ import annotations

import dataclasses
import math

import torch

from trainperf import registry
from trainperf.dist import DistContext
from trainperf.spec import RunConfig
from trainperf.workloads.bert import BertRecipe
from trainperf.workloads.bert.workload import lr_policy


def reference_lamb_step(param, grad, m, v, step, *, lr, beta1, beta2, eps, weight_decay, adapt):
    """The MLPerf BERT reference's LAMB update (its TensorFlow optimizer), for one tensor:
    m, v moving averages; bias-corrected; update = m_hat / (sqrt(v_hat) + eps) + weight_decay * param;
    the trust ratio ||param|| / ||update|| (1 when either is 0) where layer adaptation applies."""
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    m_hat = m / (1 - beta1**step)
    v_hat = v / (1 - beta2**step)
    update = m_hat / (v_hat.sqrt() + eps) + weight_decay * param
    ratio = 1.0
    if adapt:
        w_norm, u_norm = param.norm(), update.norm()
        ratio = float(w_norm / u_norm) if w_norm > 0 and u_norm > 0 else 1.0
    return param - lr * ratio * update, m, v


def test_timm_lamb_matches_the_reference_update_on_hand_written_steps(tmp_path):
    spec = registry.get_spec("bert", "mini")
    recipe = BertRecipe(
        global_batch_size=8,
        opt_base_learning_rate=0.01,
        opt_learning_rate_warmup_steps=0,
        opt_learning_rate_training_steps=10**9,  # a constant rate over these few steps
    )
    w = registry.workload_class("bert")(
        spec, recipe, RunConfig(seed=1, dry_run=True), data_dir=tmp_path, dist=DistContext()
    )
    model = torch.nn.Module()
    model.dense = torch.nn.Linear(3, 4)  # weight: decayed and adapted; bias: neither
    model.LayerNorm = torch.nn.LayerNorm(4)
    torch.manual_seed(0)
    with torch.no_grad():
        model.LayerNorm.weight.normal_()
    opt, _ = w.build_optimizer(model)
    kinds = {"dense.weight": True, "dense.bias": False, "LayerNorm.weight": False, "LayerNorm.bias": False}
    ref = {n: (p.detach().clone(), torch.zeros_like(p), torch.zeros_like(p)) for n, p in model.named_parameters()}
    g = torch.Generator().manual_seed(5)
    for step in range(1, 4):
        for n, p in model.named_parameters():
            p.grad = torch.randn(p.shape, generator=g)
            value, m, v = ref[n]
            ref[n] = reference_lamb_step(
                value, p.grad, m, v, step, lr=0.01, beta1=0.9, beta2=0.999, eps=1e-6,
                weight_decay=0.01 if kinds[n] else 0.0, adapt=kinds[n],
            )  # fmt: skip
        opt.step()
        for n, p in model.named_parameters():
            torch.testing.assert_close(p.detach(), ref[n][0], rtol=1e-5, atol=1e-7, msg=f"{n} at step {step}")


def test_learning_rate_policy_is_the_references():
    r = BertRecipe(
        global_batch_size=8,
        opt_base_learning_rate=1e-4,
        opt_learning_rate_warmup_steps=100,
        start_warmup_step=-20,
        opt_learning_rate_training_steps=1000,
    )
    f = lr_policy(r)
    # warm-up: (step - start_warmup_step) / warmup while step - start_warmup_step is below the warm-up, as the
    # reference's create_optimizer counts its global_step from 0 (optimization.py:53-72); then linear decay to 0
    # at the last step
    assert math.isclose(f(0), 20 / 100) and math.isclose(f(50), 70 / 100) and math.isclose(f(79), 99 / 100)
    assert math.isclose(f(80), 1 - 80 / 1000) and math.isclose(f(500), 0.5)
    assert f(1000) == 0.0 and f(5000) == 0.0
    first = lr_policy(dataclasses.replace(r, start_warmup_step=0))
    assert first(0) == 0.0 and math.isclose(first(1), 1 / 100)


def test_the_mini_recipe_keeps_its_calibrated_warm_up_one_step_ahead():
    mini = registry.default_recipe("bert", "mini")
    assert (
        not mini.opt_learning_rate_warmup_from_zero
        and registry.default_recipe("bert", "reference").opt_learning_rate_warmup_from_zero
    )
    f = lr_policy(mini)
    w = mini.opt_learning_rate_warmup_steps
    assert math.isclose(f(0), 1 / w) and math.isclose(f(w - 1), 1.0)
