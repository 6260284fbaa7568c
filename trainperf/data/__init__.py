"""`trainperf data prepare|verify`: builds the mini datasets offline, with checksums."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trainperf.errors import NotAvailableError


@dataclass(frozen=True)
class MiniDataset:
    description: str
    prepare: Callable[[Path], list[Path]]
    verify: Callable[[Path], list[str]]


def mini_datasets() -> dict[str, MiniDataset]:
    """Benchmark key -> how its mini data is built (imported lazily: each pulls in its workload)."""
    from trainperf.workloads.detection import scenes as detection_scenes
    from trainperf.workloads.resnet import data as resnet_data

    detection = MiniDataset(
        "Fashion-MNIST object scenes in COCO json (boxes, RLE masks)",
        detection_scenes.prepare_mini,
        detection_scenes.verify_mini,
    )
    return {  # resnet first: the detection scenes are made from its Fashion-MNIST files
        "resnet": MiniDataset(
            "Fashion-MNIST IDX files from Debian's dataset-fashion-mnist",
            resnet_data.prepare_mini,
            resnet_data.verify_mini,
        ),
        "ssd": detection,  # one dataset shared by ssd and maskrcnn
        "maskrcnn": detection,
    }


def dataset_for(key: str) -> MiniDataset:
    datasets = mini_datasets()
    if key not in datasets:
        raise NotAvailableError(f"benchmark {key!r} has no mini dataset yet; available: {', '.join(datasets)}")
    return datasets[key]
