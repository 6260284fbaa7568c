"""unet3d's evaluation: MONAI's sliding window with the reference's weights against a hand computation, the
reference's trim and padding, Dice, and the Dice-CE loss against MONAI's."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from trainperf.workloads.unet3d.evaluation import dice_scores, importance_map, sliding_window, trim_and_pad
from trainperf.workloads.unet3d.workload import dice_ce_loss


class PositionModel(torch.nn.Module):
    """A 'network' whose logits depend on the input and on where the window lies in its own frame, so that
    every window's contribution differs and a wrong window or weight shows."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d, h, w = x.shape[2:]
        ramp = torch.arange(d)[:, None, None] + 2 * torch.arange(h)[None, :, None] + 3 * torch.arange(w)[None, None, :]
        return torch.cat([x, x * x, x + ramp.to(x.dtype) / 10], dim=1)


def hand_sliding_window(image: np.ndarray, roi: int, overlap: float, pad_value: float) -> np.ndarray:
    """The reference's algorithm written out with loops over every window (runtime/inference.py)."""
    shape = image.shape
    stride = int(roi * (1 - overlap))
    cut = [s % stride if s % stride < stride // 2 else 0 for s in shape]
    image = image[tuple(slice(c // 2, s - (c - c // 2)) for c, s in zip(cut, shape, strict=False))]
    pad = []
    for s in image.shape:
        b = (stride - s % stride) % stride
        pad.append(b if s + b >= roi else b + stride)
    padded = np.pad(image, [(b // 2, b - b // 2) for b in pad], constant_values=pad_value)
    from scipy.signal.windows import gaussian

    g = gaussian(roi, 0.125 * roi)
    weight = np.cbrt(np.einsum("i,j,k->ijk", g, g, g))
    weight /= weight.max()
    total = np.zeros((3, *padded.shape))
    norm = np.zeros(padded.shape)
    model = PositionModel()
    starts = [range(0, s - roi + 1, stride) for s in padded.shape]
    for i, j, k in itertools.product(*starts):
        box = (slice(i, i + roi), slice(j, j + roi), slice(k, k + roi))
        window = torch.from_numpy(padded[box].copy())[None, None]
        total[(slice(None), *box)] += model(window)[0].numpy() * weight
        norm[box] += weight
    out = total / norm
    lo = [b // 2 for b in pad]
    return out[(slice(None), *(slice(o, o + s) for o, s in zip(lo, image.shape, strict=False)))]


@pytest.mark.parametrize("shape", [(20, 24, 17), (8, 13, 30), (16, 16, 16)])
def test_sliding_window_equals_the_reference_by_hand(shape):
    rng = np.random.default_rng(0)
    image = rng.normal(size=shape)
    label = rng.integers(0, 3, size=shape).astype(np.uint8)
    logits, trimmed = sliding_window(
        PositionModel(),
        torch.from_numpy(image)[None, None],
        torch.from_numpy(label)[None, None],
        (8, 8, 8),
        overlap=0.5,
        padding_value=-2.2,
    )
    expected = hand_sliding_window(image, 8, 0.5, -2.2)
    assert logits.shape[2:] == expected.shape[1:] == trimmed.shape[2:]
    np.testing.assert_allclose(logits[0].numpy(), expected, rtol=1e-5, atol=1e-5)


def test_trim_and_pad_follow_the_reference():
    # 130 % 64 = 2 < 32: trimmed by 1 at each end to 128, no padding; 150 % 64 = 22 < 32: trimmed to 128;
    # 100 % 64 = 36: padded by 28 to 128; 60: padded by 4, then by a stride more, to reach the window (128)
    trims, pads = trim_and_pad((130, 150, 100), (128, 128, 128), 0.5)
    assert trims == [slice(1, 129), slice(11, 139), slice(0, 100)]
    assert pads == [(0, 0), (0, 0), (14, 14)]
    assert trim_and_pad((60, 128, 192), (128,) * 3, 0.5)[1] == [(34, 34), (0, 0), (0, 0)]


def test_importance_map_is_the_reference_gaussian():
    w = importance_map((128, 128, 128))
    assert w.shape == (128, 128, 128) and float(w.max()) == pytest.approx(1.0)
    assert torch.equal(w, w.flip(0)) and torch.equal(w, w.permute(1, 2, 0))
    assert float(w[0, 0, 0]) == pytest.approx(
        float(np.exp(-0.5 * (63.5 / 16) ** 2)) / float(np.exp(-0.5 * (0.5 / 16) ** 2)), rel=1e-5
    )


def test_dice_per_class_by_hand():
    label = torch.zeros(1, 1, 2, 2, 4, dtype=torch.uint8)
    label[0, 0, 0, 0, :2] = 1  # 2 kidney voxels
    label[0, 0, 1, 1, :] = 2  # 4 tumour voxels
    pred = torch.zeros(1, 2, 2, 4, dtype=torch.long)
    pred[0, 0, 0, :3] = 1  # 3 kidney voxels, 2 of them right
    pred[0, 1, 1, :2] = 2  # 2 tumour voxels, both right
    logits = F.one_hot(pred, 3).permute(0, 4, 1, 2, 3).float()
    kidney, tumour = dice_scores(logits, label)[0].tolist()
    assert kidney == pytest.approx((2 * 2 + 1e-6) / (3 + 2 + 1e-6))
    assert tumour == pytest.approx((2 * 2 + 1e-6) / (2 + 4 + 1e-6))
    # no tumour in the case and none predicted: Dice 1 (the smoothing), as the reference scores it
    empty = torch.zeros(1, 1, 2, 2, 4, dtype=torch.uint8)
    assert dice_scores(torch.zeros(1, 3, 2, 2, 4), empty)[0].tolist() == [1.0, 1.0]


def test_dice_ce_loss_is_monai_s_halved():
    from monai.losses import DiceCELoss

    torch.manual_seed(0)
    logits = torch.randn(2, 3, 6, 5, 4)
    label = torch.randint(0, 3, (2, 1, 6, 5, 4), dtype=torch.uint8)
    monai = DiceCELoss(include_background=False, to_onehot_y=True, softmax=True, smooth_nr=1e-6, smooth_dr=1e-6)
    assert float(dice_ce_loss(logits, label)) == pytest.approx(float(monai(logits, label.long())) / 2, rel=1e-6)


@pytest.mark.parametrize(("scale", "padding"), [("reference", -2.2), ("mini", (-79.0 - 101.0) / 76.9)])
def test_the_workload_pads_its_evaluation_volumes_with_its_scale_s_value(scale, padding, tmp_path, monkeypatch):
    """The reference pads with the constant -2.2 (runtime/inference.py, evaluate: padding_val=-2.2), not with the
    normalized clip floor -2.34; the mini scale keeps the floor its target was calibrated with."""
    from trainperf import registry
    from trainperf.dist import DistContext
    from trainperf.spec import RunConfig
    from trainperf.workloads.unet3d import data
    from trainperf.workloads.unet3d import workload as wl

    seen = []

    def spy(model, image, label, roi, *, overlap, padding_value):
        seen.append(padding_value)
        return torch.zeros(1, 3, *image.shape[2:]), label

    monkeypatch.setattr(wl, "sliding_window", spy)
    w = registry.workload_class("unet3d")(
        registry.get_spec("unet3d", scale),
        registry.default_recipe("unet3d", scale),
        RunConfig(seed=1),
        data_dir=tmp_path,
        dist=DistContext(),
    )
    w.eval_cases = [data.Case("00000", np.zeros((1, 4, 4, 4), np.float32), np.zeros((1, 4, 4, 4), np.uint8))]
    w.case_scores(torch.nn.Identity())
    assert seen == [pytest.approx(padding)]
