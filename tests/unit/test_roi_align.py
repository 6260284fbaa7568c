"""The grid_sample ROI Align of the mini Mask R-CNN equals torchvision's roi_align (one sample per bin)."""

from __future__ import annotations

import pytest
import torch
from torchvision.ops import MultiScaleRoIAlign, roi_align

from trainperf.workloads.common.detection.roi_align import GridMultiScaleRoIAlign, roi_align_one_sample


def _rois(n_images: int, k: int, size: float, generator: torch.Generator) -> torch.Tensor:
    image = torch.randint(0, n_images, (k,), generator=generator).float()  # not sorted: any order works
    xy = torch.rand(k, 2, generator=generator) * (size - 2)
    wh = torch.rand(k, 2, generator=generator) * size / 2 + 0.3  # some under a feature pixel wide
    return torch.cat([image[:, None], xy, (xy + wh).clamp(max=size)], 1)


@pytest.mark.parametrize(("side", "scale", "output"), [(24, 0.25, 7), (12, 0.125, 14), (3, 1 / 32, 7), (1, 1 / 96, 7)])
def test_forward_and_backward_match_torchvision(side, scale, output):
    g = torch.Generator().manual_seed(side)
    features = torch.randn(5, 3, side, side, generator=g, requires_grad=True)
    rois = _rois(5, 60, 96.0, g)
    expected = roi_align(features, rois, (output, output), scale, sampling_ratio=1, aligned=False)
    got = roi_align_one_sample(features, rois, (output, output), scale)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    upstream = torch.randn(expected.shape, generator=g)
    (grad_expected,) = torch.autograd.grad(expected, features, upstream)
    (grad_got,) = torch.autograd.grad(got, features, upstream)
    torch.testing.assert_close(grad_got, grad_expected, atol=1e-4, rtol=1e-4)


def test_a_point_beyond_the_map_gives_zero_as_in_torchvision():
    features = torch.ones(1, 1, 12, 12)
    rois = torch.tensor([[0.0, 95.0, 10.0, 96.0, 40.0]])  # 1/8 px wide at scale 1/8: stretched to 1 px, past the edge
    expected = roi_align(features, rois, (7, 7), 0.125, sampling_ratio=1, aligned=False)
    assert (expected == 0).any() and (expected == 1).any()  # the case really occurs
    torch.testing.assert_close(roi_align_one_sample(features, rois, (7, 7), 0.125), expected)


def test_no_rois_and_images_without_rois():
    features = torch.randn(3, 2, 8, 8)
    assert roi_align_one_sample(features, torch.zeros(0, 5), (7, 7), 0.25).shape == (0, 2, 7, 7)
    rois = torch.tensor([[2.0, 1.0, 1.0, 20.0, 20.0]])  # only the last image has one
    torch.testing.assert_close(
        roi_align_one_sample(features, rois, (7, 7), 0.25),
        roi_align(features, rois, (7, 7), 0.25, sampling_ratio=1, aligned=False),
    )


def test_multiscale_pooler_matches_torchvision_over_fpn_levels():
    g = torch.Generator().manual_seed(0)
    image_size = 512  # large enough that boxes map to several FPN levels
    names = ["0", "1", "2", "3"]
    features = {
        n: torch.randn(2, 4, image_size // 2 ** (i + 2), image_size // 2 ** (i + 2), generator=g)
        for i, n in enumerate(names)
    }
    boxes = []
    for _ in range(2):
        xy = torch.rand(30, 2, generator=g) * 50
        wh = torch.rand(30, 2, generator=g) * 450 + 2
        boxes.append(torch.cat([xy, (xy + wh).clamp(max=image_size)], 1))
    shapes = [(image_size, image_size)] * 2
    expected = MultiScaleRoIAlign(names, 7, sampling_ratio=1)(features, boxes, shapes)
    pooler = GridMultiScaleRoIAlign(names, 7)
    torch.testing.assert_close(pooler(features, boxes, shapes), expected, atol=1e-4, rtol=1e-4)
    levels = pooler.map_levels(boxes)
    assert len(levels.unique()) >= 3  # the test really covers several levels
