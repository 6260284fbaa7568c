"""minigo's mini "data": there is none (training positions come from self-play during the run).

What the mini scale needs beforehand is a working GNU Go to play the evaluation games against, so
``trainperf data prepare minigo`` writes nothing and ``trainperf data verify minigo`` starts GNU Go once
and asks it for a move. The modules that play Go (and import torch) are imported only when checking.
"""

from __future__ import annotations

from pathlib import Path


def prepare_mini(data_dir: Path) -> list[Path]:
    """Nothing to write: minigo trains on its own self-play games."""
    return []


def verify_mini(data_dir: Path) -> list[str]:
    """Problems with the GNU Go opponent of the mini scale ([] when it starts and answers a move)."""
    from trainperf.errors import TrainperfError
    from trainperf.workloads.minigo import KOMI, MINI_SIZE, arena

    try:
        arena.check_opponent(arena.Opponent(), MINI_SIZE, KOMI)
    except TrainperfError as e:
        return [str(e)]
    return []
