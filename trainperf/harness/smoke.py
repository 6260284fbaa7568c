"""Reference smoke runs: a tiny fixture in the reference's own on-disk format, written by trainperf.

A smoke run checks a machine and the reference data path end to end without the real data set: each
benchmark that has one names a fixture writer (``Benchmark.smoke_fixture``) that writes a few real files
(JPEGs in the ImageNet folder layout, the MLPerf OpenImages layout with its COCO json, ...) under
``<out>/smoke-data/<key>/reference``. The run then reads them with the real ``prepare`` and
``load_data``, trains a few real steps and evaluates the whole fixture. The fixture lives in the smoke
run's own output folder, which is marked as holding smoke runs (``trainperf.json``), so that no timed
run is ever resumed from it or reads it.
"""

from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path

from trainperf import registry
from trainperf.errors import DataError, UsageError

FIXTURE_DIR = "smoke-data"
MARKER = ".trainperf-smoke-fixture"  # written last: a fixture folder without it is incomplete


def fixture_root(out: Path) -> Path:
    """The data folder of a smoke suite (its ``--data-dir``): ``<out>/smoke-data``."""
    return out / FIXTURE_DIR


def check_available(keys: tuple[str, ...]) -> None:
    """Every benchmark of a smoke suite has a fixture writer (checked before anything is written)."""
    missing = [k for k in keys if registry.benchmark(k).smoke_fixture is None]
    if missing:
        have = [b.key for b in registry.all_benchmarks() if b.smoke_fixture is not None]
        raise UsageError(
            f"--smoke: no reference smoke run for {', '.join(missing)} yet; smoke runs exist for "
            f"{', '.join(have)}: run those, or use --dry-run for a check on synthetic batches"
        )


def write_fixture(key: str, root: Path) -> tuple[Path, str]:
    """Write ``key``'s fixture under ``root/<key>/reference`` (kept if already complete); (folder, description)."""
    bench = registry.benchmark(key)
    if bench.smoke_fixture is None:
        check_available((key,))
    target = root / key / "reference"
    marker = target / MARKER
    if marker.is_file():
        return target, marker.read_text().strip()
    module, _, name = bench.smoke_fixture.partition(":")
    writer = getattr(importlib.import_module(module), name)
    partial = root / key / f".reference.partial-{os.getpid()}"
    try:
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        description = writer(partial)
        (partial / MARKER).write_text(description + "\n")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(partial, target)
    except OSError as e:
        raise DataError(
            f"cannot write the {key} smoke fixture under {root / key}: {e.strerror or e}; "
            "free space or choose another --out"
        ) from None
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return target, description
