"""The reference scale's bootstrap window: games of the bootstrap model, played once before any run.

The v2.0 reference does not play them on the clock: its checkpoint (``ml_perf/checkpoint/19``) holds the
bootstrap model *and* the self-play games of the previous run's last ``window_size`` (5) generations
(``ml_perf/make_checkpoint.py:131-157``: the checkpoint model's own games and those of the 4 models before it,
at least ``min_games_per_iteration`` each), which ``ml_perf/init_from_checkpoint.py`` copies into the run's
folders before ``train.sh`` starts the clock. The timed loop's first ``train()`` samples the newest 5 model
folders (``ml_perf/train_loop.py:165``), so generation 1 trains on a full window of 5 generations and each
later generation replaces the oldest of them. trainperf cannot read those games (TFRecords of TF Examples) nor
has the earlier models, so it plays ``window_generations`` generations of its own once, each of the recipe's
games per generation and all with the bootstrap model on the v2.0 self-play recipe, and keeps them beside
the model files::

    python -m trainperf.workloads.minigo.bootstrap <data-dir>/minigo/reference [--device cuda]

writes ``bootstrap_games.npz`` (from ``bootstrap.safetensors``). Every run then trains its first generation
on the same window, as every v2.0 run starts from the same checkpoint games: ``prepare`` checks the file
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
ARRAYS = ("features", "policy", "outcome", "examples", "counts", "settings")
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


def write_bootstrap_games(path: Path, model: Any, recipe: Any, device: str = "cpu") -> list[Any]:
    """Play ``recipe.window_generations`` generations of ``recipe.min_selfplay_games_per_generation`` self-play
    games of ``model`` (the bootstrap model; generation k from seed ``BOOTSTRAP_SEED + k``) with the recipe's
    search and write them to ``path``, oldest first; returns the generations' games."""
    from trainperf.workloads.minigo import reference_search as ref

    model.to(device).eval()
    cfg = search_config(recipe)
    window = [
        ref.self_play(
            ref.network_evaluator(model, device),
            games=recipe.min_selfplay_games_per_generation,
            size=recipe.board_size,
            komi=recipe.komi,
            cfg=cfg,
            seed=BOOTSTRAP_SEED + k,
        )
        for k in range(recipe.window_generations)
    ]
    settings = {"board_size": recipe.board_size, "komi": recipe.komi, "seed": BOOTSTRAP_SEED}
    settings |= {"generations": recipe.window_generations, **dataclasses.asdict(cfg)}
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        np.savez(
            f,
            features=np.concatenate([g.features for g in window]),
            policy=np.concatenate([g.policy for g in window]),
            outcome=np.concatenate([g.outcome for g in window]),
            examples=np.array([len(g.outcome) for g in window], dtype=np.int64),
            counts=np.array([[g.games, g.black_wins, g.resigned, g.moves] for g in window], dtype=np.int64),
            settings=np.array(json.dumps(settings, sort_keys=True)),
        )
    return window


def check_bootstrap_games(path: Path, *, size: int, games: int, generations: int) -> None:
    """Untimed: the file exists, holds the arrays, and was played on this board with ``generations``
    generations of ``games`` games (reads the small ``counts`` and ``settings`` only, no training example)."""
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
    held = counts[:, 0].tolist() if counts.ndim == 2 else [int(counts[0])]
    if settings.get("board_size") != size or held != [games] * generations:
        raise DataError(
            f"minigo reference: {path} holds {len(held)} generation(s) of {held} games on "
            f"{settings.get('board_size')}x{settings.get('board_size')}, the recipe's window needs {generations} "
            f"of {games} on {size}x{size}: {FIX} with this recipe"
        )


def read_bootstrap_games(path: Path, *, size: int) -> list[Any]:
    """The bootstrap window's generations (``reference_search.Games`` each, oldest first), shapes checked."""
    from trainperf.workloads.minigo import reference_search as ref

    with np.load(path, allow_pickle=False) as data:
        feats, pols, outs = data["features"], data["policy"], data["outcome"]
        examples, counts = data["examples"], data["counts"]
    m = len(outs)
    if feats.shape != (m, 13, size, size) or feats.dtype != np.uint8 or pols.shape != (m, size * size + 1):
        raise DataError(
            f"minigo reference: {path}: features {feats.shape} {feats.dtype} and policy {pols.shape} do not "
            f"fit {m} examples of 13 uint8 planes on {size}x{size}: {FIX}"
        )
    if int(examples.sum()) != m or counts.shape != (len(examples), 4):
        raise DataError(f"minigo reference: {path}: the generations' example counts do not add up to {m}: {FIX}")
    window, start = [], 0
    for n, (games, black_wins, resigned, moves) in zip(examples.tolist(), counts.tolist(), strict=True):
        part = slice(start, start + n)
        f, p, o = feats[part], pols[part].astype(np.float32), outs[part].astype(np.float32)
        window.append(ref.Games(f, p, o, black_wins, games, resigned=resigned, moves=moves))
        start += n
    return window


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
    window = write_bootstrap_games(args.folder / BOOTSTRAP_GAMES_FILE, model, REFERENCE_RECIPE, args.device)
    print(
        f"{args.folder / BOOTSTRAP_GAMES_FILE}: {len(window)} generations, {sum(g.games for g in window)} games, "
        f"{sum(len(g.outcome) for g in window)} training examples"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
