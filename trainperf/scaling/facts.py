"""What the scaling model reads of each benchmark, all stated by its ``Benchmark`` and specs
(``trainperf/workloads/<key>/__init__.py``): whether the model covers it, the parameters all-reduced each step,
the reference training-set size, the per-accelerator batch assumed for published results, and its RCP tables.

Parameter counts are the reference models' own counts (each workload's README), never measured by building a
model here. The reference convergence points (RCPs) are MLPerf's own tables, shipped in the mlperf-logging
package (``rcp_checker/training_2.0.0/rcps_<benchmark>.json``); the mini scale uses trainperf's
(``trainperf/rules/rcps/mini/``) where one exists.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from trainperf import registry
from trainperf.errors import DataError, UsageError
from trainperf.spec import SAMPLES

BYTES_PER_GRADIENT = 4  # fp32 gradients (the reference implementations all-reduce fp32)

_MINI_RCPS = Path(__file__).resolve().parent.parent / "rules" / "rcps" / "mini"


def scalable() -> tuple[str, ...]:
    """The benchmarks the model covers (a training step over a dataset, with an all-reduce of the gradients):
    those whose ``Benchmark.not_scalable`` is empty, in MLPerf's order."""
    return tuple(b.key for b in registry.all_benchmarks() if not b.not_scalable)


def check_benchmark(key: str) -> None:
    covered = scalable()
    if key in registry.BENCHMARKS and (why := registry.benchmark(key).not_scalable):
        raise UsageError(f"{key} cannot be scaled by this model: {why}; the model covers {', '.join(covered)}")
    if key not in covered:
        raise UsageError(f"unknown benchmark {key!r}: the scaling model covers {', '.join(covered)}")


def gradient_bytes(key: str, scale: str) -> int:
    """Bytes all-reduced each step: the spec's ``allreduced_parameters`` in fp32."""
    check_benchmark(key)
    spec = registry.benchmark(key).specs.get(scale)
    if spec is None or spec.allreduced_parameters is None:
        raise UsageError(f"{key} has no {scale} model yet, so its gradient size is not known")
    return spec.allreduced_parameters * BYTES_PER_GRADIENT


def train_samples(key: str) -> int:
    """The reference training set's samples, to turn the RCPs' epochs into samples (1 where the RCPs already
    count samples)."""
    check_benchmark(key)
    spec = registry.benchmark(key).specs["reference"]
    if spec.unit == SAMPLES:
        return 1
    if spec.train_samples <= 0:
        raise UsageError(f"{key}: its reference spec states no training-set size (train_samples)")
    return spec.train_samples


def published_batch_per_accelerator(key: str) -> int:
    """The typical per-accelerator batch assumed for published results
    (``Benchmark.published_batch_per_accelerator``)."""
    check_benchmark(key)
    batch = registry.benchmark(key).published_batch_per_accelerator
    if batch is None:
        raise UsageError(f"{key}: no per-accelerator batch is assumed for its published results")
    return batch


@dataclass(frozen=True)
class RCPTable:
    """Mean epochs (or samples) to converge at each RCP batch size, sorted by batch size."""

    benchmark: str
    unit: str  # "epochs" or "samples"
    source: str
    batches: tuple[float, ...]
    means: tuple[float, ...]

    def at(self, batch: float) -> tuple[float, str | None]:
        """The mean at ``batch``, interpolated linearly between RCP batch sizes; outside them, the nearest
        end's value and a warning saying so (the RCPs say nothing about batches they do not cover)."""
        import numpy as np

        lo, hi = self.batches[0], self.batches[-1]
        value = float(np.interp(batch, self.batches, self.means))
        if batch < lo or batch > hi:
            end = lo if batch < lo else hi
            span = f"{lo:g}-{hi:g}" if len(self.batches) > 1 else f"{lo:g} only"
            return value, (
                f"{self.benchmark}: global batch {batch:g} is outside the RCP batch sizes ({span}, {self.source}); "
                f"clamped to the {self.unit} to converge at batch {end:g}"
            )
        return value, None


def _parse_rcp(text: str, key: str, source: str, unit: str) -> RCPTable:
    """An RCP file is data: only its numbers are read ("BS", "Epochs to converge")."""
    where = f"{source} (RCP table of {key})"
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as e:
        raise DataError(f"{where}: not JSON ({e}); reinstall trainperf or mlperf-logging") from None
    if not isinstance(doc, dict) or not doc:
        raise DataError(f"{where}: expected an object of RCP records; reinstall trainperf or mlperf-logging")
    points: dict[float, list[float]] = {}
    for name, rec in doc.items():
        ok = isinstance(rec, dict)
        bs = rec.get("BS") if ok else None
        epochs = rec.get("Epochs to converge") if ok else None
        if not (isinstance(bs, int | float) and bs > 0 and isinstance(epochs, list) and epochs):
            raise DataError(f"{where}: record {name!r} needs a positive 'BS' and a list 'Epochs to converge'")
        if not all(isinstance(e, int | float) and math.isfinite(e) and e > 0 for e in epochs):
            raise DataError(f"{where}: record {name!r} has an 'Epochs to converge' that is not a positive number")
        points.setdefault(float(bs), []).extend(float(e) for e in epochs)
    batches = tuple(sorted(points))
    means = tuple(sum(points[b]) / len(points[b]) for b in batches)
    return RCPTable(key, unit, source, batches, means)


def _reference_rcp_file(key: str) -> Path:
    import mlperf_logging

    return Path(mlperf_logging.__file__).parent / "rcp_checker" / "training_2.0.0" / registry.benchmark(key).rcp_file


def rcp_table(key: str, scale: str) -> RCPTable | None:
    """The RCP table for ``key`` at ``scale``; None where there is none (a mini benchmark without one)."""
    check_benchmark(key)
    path = _reference_rcp_file(key) if scale == "reference" else _MINI_RCPS / registry.benchmark(key).rcp_file
    if not path.is_file():
        if scale == "reference":
            raise DataError(f"{path}: MLPerf's RCP table for {key} is missing; reinstall mlperf-logging")
        return None
    label = f"mlperf-logging training_2.0.0/{path.name}" if scale == "reference" else f"trainperf mini {path.name}"
    # the RCPs count what the reference's logs count (bert: samples, at both scales)
    unit = registry.benchmark(key).specs["reference"].unit
    return _parse_rcp(path.read_text(encoding="utf-8"), key, label, unit)
