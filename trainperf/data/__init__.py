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
    fix: str = ""  # what to do when verify finds a problem; "" -> run `trainperf data prepare <key>`


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
        "minigo": MiniDataset(
            "no dataset (self-play); checks the GNU Go opponent (Debian gnugo)",
            lambda data_dir: [],
            _verify_minigo_opponent,
            fix="set up again (`make setup` installs GNU Go)",
        ),
    }


def _verify_minigo_opponent(data_dir: Path) -> list[str]:
    """minigo has no data to build; what its mini scale needs is a working GNU Go to play against."""
    from trainperf.errors import TrainperfError
    from trainperf.workloads.minigo import arena
    from trainperf.workloads.minigo.workload import KOMI, MINI_SIZE

    try:
        arena.check_opponent(arena.Opponent(), MINI_SIZE, KOMI)
    except TrainperfError as e:
        return [str(e)]
    return []


def dataset_for(key: str) -> MiniDataset:
    datasets = mini_datasets()
    if key not in datasets:
        raise NotAvailableError(f"benchmark {key!r} has no mini dataset yet; available: {', '.join(datasets)}")
    return datasets[key]
