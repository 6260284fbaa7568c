"""The reference's training samples: a patch from a case (foreground oversampling), then its augmentations.

mlcommons/training ``image_segmentation/pytorch/data_loading/pytorch_loader.py``, with its random draws made
from a generator seeded by (run seed, rank, epoch, case), so a run's samples do not depend on worker
processes:

* balanced crop: with probability ``oversampling`` (0.4) a patch around a foreground object: a class drawn
  among the case's foreground labels, one of the two largest connected components of that class (by bounding
  box volume), and its bounding box grown (or shrunk) at random to the patch size, kept inside the volume;
  otherwise a patch at a random corner in ``[0, size - patch)`` (the reference's ``randrange``);
* a flip along each spatial axis with probability 1/3;
* with probability 0.1 the image times ``1 + f``, f uniform in [0.7, 1.3] (the reference multiplies by
  ``1 + factor``, not by ``factor``; kept as it is);
* with probability 0.1 Gaussian noise of a standard deviation drawn uniformly in [0, 0.1].

The connected components of each case are found once, when the sampler is built, instead of on every draw
as the reference does: the same patches, less work.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from trainperf import seeds

FOREGROUND = (1, 2)
FLIP_PROB = 1 / 3
BRIGHTNESS = (0.3, 0.1)  # factor range around 1, probability
NOISE = (0.1, 0.1)  # largest standard deviation, probability


def largest_objects(label: np.ndarray) -> dict[int, list[tuple[slice, ...]]]:
    """For each foreground class present: the bounding boxes of its two largest connected components."""
    from scipy import ndimage

    out = {}
    for cl in FOREGROUND:
        components, n = ndimage.label(label == cl)
        if not n:
            continue
        boxes = [b for b in ndimage.find_objects(components) if b is not None]
        volumes = [np.prod([s.stop - s.start for s in b]) for b in boxes]
        out[cl] = [boxes[i] for i in np.argsort(volumes, kind="stable")[-2:]]
    return out


def _randrange(rng: np.random.Generator, n: int) -> int:
    return 0 if n <= 0 else int(rng.integers(n))


def fit_box(rng: np.random.Generator, start: int, stop: int, patch: int, size: int) -> tuple[int, int]:
    """Grow (or shrink) [start, stop) to ``patch`` voxels by a random split of the difference, inside [0, size)."""
    diff = patch - (stop - start)
    sign = 1 if diff >= 0 else -1
    diff = abs(diff)
    low_adj = _randrange(rng, diff)
    low = max(0, start - sign * low_adj)
    high = min(size, stop + sign * (diff - low_adj))
    short = patch - (high - low)
    if short > 0 and low == 0:
        high += short
    elif short > 0:
        low -= short
    return low, high


class TrainSampler:
    """Random training patches of a list of cases (each with ``image`` 1 x D x H x W and ``label``)."""

    def __init__(self, cases: Sequence, patch: Sequence[int], oversampling: float, seed: int) -> None:
        self.cases, self.patch, self.oversampling, self.seed = cases, tuple(patch), oversampling, seed
        self.objects = [largest_objects(c.label[0]) for c in cases]

    def crop(self, rng: np.random.Generator, i: int) -> tuple[slice, ...]:
        shape = self.cases[i].label.shape[1:]
        objects = self.objects[i]
        if rng.random() < self.oversampling and objects:
            cl = list(objects)[int(rng.integers(len(objects)))]
            box = objects[cl][int(rng.integers(len(objects[cl])))]
            return tuple(
                slice(*fit_box(rng, b.start, b.stop, p, s)) for b, p, s in zip(box, self.patch, shape, strict=False)
            )
        return tuple(
            slice(c, c + p) for c, p in ((_randrange(rng, s - p), p) for s, p in zip(shape, self.patch, strict=False))
        )

    def sample(self, i: int, epoch: int, rank: int) -> tuple[np.ndarray, np.ndarray]:
        """(image float32 1 x patch, label uint8 1 x patch) of case ``i`` for this epoch and rank."""
        rng = seeds.numpy_rng(self.seed, seeds.STREAM_AUGMENT, rank, epoch, i)
        box = (slice(None), *self.crop(rng, i))
        image, label = self.cases[i].image[box], self.cases[i].label[box]
        for axis in (1, 2, 3):
            if rng.random() < FLIP_PROB:
                image, label = np.flip(image, axis), np.flip(label, axis)
        image = np.ascontiguousarray(image, dtype=np.float32)
        if rng.random() < BRIGHTNESS[1]:
            image = image * np.float32(1 + rng.uniform(1 - BRIGHTNESS[0], 1 + BRIGHTNESS[0]))
        if rng.random() < NOISE[1]:
            image = image + rng.normal(0.0, rng.uniform(0.0, NOISE[0]), image.shape).astype(np.float32)
        return image, np.ascontiguousarray(label)
