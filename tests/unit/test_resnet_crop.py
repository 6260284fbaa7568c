"""resnet's reference preprocessing against the v2.0 reference's (image_classification/tensorflow2/
imagenet_preprocessing.py): the training crop window of TensorFlow's sample_distorted_bounding_box, over 10,000
draws, against a simulation of that rule written out here; TensorFlow 1's bilinear resize on known answers."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch
from PIL import Image
from scipy import stats

from trainperf.workloads.resnet import data

DRAWS = 10_000


def rule_window(height, width, rng):
    """sample_distorted_bounding_box(min_object_covered=0.1, aspect_ratio_range=[0.75, 1.33],
    area_range=[0.05, 1.0], max_attempts=100, use_image_if_no_bounding_boxes=True) with no boxes, written
    from the description of TensorFlow's kernel in double precision: per attempt a uniform aspect ratio, a
    uniform integer height between the rounded heights of the smallest and the largest area (the largest
    limited by the image), width = round(height * ratio), one row more or less when rounding broke the area
    bounds, a corner uniform in [0, size - crop); kept if it covers >= 10 % of the whole image; else the
    whole image."""
    area = height * width
    for _ in range(100):
        ratio = 0.75 + rng.random() * (1.33 - 0.75)
        h = round(math.sqrt(0.05 * area / ratio))
        h_max = round(math.sqrt(area / ratio))
        if round(h_max * ratio) > width:
            h_max = int((width + 0.5) / ratio)
            while round(h_max * ratio) > width:
                h_max -= 1
        h_max = min(h_max, height)
        h = min(h, h_max) + (rng.randint(0, h_max - min(h, h_max)) if h < h_max else 0)
        w = round(h * ratio)
        if w * h < 0.05 * area:
            h += 1
            w = round(h * ratio)
        if w * h > area:
            h -= 1
            w = round(h * ratio)
        if not (0.05 * area <= w * h <= area and 0 < w <= width and 0 < h <= height):
            continue
        if w * h / area >= 0.1:
            top = rng.randrange(height - h) if h < height else 0
            left = rng.randrange(width - w) if w < width else 0
            return top, left, h, w
    return 0, 0, height, width


def torchvision_window(height, width, generator):
    """What trainperf drew before: torchvision's RandomResizedCrop(scale 0.05-1, ratio 0.75-1.33), which draws
    from torch's default generator."""
    from torchvision import transforms

    return transforms.RandomResizedCrop.get_params(torch.empty(3, height, width), data.CROP_AREA, data.CROP_ASPECT)


def draws(sampler, height, width, seed, n=DRAWS):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    return np.array([sampler(height, width, g) for _ in range(n)], dtype=np.int64)


def trainperf_window(height, width, generator):
    return data.distorted_box_window(height, width, generator=generator)


def simulated(height, width, seed, n=DRAWS):
    rng = random.Random(seed)
    return np.array([rule_window(height, width, rng) for _ in range(n)], dtype=np.int64)


def check_against_rule(windows, reference, height, width):
    """The draws obey the rule's bounds and match the simulation's distribution (KS on area and aspect,
    a two-proportion test on the share of whole-image fallbacks)."""
    top, left, h, w = windows.T
    assert (top >= 0).all() and (left >= 0).all() and (top + h <= height).all() and (left + w <= width).all()
    whole = (h == height) & (w == width)
    ref_whole = (reference[:, 2] == height) & (reference[:, 3] == width)
    n = len(windows)
    pooled = (whole.sum() + ref_whole.sum()) / (2 * n)
    if 0 < pooled < 1:
        z = (whole.mean() - ref_whole.mean()) / math.sqrt(2 * pooled * (1 - pooled) / n)
        assert abs(z) < 4, f"whole-image share {whole.mean():.4f} against the rule's {ref_whole.mean():.4f}"
    else:
        assert whole.mean() == ref_whole.mean()
    crops = ~whole
    fraction = h * w / (height * width)
    # min_object_covered: a kept crop covers at least 10 % of the (whole-image) object box
    assert (fraction[crops] >= 0.1).all(), f"crops below 10 % of the image: {int((fraction[crops] < 0.1).sum())}"
    aspect = w / h
    slack = 0.5 / h  # width = round(height * ratio)
    assert ((aspect >= 0.75 - slack) & (aspect <= 1.33 + slack))[crops].all()
    # the corner is uniform in [0, size - crop): a crop narrower than the image never touches its far edge
    assert not ((left + w == width) & (w < width)).any() and not ((top + h == height) & (h < height)).any()
    ref_h, ref_w = reference[:, 2], reference[:, 3]
    area_p = stats.ks_2samp(fraction, ref_h * ref_w / (height * width)).pvalue
    aspect_p = stats.ks_2samp(aspect, ref_w / ref_h).pvalue
    assert area_p > 1e-3 and aspect_p > 1e-3, f"KS p-values: area {area_p:.2g}, aspect {aspect_p:.2g}"


@pytest.mark.parametrize(
    ("height", "width", "n", "whole_share"),
    [
        (375, 500, DRAWS, (0.0, 0.001)),  # an ImageNet-sized photo: an attempt is kept about 5 times in 6
        (80, 1000, 2000, (0.3, 0.42)),  # a strip: few attempts reach 10 % of the image, a third fall back
    ],
)
def test_training_crop_follows_sample_distorted_bounding_box_over_10000_draws(height, width, n, whole_share):
    windows = draws(trainperf_window, height, width, seed=1, n=n)
    reference = simulated(height, width, seed=2, n=n)
    check_against_rule(windows, reference, height, width)
    whole = ((windows[:, 2] == height) & (windows[:, 3] == width)).mean()
    assert whole_share[0] <= whole <= whole_share[1]
    # the height (not the area) is uniform: the median crop covers well under half of a photo
    if height == 375:
        assert 0.3 < np.median(windows[:, 2] * windows[:, 3] / (height * width)) < 0.4


def test_the_check_tells_torchvisions_random_resized_crop_from_the_rule():
    """The comparison above has the power to fail: the crop trainperf drew before does not pass it."""
    windows = draws(torchvision_window, 375, 500, seed=1)
    with pytest.raises(AssertionError, match="below 10 %|KS p-values"):
        check_against_rule(windows, simulated(375, 500, seed=2), 375, 500)


def test_a_crop_is_drawn_again_until_it_fits_and_the_whole_image_after_100_failures():
    g = torch.Generator().manual_seed(0)
    # 30 x 1000: the widest crop (40 x 30) is 4 % of the image, under the 5 % bound: every attempt fails
    assert {data.distorted_box_window(30, 1000, generator=g) for _ in range(50)} == {(0, 0, 30, 1000)}
    # a square image: some crop always fits, never the fallback, and never under 10 % of the image
    windows = [data.distorted_box_window(256, 256, generator=g) for _ in range(2000)]
    assert min(h * w for _, _, h, w in windows) >= 0.1 * 256 * 256
    assert max(h * w for _, _, h, w in windows) <= 256 * 256


def test_tf1_bilinear_resize_samples_at_i_times_in_over_out_without_half_pixel_centers():
    ramp = torch.arange(4, dtype=torch.uint8).reshape(1, 1, 4)
    assert data.tf1_resize_bilinear(ramp, (1, 2)).flatten().tolist() == [0.0, 2.0]  # not [0.5, 2.5]
    up = data.tf1_resize_bilinear(ramp, (1, 8)).flatten().tolist()
    assert up == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.0]  # the last input pixel repeats at the edge
    column = torch.tensor([0, 100], dtype=torch.uint8).reshape(1, 2, 1)
    assert data.tf1_resize_bilinear(column, (4, 1)).flatten().tolist() == [0.0, 50.0, 100.0, 100.0]


def test_evaluation_resizes_the_shorter_side_to_256_and_crops_the_centre_as_the_reference():
    # red = column index: after the resize, output column j shows the input column j * 250 / 320
    pixels = np.zeros((200, 250, 3), dtype=np.uint8)
    pixels[..., 0] = np.arange(250, dtype=np.uint8)[None, :]
    out = data.ReferenceEvalTransform()(Image.fromarray(pixels, "RGB"))
    assert out.shape == (3, 224, 224)
    # 200 x 250 -> 256 x 320 (int(250 * 1.28)); left = (320 - 224) // 2 = 48, sampled at 48 * 250 / 320 = 37.5
    red = out[0] + data.REFERENCE_MEAN_255[0]
    assert float(red[0, 0]) == pytest.approx(37.5, abs=1e-4)
    assert float(red[0, 1]) == pytest.approx(49 * 250 / 320, abs=1e-4)
    assert float(out[1, 0, 0]) == pytest.approx(-data.REFERENCE_MEAN_255[1])


def test_training_transform_crops_flips_then_resizes_to_224():
    pixels = np.zeros((200, 250, 3), dtype=np.uint8)
    pixels[..., 0] = np.arange(250, dtype=np.uint8)[None, :]
    image = Image.fromarray(pixels, "RGB")
    transform = data.ReferenceTrainTransform()
    torch.manual_seed(3)
    outs = [transform(image) + torch.tensor(data.REFERENCE_MEAN_255)[:, None, None] for _ in range(40)]
    assert all(o.shape == (3, 224, 224) for o in outs)
    # flipped crops run right to left, the others left to right; both occur
    slopes = [float(o[0, 0, -1] - o[0, 0, 0]) for o in outs]
    assert any(s > 0 for s in slopes) and any(s < 0 for s in slopes)
    # the first output column is an input column exactly (the grid is anchored at the crop's corner)
    assert all(float(o[0, 0, 0]) == round(float(o[0, 0, 0])) for o, s in zip(outs, slopes, strict=True) if s > 0)
