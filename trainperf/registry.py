"""The benchmarks: MLPerf's keys, each registered as data in ``trainperf/workloads/<key>/__init__.py``.

Reading a benchmark's facts imports only its folder's ``__init__`` (no torch); its workload class is
imported when a run needs it. Which keys exist comes from the rounds' data (``trainperf/rounds/*.toml``), the one
place outside a benchmark's folder that names benchmarks.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import TYPE_CHECKING

from trainperf import rounds
from trainperf.errors import NotAvailableError, UsageError
from trainperf.spec import SCALES, Benchmark

if TYPE_CHECKING:
    from trainperf.contract.workload import Workload
    from trainperf.spec import BenchmarkSpec, Recipe

# The benchmark keys trainperf implements, round by round (oldest first), each round in MLPerf's order.
BENCHMARKS: tuple[str, ...] = tuple(k for r in rounds.all_rounds() for k in r.implemented)


@cache
def benchmark(key: str) -> Benchmark:
    """The registered facts of benchmark ``key`` (imports ``trainperf.workloads.<key>``, never torch)."""
    if key not in BENCHMARKS:
        if (found := rounds.of_benchmark(key)) is not None:
            raise NotAvailableError(
                f"benchmark {key!r} of MLPerf Training {found.version} is not implemented in trainperf yet; "
                f"implemented: {', '.join(BENCHMARKS)} (see `trainperf list --round {found.version}`)"
            )
        raise UsageError(
            f"unknown benchmark {key!r}: the benchmarks are {', '.join(BENCHMARKS)} (see `trainperf list`)"
        )
    bench = importlib.import_module(f"trainperf.workloads.{key}").BENCHMARK
    if not isinstance(bench, Benchmark) or bench.key != key:
        raise RuntimeError(f"trainperf.workloads.{key} must define BENCHMARK = Benchmark(key={key!r}, ...)")
    return bench


def all_benchmarks() -> list[Benchmark]:
    return [benchmark(key) for key in BENCHMARKS]


def available(scale: str | None = None, round_version: str | None = None) -> list[str]:
    """Benchmarks whose workload runs (at ``scale``, or at any scale), of one round (or of every round), in MLPerf's
    order."""
    keys = rounds.get(round_version).implemented if round_version is not None else BENCHMARKS
    return [b.key for b in map(benchmark, keys) if b.workload is not None and (scale is None or b.available_at(scale))]


def round_of(key: str) -> rounds.Round:
    """The round an implemented benchmark belongs to."""
    benchmark(key)  # a clear error for an unknown key
    found = rounds.of_benchmark(key)
    assert found is not None  # BENCHMARKS comes from the rounds
    return found


def workload_class(key: str) -> type[Workload]:
    bench = benchmark(key)
    if bench.workload is None:
        raise NotAvailableError(
            f"benchmark {key!r} is not available yet in trainperf; available now: {', '.join(available())}"
        )
    module_name, _, attr = bench.workload.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def get_spec(key: str, scale: str) -> BenchmarkSpec:
    """The spec of an available benchmark at ``scale`` (a clear error otherwise)."""
    if scale not in SCALES:
        raise UsageError(f"unknown scale {scale!r}: choose one of {', '.join(SCALES)}")
    bench = benchmark(key)
    if bench.workload is None:
        raise NotAvailableError(
            f"benchmark {key!r} is not available yet in trainperf; available now: {', '.join(available())}"
        )
    if not bench.available_at(scale):
        others = [s for s in SCALES if bench.available_at(s)]
        hint = f"; it runs at {', '.join(f'--scale {s}' for s in others)}" if others else ""
        raise NotAvailableError(f"benchmark {key!r} has no {scale!r} scale yet{hint}")
    return bench.specs[scale]


def default_recipe(key: str, scale: str) -> Recipe:
    get_spec(key, scale)
    return benchmark(key).recipes[scale]


def evaluated_after_run_stop() -> frozenset[str]:
    """Benchmarks whose logs may hold evaluations after run_stop (their reference evaluates off the clock)."""
    return frozenset(b.key for b in all_benchmarks() if b.evaluates_after_run_stop)


def mlperf_runs(key: str) -> tuple[int, int]:
    """(runs required, dropped at each end) of MLPerf's rules: the reference spec's."""
    spec = benchmark(key).specs["reference"]
    return spec.runs_required, spec.runs_dropped
