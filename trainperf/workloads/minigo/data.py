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


TARGET_FILE = "target.safetensors"


def write_smoke_fixture(root: Path) -> str:
    """The reference smoke run's fixture: a bootstrap and a target model of the v2.0 network in the on-disk
    form trainperf reads (``convert``'s output: TF names and layouts in safetensors), with seeded random
    weights and batch-norm statistics, and the bootstrap model's games of the smoke recipe (``bootstrap.py``).
    Real games, training and evaluation run from them."""
    import dataclasses

    import numpy as np
    import torch

    from trainperf.workloads.minigo import REFERENCE_RECIPE, SMOKE_OVERRIDES
    from trainperf.workloads.minigo.bootstrap import BOOTSTRAP_FILE, BOOTSTRAP_GAMES_FILE, write_bootstrap_games
    from trainperf.workloads.minigo.model import reference_gonet
    from trainperf.workloads.minigo.tfweights import GLOBAL_STEP, reference_arrays, slot_layout, tf_layout, write_arrays

    for seed, name in ((20220428, BOOTSTRAP_FILE), (20220429, TARGET_FILE)):
        torch.manual_seed(seed)
        model = reference_gonet()
        g = torch.Generator().manual_seed(seed)
        for key, t in model.state_dict().items():  # statistics as a trained model has them, not the defaults
            if key.endswith("running_mean"):
                t.copy_(torch.randn(t.shape, generator=g) * 0.1)
            elif key.endswith("running_var"):
                t.copy_(torch.rand(t.shape, generator=g) + 0.5)
        arrays = reference_arrays(model)
        if name == BOOTSTRAP_FILE:  # the training state the converter keeps, of a checkpoint at step 0
            arrays |= {n: np.zeros(shape, np.float32) for n, shape in slot_layout(tf_layout()).items()}
            arrays[GLOBAL_STEP] = np.zeros(1, np.int64)
        write_arrays(arrays, root / name)
        if name == BOOTSTRAP_FILE:
            recipe = dataclasses.replace(REFERENCE_RECIPE, **SMOKE_OVERRIDES)
            write_bootstrap_games(root / BOOTSTRAP_GAMES_FILE, model, recipe)
    return (
        f"{BOOTSTRAP_FILE} and {TARGET_FILE}: the v2.0 network (TF names and layouts), seeded random weights; "
        f"{BOOTSTRAP_GAMES_FILE}: the bootstrap model's games of the smoke recipe, a window of generations"
    )
