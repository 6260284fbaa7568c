"""The run clock: read after synchronizing the device, and the maximum over ranks.

MLPerf's timing rules: the result is ``run_stop - run_start`` in wall-clock time; a rank must not stop
its clock before its device work is done, and the slowest rank defines the time.
"""

from __future__ import annotations

import time

from trainperf.dist import DistContext


def now_ms(dist: DistContext) -> float:
    """Wall-clock milliseconds, after the device has finished, maximum over ranks."""
    dist.synchronize()
    t = time.time() * 1000.0
    return dist.all_reduce([t], op="max")[0]


def local_ms() -> float:
    """Wall-clock milliseconds on this rank (for events whose exact time does not define the result)."""
    return time.time() * 1000.0
