"""rnnt's CPU joint (ReLU + dropout) and transducer loss against the library operators they stand in for."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torchaudio.functional import rnnt_loss

from trainperf.workloads.rnnt.model import RNNT, RNNTConfig
from trainperf.workloads.rnnt.transducer import relu_dropout_sum, transducer_loss


def _case(seed: int, b: int, frames: int, positions: int, classes: int, scale: float = 1.0):
    g = torch.Generator().manual_seed(seed)
    logits = (scale * torch.randn(b, frames, positions, classes, generator=g)).requires_grad_()
    targets = torch.randint(0, classes - 1, (b, positions - 1), generator=g, dtype=torch.int32)
    logit_lengths = torch.randint(1, frames + 1, (b,), generator=g, dtype=torch.int32)
    target_lengths = torch.randint(0, positions, (b,), generator=g, dtype=torch.int32)
    logit_lengths[0], target_lengths[0] = frames, positions - 1  # one sequence fills the padded shape
    return logits, targets, logit_lengths, target_lengths


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    b=st.integers(1, 5),
    frames=st.integers(1, 30),
    positions=st.integers(1, 9),
    classes=st.integers(2, 12),
    scale=st.sampled_from([0.1, 1.0, 8.0]),
)
def test_the_loss_and_its_gradient_are_torchaudios(seed, b, frames, positions, classes, scale):
    logits, targets, logit_lengths, target_lengths = _case(seed, b, frames, positions, classes, scale)
    blank = classes - 1
    expected = rnnt_loss(logits, targets, logit_lengths, target_lengths, blank=blank, reduction="mean")
    (expected_grad,) = torch.autograd.grad(expected, logits)
    got = transducer_loss(logits, targets, logit_lengths, target_lengths, blank=blank)
    (grad,) = torch.autograd.grad(got, logits)
    assert got.item() == pytest.approx(expected.item(), rel=1e-5, abs=1e-4)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-4, atol=1e-5)


def test_the_loss_at_the_mini_shape_and_a_blank_that_is_not_last():
    logits, targets, logit_lengths, target_lengths = _case(7, 32, 50, 8, 38)
    targets[targets == 3] = 4  # blank 3 never appears among the targets
    for blank in (37, 3):
        expected = rnnt_loss(logits, targets, logit_lengths, target_lengths, blank=blank)
        got = transducer_loss(logits, targets, logit_lengths, target_lengths, blank=blank)
        assert got.item() == pytest.approx(expected.item(), rel=1e-5)


def test_the_loss_rejects_targets_that_do_not_fit_the_logits():
    logits, targets, logit_lengths, target_lengths = _case(0, 2, 5, 4, 6)
    with pytest.raises(ValueError, match="do not fit logits"):
        transducer_loss(logits, targets[:, :2], logit_lengths, target_lengths, blank=5)


def test_relu_dropout_is_relu_then_dropout_with_its_own_mask():
    g = torch.Generator().manual_seed(0)
    f = torch.randn(4, 30, 16, generator=g, requires_grad=True)
    h = torch.randn(4, 7, 16, generator=g, requires_grad=True)
    p = 0.3
    out = relu_dropout_sum(f, h, p)
    z = f.unsqueeze(2) + h.unsqueeze(1)
    kept = out > 0
    # every output is 0 or relu(z) / (1 - p); among the positive z, about 1 - p are kept
    torch.testing.assert_close(out[kept], (z[kept] / (1 - p)).detach())
    positive = z > 0
    assert not kept[~positive].any()
    rate = 1 - kept[positive].float().mean().item()
    n = int(positive.sum())
    assert abs(rate - p) < 4 * (p * (1 - p) / n) ** 0.5, (rate, n)
    # the gradient is relu's and dropout's through the mask it drew
    w = torch.randn(out.shape, generator=g)
    gf, gh = torch.autograd.grad((out * w).sum(), (f, h))
    mask = kept.float() / (1 - p)
    ef, eh = torch.autograd.grad((F.relu(z) * mask * w).sum(), (f, h))
    torch.testing.assert_close(gf, ef)
    torch.testing.assert_close(gh, eh)


def test_relu_dropout_follows_the_seed_and_rejects_a_bad_rate():
    f, h = torch.randn(2, 5, 8), torch.randn(2, 3, 8)
    torch.manual_seed(1)
    a = relu_dropout_sum(f, h, 0.1)
    torch.manual_seed(1)
    assert torch.equal(a, relu_dropout_sum(f, h, 0.1))
    assert torch.equal(relu_dropout_sum(f, h, 0.0), F.relu(f.unsqueeze(2) + h.unsqueeze(1)))
    with pytest.raises(ValueError, match="dropout rate"):
        relu_dropout_sum(f, h, 1.0)


def test_the_model_uses_them_in_training_only():
    torch.manual_seed(0)
    model = RNNT(RNNTConfig(n_classes=6, in_features=8, enc_n_hid=16, pred_n_hid=8, joint_n_hid=12))
    f, g = torch.randn(2, 5, 16), torch.randn(2, 3, 8)
    model.eval()
    expected = model.joint_net(model.joint_enc(f).unsqueeze(2) + model.joint_pred(g).unsqueeze(1))
    torch.testing.assert_close(model.joint(f, g), expected)  # evaluation: the library path, no dropout
    model.train()
    torch.manual_seed(3)
    out = model.joint(f, g)
    torch.manual_seed(3)
    hidden = relu_dropout_sum(model.joint_enc(f), model.joint_pred(g), model.config.joint_dropout)
    torch.testing.assert_close(out, model.joint_net[2](hidden))
