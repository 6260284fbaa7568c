"""`trainperf data prepare|verify`: builds and checks the mini datasets offline, from the registry's facts.

Each benchmark declares its mini data (``Benchmark.mini_data``: functions named ``"module:function"``);
this module orders them (a dataset made from another benchmark's files comes after it) and imports each
function only when it runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trainperf import registry
from trainperf.errors import NotAvailableError
from trainperf.spec import MiniData


@dataclass(frozen=True)
class MiniDataset:
    key: str
    facts: MiniData

    @property
    def description(self) -> str:
        return self.facts.description

    @property
    def fix(self) -> str:
        return self.facts.fix

    def prepare(self, data_dir: Path) -> list[Path]:
        return _function(self.facts.prepare)(data_dir)

    def verify(self, data_dir: Path) -> list[str]:
        return _function(self.facts.verify)(data_dir)


def _function(name: str) -> Callable:
    module, _, attr = name.partition(":")
    return getattr(importlib.import_module(module), attr)


def mini_datasets() -> dict[str, MiniDataset]:
    """Benchmark key -> its mini data, for every available benchmark, each after the ones it needs."""
    declared = {
        b.key: MiniDataset(b.key, b.mini_data)
        for b in registry.all_benchmarks()
        if b.mini_data is not None and b.available_at("mini")
    }
    ordered: dict[str, MiniDataset] = {}

    def visit(key: str, path: tuple[str, ...] = ()) -> None:
        if key in ordered or key not in declared:
            return
        if key in path:
            raise RuntimeError(f"mini data of {' -> '.join((*path, key))} needs itself")
        for need in declared[key].facts.needs:
            visit(need, (*path, key))
        ordered[key] = declared[key]

    for key in declared:
        visit(key)
    return ordered


def dataset_for(key: str) -> MiniDataset:
    datasets = mini_datasets()
    if key not in datasets:
        registry.benchmark(key)  # an unknown key -> a clear error naming the benchmarks
        raise NotAvailableError(f"benchmark {key!r} has no mini dataset yet; available: {', '.join(datasets)}")
    return datasets[key]
