"""Benchmark key -> workload class, imported lazily so that importing trainperf stays cheap."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from trainperf.errors import NotAvailableError, UsageError
from trainperf.spec import BENCHMARKS, SCALES

if TYPE_CHECKING:
    from trainperf.spec import BenchmarkSpec, Workload

# Explicit keys only: a benchmark is listed here when its workload really trains to its target.
_WORKLOADS: dict[str, str] = {
    "resnet": "trainperf.workloads.resnet.workload:ResNetWorkload",
    "ssd": "trainperf.workloads.ssd.workload:SSDWorkload",
    "maskrcnn": "trainperf.workloads.maskrcnn.workload:MaskRCNNWorkload",
    "minigo": "trainperf.workloads.minigo.workload:MiniGoWorkload",
}


def available() -> list[str]:
    """Benchmarks that trainperf implements, in MLPerf's order."""
    return [key for key in BENCHMARKS if key in _WORKLOADS]


def workload_class(key: str) -> type[Workload]:
    if key not in BENCHMARKS:
        raise UsageError(
            f"unknown benchmark {key!r}: the benchmarks are {', '.join(BENCHMARKS)} (see `trainperf list`)"
        )
    if key not in _WORKLOADS:
        raise NotAvailableError(
            f"benchmark {key!r} is not available yet in trainperf; available now: {', '.join(available())}"
        )
    module_name, _, attr = _WORKLOADS[key].partition(":")
    return getattr(importlib.import_module(module_name), attr)


def get_spec(key: str, scale: str) -> BenchmarkSpec:
    if scale not in SCALES:
        raise UsageError(f"unknown scale {scale!r}: choose one of {', '.join(SCALES)}")
    cls = workload_class(key)
    if scale not in cls.SPECS:
        raise NotAvailableError(f"benchmark {key!r} has no {scale!r} scale yet")
    return cls.SPECS[scale]
