"""Per-benchmark facts the scaling model needs, as data: parameter counts, dataset sizes, RCP tables.

Parameter counts come from each workload's README and spec (the reference models' own counts), never from
building a model. The reference convergence points (RCPs) are MLPerf's own tables, shipped in the
mlperf-logging package (``rcp_checker/training_2.0.0/rcps_<benchmark>.json``); the mini scale uses
trainperf's (``trainperf/rules/rcps/mini/``) where one exists.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from trainperf.errors import DataError, UsageError

# The benchmarks the model covers: a training step over a dataset, with an all-reduce of the gradients.
# minigo's work is self-play, not a dataset, and MLPerf v2.0 publishes no RCP for it.
SCALABLE = ("resnet", "ssd", "maskrcnn", "unet3d", "rnnt", "bert", "dlrm")

# Parameters whose gradients are all-reduced each step, per (benchmark, scale).
ALLREDUCED_PARAMETERS: dict[str, dict[str, int]] = {
    "resnet": {"reference": 25_557_032, "mini": 33_498},  # resnet/README.md
    "ssd": {"reference": 37_060_652, "mini": 509_303},  # ssd/README.md
    "maskrcnn": {"reference": 44_401_393, "mini": 1_297_040},  # maskrcnn/README.md
    "unet3d": {"reference": 31_190_243, "mini": 937_131},  # unet3d/README.md
    "bert": {"reference": 336_226_108, "mini": 1_495_554},  # bert/README.md (with the pretraining heads)
    # dlrm: the embedding tables are sharded over the ranks (exchanged by all-to-all, not all-reduced), so
    # only the dense MLPs are all-reduced: reference 24,036,595,969 - 187,767,399 rows x 128 = 2,368,897;
    # mini 136,609 - 4,953 rows x 16 = 57,361 (dlrm/README.md).
    "dlrm": {"reference": 2_368_897, "mini": 57_361},
    # rnnt has no workload yet: counted from the MLPerf v2.0 reference configuration's layer shapes (input
    # 80 mel x 3 stacked frames; encoder LSTMs 2 + 3 layers of 1024 with time stacking 2; prediction
    # network: embedding of 1,023 sentencepieces and 2 LSTMs of 320; joint 512, 1,024 outputs): 46,152,384.
    "rnnt": {"reference": 46_152_384},
}

BYTES_PER_GRADIENT = 4  # fp32 gradients (the reference implementations all-reduce fp32)

# Reference training-set sizes, to turn the RCPs' epochs into samples (bert's RCPs are already samples).
TRAIN_SAMPLES = {
    "resnet": 1_281_167,  # ImageNet-1k train (resnet/workload.py DATASET_SIZES)
    "ssd": 1_170_301,  # MLPerf OpenImages subset, train (MLPerf v2.0 retinanet reference)
    "maskrcnn": 117_266,  # COCO 2017 train images with annotations (MLPerf maskrcnn reference)
    "unet3d": 168,  # KiTS19 training cases (MLPerf v2.0 unet3d reference)
    "rnnt": 281_241,  # LibriSpeech train-clean-100 + 360 + other-500 utterances
    "bert": 1,  # unit: samples
    "dlrm": 4_195_197_692,  # Criteo 1TB, days 0-22 (dlrm/workload.py DATASET_SIZES)
}

# A typical per-accelerator batch of the single-node (8-accelerator) closed submissions, for the published
# results, which do not record batch sizes: 8 x this is the RCP batch size such a node uses (resnet 3,264,
# ssd 256, maskrcnn 96, unet3d 56, rnnt 512, bert 448, dlrm 55,296). An assumption, stated in README.md.
PUBLISHED_BATCH_PER_ACCELERATOR = {
    "resnet": 408,
    "ssd": 32,
    "maskrcnn": 12,
    "unet3d": 7,
    "rnnt": 64,
    "bert": 56,
    "dlrm": 6_912,
}

_MINI_RCPS = Path(__file__).resolve().parent.parent / "rules" / "rcps" / "mini"


def check_benchmark(key: str) -> None:
    if key == "minigo":
        raise UsageError(
            "minigo cannot be scaled by this model: its work is self-play, not steps over a dataset, and "
            f"MLPerf v2.0 publishes no reference convergence points for it; the model covers {', '.join(SCALABLE)}"
        )
    if key not in SCALABLE:
        raise UsageError(f"unknown benchmark {key!r}: the scaling model covers {', '.join(SCALABLE)}")


def gradient_bytes(key: str, scale: str) -> int:
    check_benchmark(key)
    counts = ALLREDUCED_PARAMETERS[key]
    if scale not in counts:
        raise UsageError(f"{key} has no {scale} model yet, so its gradient size is not known")
    return counts[scale] * BYTES_PER_GRADIENT


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


def _parse_rcp(text: str, key: str, source: str) -> RCPTable:
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
    return RCPTable(key, "samples" if key == "bert" else "epochs", source, batches, means)


def _reference_rcp_file(key: str) -> Path:
    import mlperf_logging

    name = "rcps_rnnt.json" if key == "rnnt" else f"rcps_{key}.json"
    return Path(mlperf_logging.__file__).parent / "rcp_checker" / "training_2.0.0" / name


def rcp_table(key: str, scale: str) -> RCPTable | None:
    """The RCP table for ``key`` at ``scale``; None where there is none (a mini benchmark without one)."""
    check_benchmark(key)
    path = _reference_rcp_file(key) if scale == "reference" else _MINI_RCPS / f"rcps_{key}.json"
    if not path.is_file():
        if scale == "reference":
            raise DataError(f"{path}: MLPerf's RCP table for {key} is missing; reinstall mlperf-logging")
        return None
    label = f"mlperf-logging training_2.0.0/{path.name}" if scale == "reference" else f"trainperf mini {path.name}"
    return _parse_rcp(path.read_text(encoding="utf-8"), key, label)
