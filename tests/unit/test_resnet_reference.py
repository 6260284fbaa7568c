"""resnet's reference scale against the MLPerf v2.0 reference: LARS update, initialization, preprocessing,
and the smoke fixture's ImageNet layout (no training here: that is tests/integration/test_smoke_runs.py)."""

from __future__ import annotations

import math

import pytest
import torch
from timm.optim import Lars

from trainperf.errors import DataError
from trainperf.workloads.resnet import data
from trainperf.workloads.resnet.lars import KERAS_EPSILON, ReferenceLars
from trainperf.workloads.resnet.model import reference_resnet50


def reference_lars_step(w, g, v, *, lr, momentum, wd, eta, adapt):
    """One step of mlcommons/training image_classification/tensorflow2/lars_optimizer.py, written out."""
    if adapt:
        w_norm, g_norm = float(w.norm()), float(g.norm())
        trust = eta * w_norm / (g_norm + wd * w_norm + KERAS_EPSILON) if w_norm > 0 and g_norm > 0 else 1.0
        scaled_lr, g = lr * trust, g + wd * w
    else:
        scaled_lr = lr
    v = momentum * v - g * scaled_lr
    return w + v, v


def _run(optimizer_cls, rates, **kwargs):
    torch.manual_seed(0)
    weight, bias = torch.randn(8, 4, requires_grad=True), torch.randn(8, requires_grad=True)
    groups = [{"params": [weight], "weight_decay": 5e-5}, {"params": [bias], "weight_decay": 0.0}]
    if optimizer_cls is ReferenceLars:
        groups[1]["adapt"] = False
    opt = optimizer_cls(groups, lr=rates[0], momentum=0.9, **kwargs)
    grads = [(torch.randn(8, 4), torch.randn(8)) for _ in rates]
    for lr, (gw, gb) in zip(rates, grads, strict=True):
        for group in opt.param_groups:
            group["lr"] = lr
        weight.grad, bias.grad = gw.clone(), gb.clone()
        opt.step()
    return weight.detach(), bias.detach(), grads


def test_lars_matches_a_hand_written_reference_step_while_the_rate_changes():
    rates = [0.5, 2.0, 7.5, 10.5, 9.0, 4.0]  # warm-up, then decay: the rate changes at every step
    weight, bias, grads = _run(ReferenceLars, rates, trust_coefficient=0.001)
    torch.manual_seed(0)
    w, b = torch.randn(8, 4), torch.randn(8)
    vw, vb = torch.zeros_like(w), torch.zeros_like(b)
    for lr, (gw, gb) in zip(rates, grads, strict=True):
        w, vw = reference_lars_step(w, gw, vw, lr=lr, momentum=0.9, wd=5e-5, eta=0.001, adapt=True)
        b, vb = reference_lars_step(b, gb, vb, lr=lr, momentum=0.9, wd=0.0, eta=0.001, adapt=False)
    torch.testing.assert_close(weight, w, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(bias, b, rtol=1e-5, atol=1e-6)
    # timm's Lars keeps the rate outside the momentum: the same steps end elsewhere (what this test catches).
    timm_weight, _, _ = _run(Lars, rates, trust_coeff=0.001)
    assert not torch.allclose(timm_weight, w, rtol=1e-3, atol=1e-4)


def test_lars_with_a_constant_rate_agrees_with_timm():
    weight, _, _ = _run(ReferenceLars, [3.0] * 4, trust_coefficient=0.001, eps=1e-9)
    timm_weight, _, _ = _run(Lars, [3.0] * 4, trust_coeff=0.001, eps=1e-9)
    torch.testing.assert_close(weight, timm_weight, rtol=1e-5, atol=1e-6)


def test_reference_initialization_is_the_references():
    torch.manual_seed(0)
    model = reference_resnet50().requires_grad_(False)
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.Conv2d):
            fan_in = m.in_channels * m.kernel_size[0] * m.kernel_size[1]
            std = math.sqrt(2.0 / fan_in)  # he_normal: this deviation after truncation at 2 sigma
            bound = 2 * std / 0.87962566103423978
            assert float(m.weight.abs().max()) <= bound + 1e-6, name
            if m.weight.numel() > 50_000:
                assert abs(float(m.weight.std()) / std - 1) < 0.03, name
        elif isinstance(m, torch.nn.BatchNorm2d):  # no zero-initialized residual branch
            assert torch.all(m.weight == 1) and torch.all(m.bias == 0), name
    assert abs(float(model.fc.weight.std()) - 0.01) < 0.0005 and torch.all(model.fc.bias == 0)


def test_smoke_fixture_is_imagenet_layout_read_with_the_reference_preprocessing(tmp_path):
    description = data.write_smoke_fixture(tmp_path)
    assert "8 classes" in description
    assert sorted(p.name for p in (tmp_path / "train").iterdir()) == list(data.SMOKE_WNIDS)
    assert len(list((tmp_path / "val").rglob("*.JPEG"))) == 16
    train, val = data.imagenet_datasets(tmp_path, classes=None)
    assert (len(train), len(val), len(train.classes)) == (24, 16, 8)
    image, label = val[len(val) - 1]
    assert image.shape == (3, 224, 224) and label == 7
    # the reference's input: pixel values 0-255 less the per-channel means, not divided by a deviation
    assert float(image.max()) > 20 and float(image.min()) < -20
    for i in range(len(train)):  # greyscale and CMYK files come out RGB
        assert train[i][0].shape == (3, 224, 224)
    # the reference's crop, resize and evaluation crop (tests/unit/test_resnet_crop.py checks each)
    assert isinstance(train.transform, data.ReferenceTrainTransform)
    assert isinstance(val.transform, data.ReferenceEvalTransform)
    assert data.CROP_AREA == (0.05, 1.0) and data.CROP_ASPECT == (0.75, 1.33) and data.CROP_MAX_ATTEMPTS == 100


def test_a_real_run_needs_the_1000_imagenet_classes(tmp_path):
    data.write_smoke_fixture(tmp_path)
    with pytest.raises(DataError, match=r"8 class folders.*built for 1000"):
        data.imagenet_datasets(tmp_path)


def test_smoke_fixture_is_written_whole_and_once(tmp_path):
    from trainperf.harness import smoke

    folder, description = smoke.write_fixture("resnet", tmp_path)
    assert folder == tmp_path / "resnet" / "reference" and (folder / "val" / data.SMOKE_WNIDS[-1]).is_dir()
    stamp = (folder / smoke.MARKER).stat().st_mtime_ns
    assert smoke.write_fixture("resnet", tmp_path) == (folder, description)  # complete: kept as it is
    assert (folder / smoke.MARKER).stat().st_mtime_ns == stamp
    assert not list((tmp_path / "resnet").glob(".reference.partial-*"))


def test_lars_schedule_is_the_references():
    from trainperf.workloads.common.schedules import poly_warmup

    base, end, warmup, train_steps = 10.5, 1e-4, 10, 50
    decay = train_steps - warmup + 1
    factor = poly_warmup(base_lr=base, end_lr=end, warmup_steps=warmup, decay_steps=decay, power=2)
    for step in range(train_steps + 5):  # lars_util.PolynomialDecayWithWarmup, written out
        if step <= warmup:
            expected = base * step / warmup
            if step < warmup:  # the one difference: shifted by a step, so that the first step trains
                expected = base * (step + 1) / warmup
        else:
            p = min(step - warmup, decay) / decay
            expected = (base - end) * (1 - p) ** 2 + end
        assert math.isclose(base * factor(step), expected, rel_tol=1e-12, abs_tol=1e-12), step
    assert factor(warmup) == 1.0 and factor(train_steps + 1) == end / base
