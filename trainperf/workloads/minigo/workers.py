"""minigo's worker processes at the mini scale: each plays self-play games or evaluation games with a copy of the
network it is sent (the reference scale plays in the run's process). Module-level functions, so that a process
pool can send them by name."""

from __future__ import annotations

import signal

import torch

from trainperf.workloads.minigo import arena, mcts
from trainperf.workloads.minigo.model import mini_gonet


def init_worker() -> None:
    # A forked worker inherits the run's handlers, which turn SIGTERM and Ctrl-C into exceptions; then
    # Pool.terminate() (SIGTERM) could leave a worker alive and close() waiting for it forever. A worker
    # dies on SIGTERM and leaves Ctrl-C to the run.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)  # one core per worker; the workers together use every core


def ping(_: int) -> int:
    return 0


def worker_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The network's weights as the worker processes receive them (CPU tensors, no autograd)."""
    return {k: v.detach().cpu() for k, v in model.state_dict().items()}


def _worker_model(state: dict, size: int) -> torch.nn.Module:
    model = mini_gonet(size)  # the mini scale's workers (the reference plays in the run's process)
    model.load_state_dict(state)
    return model.eval()


def match_worker(job: tuple) -> arena.ArenaResult:
    state, size, komi, games, cfg, opponent, opening_moves, first_opening = job
    return arena.play_match(
        mcts.network_evaluator(_worker_model(state, size)),
        games=games,
        size=size,
        komi=komi,
        cfg=cfg,
        opponent=opponent,
        opening_moves=opening_moves,
        first_opening=first_opening,
    )


def self_play_worker(job: tuple) -> mcts.Games:
    state, size, komi, games, cfg, seed, temperature_moves = job
    torch.manual_seed(seed)
    return mcts.self_play(
        mcts.network_evaluator(_worker_model(state, size)),
        games=games,
        size=size,
        komi=komi,
        cfg=cfg,
        seed=seed,
        temperature_moves=temperature_moves,
    )
