"""One way to derive random streams from a run's seed: ``numpy.random.SeedSequence``.

Every stream of a run (data order, augmentation, self-play, initial weights) is named by a tuple of
whole numbers after the seed, for example ``(seed, STREAM_SHUFFLE, epoch)`` or ``(seed, STREAM_AUGMENT,
rank, epoch)``. SeedSequence hashes the whole tuple, so streams never collide the way arithmetic such as
``seed * 1000 + epoch * 10 + rank`` does once rank reaches 10.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

# Where a run's seed comes from. MLPerf v2.0 (closed, "Random numbers") allows seeding only from the clock,
# the system's randomness, or a generator seeded from those: a default run draws its seed from the
# system's randomness (``secrets``) in ``DRAWN_SEEDS``; ``--seed S`` makes runs reproducible (seeds S, S+1,
# ...) and is logged as such. Calibration of the mini targets uses ``CALIBRATION_SEEDS``, which no drawn
# seed can be, so a default suite never replays a calibration run.
SOURCE_SYSTEM = "system randomness"
SOURCE_FIXED = "fixed (--seed)"
DRAWN_SEEDS = (1 << 32, 1 << 62)  # [low, high): drawn seeds are at least 2**32
CALIBRATION_SEEDS = range(100_001, 100_101)  # 100 seeds below 2**32: disjoint from every drawn seed


def draw_seed() -> int:
    """A run's seed from the system's randomness, in ``DRAWN_SEEDS``."""
    low, high = DRAWN_SEEDS
    return low + secrets.randbelow(high - low)


def calibration_seeds(n: int) -> list[int]:
    """The first ``n`` calibration seeds (the same ones in every calibration script)."""
    if not 1 <= n <= len(CALIBRATION_SEEDS):
        raise ValueError(f"between 1 and {len(CALIBRATION_SEEDS)} calibration seeds, not {n}")
    return list(CALIBRATION_SEEDS[:n])


# Stream names (the second element of every key), so that two uses never share a stream by accident.
STREAM_SHUFFLE = 1  # the order of training samples (same on every rank: each takes its own slice)
STREAM_AUGMENT = 2  # random augmentation (per rank)
STREAM_SELF_PLAY = 3  # self-play games (per worker and generation)
STREAM_WINDOW = 4  # positions drawn from a replay window (per generation)
STREAM_DATA = 5  # anything else a workload draws (per rank)
STREAM_BOOTSTRAP = 6  # evaluation samples resampled by benchmarks/metric_error.py


def derive(seed: int, *keys: int) -> int:
    """A 63-bit integer seed for the stream ``(seed, *keys)``."""
    import numpy as np  # numpy: 40 ms to import, not for `trainperf --help` (spec.py reads this module's constants)

    state = np.random.SeedSequence([int(seed) % 2**64, *(int(k) for k in keys)]).generate_state(2, np.uint32)
    return int((int(state[0]) << 31) ^ int(state[1])) & (2**63 - 1)


def numpy_rng(seed: int, *keys: int) -> np.random.Generator:
    import numpy as np  # numpy: 40 ms to import, not for `trainperf --help` (spec.py reads this module's constants)

    return np.random.default_rng(np.random.SeedSequence([int(seed) % 2**64, *(int(k) for k in keys)]))


def torch_generator(seed: int, *keys: int):
    """A ``torch.Generator`` on the CPU for the stream ``(seed, *keys)``."""
    import torch

    return torch.Generator().manual_seed(derive(seed, *keys))
