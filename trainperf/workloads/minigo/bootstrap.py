"""The reference scale's bootstrap generation: games of the bootstrap model, played once before any run.

The v2.0 reference does not play them on the clock: its checkpoint (``ml_perf/checkpoint/19``) holds the
bootstrap model *and* self-play games of it, which ``ml_perf/init_from_checkpoint.py`` copies into the run's
folders before ``train.sh`` starts the clock; the timed loop's first step trains on them
(``ml_perf/train_loop.py``: the first ``train()`` waits for games of the newest model there, and finds them).
trainperf cannot read those games (TFRecords of TF Examples), so it plays its own once, with the bootstrap
model on the v2.0 self-play recipe, and keeps them beside the model files::

    python -m trainperf.workloads.minigo.bootstrap <data-dir>/minigo/reference [--device cuda]

writes ``bootstrap_games.npz`` (from ``bootstrap.safetensors``). Every run then trains its first generation
on the same games, as every v2.0 run starts from the same checkpoint games: ``prepare`` checks the file
(untimed), ``load_data`` reads it on the clock (the reference reads its games on the clock too, in
``sample_records``), and generation 1 plays no self-play.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from trainperf.errors import DataError

BOOTSTRAP_FILE = "bootstrap.safetensors"  # the bootstrap model, in the form trainperf reads
BOOTSTRAP_GAMES_FILE = "bootstrap_games.npz"
BOOTSTRAP_SEED = 20220428  # one fixed seed: the same bootstrap games for every run
ARRAYS = ("features", "policy", "outcome", "counts", "settings")
FIX = "write it with `python -m trainperf.workloads.minigo.bootstrap <data-dir>/minigo/reference`"


def search_config(recipe: Any) -> Any:
    """The reference search's settings from a reference recipe."""
    from trainperf.workloads.minigo import reference_search as ref

    r = recipe
    return ref.SearchConfig(
        superko=r.positional_superko,
        fill_own_eyes=r.fill_own_eyes,
        num_readouts=r.num_readouts,
        fastplay_frequency=r.fastplay_frequency,
        fastplay_readouts=r.fastplay_readouts,
        virtual_losses=r.virtual_losses,
        dirichlet_alpha=r.dirichlet_alpha,
        noise_mix=r.noise_mix,
        value_init_penalty=r.value_init_penalty,
        target_pruning=r.target_pruning,
        policy_softmax_temp=r.policy_softmax_temp,
        soft_pick_cutoff=r.temperature_moves,
        min_resign_threshold=r.min_resign_threshold,
        max_resign_threshold=r.max_resign_threshold,
        disable_resign_pct=r.disable_resign_pct,
        max_game_moves=r.max_game_moves,
    )


def write_bootstrap_games(path: Path, model: Any, recipe: Any, device: str = "cpu") -> Any:
    """Play ``recipe.min_selfplay_games_per_generation`` self-play games of ``model`` (the bootstrap model)
    with the recipe's search and write them to ``path``; returns the games."""
    from trainperf.workloads.minigo import reference_search as ref

    model.to(device).eval()
    cfg = search_config(recipe)
    games = ref.self_play(
        ref.network_evaluator(model, device),
        games=recipe.min_selfplay_games_per_generation,
        size=recipe.board_size,
        komi=recipe.komi,
        cfg=cfg,
        seed=BOOTSTRAP_SEED,
    )
    settings = {"board_size": recipe.board_size, "komi": recipe.komi, "seed": BOOTSTRAP_SEED}
    settings |= {k: v for k, v in dataclasses.asdict(cfg).items()}
    counts = np.array([games.games, games.black_wins, games.resigned, games.moves], dtype=np.int64)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        np.savez(
            f,
            features=games.features,
            policy=games.policy,
            outcome=games.outcome,
            counts=counts,
            settings=np.array(json.dumps(settings, sort_keys=True)),
        )
    return games


def check_bootstrap_games(path: Path, *, size: int, games: int) -> None:
    """Untimed: the file exists, holds the arrays, and was played on this board with this many games
    (reads the small ``counts`` and ``settings`` only, no training example)."""
    if not path.is_file():
        raise DataError(f"minigo reference: the bootstrap games {path} are missing: {FIX}")
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = [name for name in ARRAYS if name not in data.files]
            if missing:
                raise DataError(f"minigo reference: {path} has no array {missing[0]!r}: not a bootstrap file; {FIX}")
            counts, settings = data["counts"], json.loads(str(data["settings"]))
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise DataError(f"minigo reference: {path} is not a bootstrap games file ({e}); {FIX}") from e
    if settings.get("board_size") != size or int(counts[0]) != games:
        raise DataError(
            f"minigo reference: {path} holds {int(counts[0])} games on {settings.get('board_size')}x"
            f"{settings.get('board_size')}, the recipe needs {games} on {size}x{size}: {FIX} "
            "with this recipe"
        )


def read_bootstrap_games(path: Path, *, size: int) -> Any:
    """The bootstrap generation's games (``reference_search.Games``), shapes checked."""
    from trainperf.workloads.minigo import reference_search as ref

    with np.load(path, allow_pickle=False) as data:
        feats, pols, outs, counts = data["features"], data["policy"], data["outcome"], data["counts"]
    m = len(outs)
    if feats.shape != (m, 13, size, size) or feats.dtype != np.uint8 or pols.shape != (m, size * size + 1):
        raise DataError(
            f"minigo reference: {path}: features {feats.shape} {feats.dtype} and policy {pols.shape} do not "
            f"fit {m} examples of 13 uint8 planes on {size}x{size}: {FIX}"
        )
    games, black_wins, resigned, moves = (int(c) for c in counts)
    return ref.Games(feats, pols.astype(np.float32), outs.astype(np.float32), black_wins, games, resigned, moves)


def main(argv: list[str] | None = None) -> int:
    import torch

    from trainperf.workloads.minigo import REFERENCE_RECIPE
    from trainperf.workloads.minigo.model import reference_gonet
    from trainperf.workloads.minigo.tfweights import load_reference_weights

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder", type=Path, help="<data-dir>/minigo/reference, holding bootstrap.safetensors")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args(argv)
    model = reference_gonet()
    load_reference_weights(model, args.folder / BOOTSTRAP_FILE, what="minigo reference: the bootstrap model")
    games = write_bootstrap_games(args.folder / BOOTSTRAP_GAMES_FILE, model, REFERENCE_RECIPE, args.device)
    print(f"{args.folder / BOOTSTRAP_GAMES_FILE}: {games.games} games, {len(games.outcome)} training examples")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
