"""minigo's workload: self-play, training batches from the replay window, and win-rate evaluation.

Its facts (specs, recipes, closed rules) are in ``__init__.py``. The spec's unit is **generations**: the
harness calls :meth:`MiniGoWorkload.generation_batches` for generation 1, 2, ..., which plays that
generation's self-play games with the current network (split over worker processes), adds them to the
window of the newest ``window_generations`` generations and yields ``train_steps_per_generation`` batches
drawn from the window; the harness takes one optimizer step (and one scheduler step) per batch and
evaluates after each generation.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import signal
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F

from trainperf import seeds
from trainperf.checkpoint import load_tensors
from trainperf.errors import DataError, UsageError
from trainperf.spec import BenchmarkSpec, Recipe, RunConfig, Workload
from trainperf.workloads.minigo import arena, mcts
from trainperf.workloads.minigo.model import mini_gonet, reference_gonet

if TYPE_CHECKING:
    from trainperf.dist import DistContext

MAX_WORKERS = 8  # self-play worker processes: one per core, at most this many
MATCH_PART = 40  # evaluation games played at once (one GNU Go process each)


class MiniGoWorkload(Workload):
    SINGLE_PROCESS = True  # self-play uses its own worker processes
    # Each generation's batches come from self-play (generation_batches), not from one iterator of the harness.
    SWITCHES_NOT_APPLICABLE = {
        name: "minigo's batches come from each generation's self-play, which the harness does not read"
        for name in ("channels_last", "pin_memory", "prefetch")
    }
    BATCH_FIELD = "train_batch_size"
    DRY_RUN_LOCAL_BATCH = 4  # a reference dry run trains the full-size network on 4 synthetic positions a step

    def __init__(
        self, spec: BenchmarkSpec, recipe: Recipe, config: RunConfig, *, data_dir: Path, dist: DistContext
    ) -> None:
        super().__init__(spec, recipe, config, data_dir=data_dir, dist=dist)
        r = self.recipe
        if len(r.lr_rates) != len(r.lr_boundaries) + 1:
            raise UsageError("minigo: lr_rates needs exactly one more value than lr_boundaries")
        self.size = self.recipe.board_size
        self.search_cfg = mcts.SearchConfig(playouts=r.num_readouts, dirichlet_alpha=r.dirichlet_alpha)
        self.window: list[mcts.Games] = []  # the newest generations' games, oldest first
        self._pool = None
        self.target_model: torch.nn.Module | None = None

    # --- set-up (untimed) -----------------------------------------------------------------------------
    def prepare(self) -> None:
        """Check the opponent (mini: GNU Go; reference: the target checkpoint), start the self-play workers."""
        r = self.recipe
        if self.spec.scale == "reference":
            ckpt = Path(r.target_checkpoint or self.data_dir / "minigo" / "reference" / "target.pt")
            if not ckpt.is_file():
                raise DataError(
                    f"minigo reference: the target checkpoint {ckpt} is missing; give the MLPerf target model "
                    "converted to this network's state_dict with --set target_checkpoint=PATH"
                )
            self.target_model = reference_gonet()
            self.target_model.load_state_dict(load_tensors(ckpt, what="minigo reference: the target checkpoint"))
            self.target_model.eval()
        else:
            arena.check_opponent(arena.Opponent(level=r.opponent_level), self.size, r.komi)
        # One worker per core, started before the clock (their start-up is initialization); close() ends them.
        ctx = multiprocessing.get_context("fork")
        self._pool = ctx.Pool(self.workers, initializer=_init_worker)
        self._pool.map(_ping, range(self.workers))

    def close(self) -> None:
        """Terminate the self-play workers (idempotent)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.terminate()
            pool.join()

    @property
    def workers(self) -> int:
        return max(1, min(len(os.sched_getaffinity(0)), MAX_WORKERS))

    @property
    def _games_per_worker(self) -> int:
        """Each worker plays an equal share, rounded up: a generation has at least the recipe's games."""
        return math.ceil(self.recipe.min_selfplay_games_per_generation / self.workers)

    # --- sizes -------------------------------------------------------------------------------------------
    @property
    def train_samples(self) -> int:
        return self.recipe.min_selfplay_games_per_generation  # self-play games per generation

    @property
    def eval_samples(self) -> int:
        return self.recipe.eval_games

    # --- model and optimizer -------------------------------------------------------------------------
    def build_model(self) -> torch.nn.Module:
        return mini_gonet(self.size) if self.spec.scale == "mini" else reference_gonet()

    def build_optimizer(self, model: torch.nn.Module) -> tuple[Any, Any]:
        r = self.recipe
        # MiniGo trains with momentum SGD; at the mini size Adam reaches a useful policy in fewer steps.
        if self.spec.scale == "reference":
            opt = torch.optim.SGD(model.parameters(), lr=r.lr_rates[0], momentum=0.9, weight_decay=r.weight_decay)
        else:
            opt = torch.optim.AdamW(model.parameters(), lr=r.lr_rates[0], weight_decay=r.weight_decay)
        bounds, rates = r.lr_boundaries, r.lr_rates

        def factor(step: int) -> float:  # the harness steps the scheduler once per optimizer step
            return rates[sum(step >= b for b in bounds)] / rates[0]

        return opt, torch.optim.lr_scheduler.LambdaLR(opt, factor)

    def hparams(self) -> dict[str, Any]:
        values = self.recipe.as_dict()
        out = {
            k: list(values[k]) if isinstance(values[k], tuple) else values[k]
            for k in self.spec.hparam_keys
            if k in values
        }
        out["actual_selfplay_games_per_generation"] = self._games_per_worker * self.workers
        return out

    # --- training: one generation at a time ------------------------------------------------------------
    def train_batches(self) -> Iterator[Any]:
        """minigo has no dataset to iterate: its batches come from :meth:`generation_batches`.

        The harness never asks for it in the generations unit (and a dry run trains on repeated
        synthetic batches instead), so drawing from it is a bug: it raises rather than yield made-up
        positions that would pass for training data.
        """
        raise RuntimeError("minigo trains from generation_batches() (self-play), not from train_batches()")
        yield  # a generator: calling train_batches() is harmless, drawing from it raises

    def generation_batches(self, model: torch.nn.Module, generation: int) -> Iterator[Any]:
        """Self-play of ``generation`` with ``model`` (the window update), then its training batches."""
        r = self.recipe
        self.window = [*self.window, self._self_play(model, generation)][-r.window_generations :]
        yield from self._window_batches(generation)

    def _self_play(self, model: torch.nn.Module, generation: int) -> mcts.Games:
        """The generation's games, split over the worker processes (one per core), each batching its games."""
        if self._pool is None:
            raise RuntimeError("minigo: self-play needs the worker pool that prepare() starts")
        r = self.recipe
        state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
        per = self._games_per_worker
        worker_seeds = [
            seeds.derive(self.config.seed, seeds.STREAM_SELF_PLAY, generation, w) for w in range(self.workers)
        ]
        jobs = [(state, self.size, r.komi, per, self.search_cfg, s, r.temperature_moves) for s in worker_seeds]
        parts = self._pool.map(_self_play_worker, jobs)
        return mcts.Games(
            np.concatenate([p.features for p in parts]),
            np.concatenate([p.policy for p in parts]),
            np.concatenate([p.outcome for p in parts]),
            sum(p.black_wins for p in parts),
            sum(p.games for p in parts),
        )

    def _window_batches(self, generation: int) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """The training batches of ``generation``: positions drawn from the window of the newest games.

        ``train_steps_per_generation`` optimizer steps' worth of micro-batches (one batch of
        ``train_batch_size`` positions per step without gradient accumulation), each drawn uniformly
        (with replacement) from the last ``window_generations`` generations and turned by one of the 8
        board symmetries, from the stream (seed, STREAM_WINDOW, generation).
        """
        r = self.recipe
        feats = np.concatenate([g.features for g in self.window])
        pols = np.concatenate([g.policy for g in self.window])
        outs = np.concatenate([g.outcome for g in self.window])
        rng = seeds.numpy_rng(self.config.seed, seeds.STREAM_WINDOW, generation)
        for _ in range(r.train_steps_per_generation * r.gradient_accumulation_steps):
            idx = rng.integers(0, len(outs), self.local_batch_size)
            x, p = symmetry(feats[idx], pols[idx], int(rng.integers(8)), self.size)
            yield torch.from_numpy(x), torch.from_numpy(p), torch.from_numpy(outs[idx])

    def loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        """Policy cross-entropy against the search's visit distribution plus the value's squared error."""
        x, pi, z = batch
        logits, value = model(x.to(self.device))
        policy_loss = -(pi.to(self.device) * F.log_softmax(logits, 1)).sum(1).mean()
        return policy_loss + F.mse_loss(value, z.to(self.device))

    def synthetic_batch(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        g = seeds.torch_generator(self.config.seed, seeds.STREAM_DATA, self.dist.rank)
        b, planes = self.local_batch_size, (3 if self.spec.scale == "mini" else 17)
        x = (torch.rand(b, planes, self.size, self.size, generator=g) < 0.3).float()
        pi = torch.softmax(torch.randn(b, self.size * self.size + 1, generator=g), 1)
        z = torch.randint(0, 2, (b,), generator=g).float() * 2 - 1
        return x, pi, z

    # --- evaluation -----------------------------------------------------------------------------------
    # A dry run plays no games: the harness calls Workload.dry_run_evaluate (one forward pass on a
    # synthetic batch, win_rate 0.0) instead of evaluate.
    def evaluate(self, model: torch.nn.Module) -> Mapping[str, float]:
        """Win rate of the network with tree search (no noise) against the fixed opponent.

        mini: a screen of ``eval_games`` games; when it reaches the target, a confirmation match of
        ``confirm_games`` further games (other openings) decides, and its win rate is the evaluation's
        (the screen only chooses when to confirm: a lucky screen cannot carry the run). The other
        fields (games, wins per colour, disagreements with GNU Go's score) are logged beside it.
        """
        r = self.recipe
        model.eval()
        cfg = mcts.SearchConfig(playouts=r.num_readouts)
        ours = mcts.network_evaluator(model)
        if self.spec.scale == "reference":
            if self.target_model is None:
                raise RuntimeError("minigo reference: evaluation needs the target model that prepare() loads")
            result = arena.play_network_match(
                ours,
                mcts.network_evaluator(self.target_model),
                games=r.eval_games,
                size=self.size,
                komi=r.komi,
                cfg=cfg,
            )
            model.train()
            return {"win_rate": result.win_rate, **_match_fields(result)}
        screen = self._gnugo_match(ours, cfg, r.eval_games, first_opening=0)
        out = {"win_rate": screen.win_rate, "screen_win_rate": screen.win_rate, "screen_games": screen.games}
        total = screen
        if r.confirm_games and self.spec.reached({"win_rate": screen.win_rate}):
            confirmation = self._gnugo_match(ours, cfg, r.confirm_games, first_opening=r.eval_games // 2)
            out["win_rate"] = out["confirmation_win_rate"] = confirmation.win_rate
            total = screen + confirmation
        out["confirmation_games"] = total.games - screen.games
        model.train()
        return {**out, **_match_fields(total)}

    def _gnugo_match(self, ours: mcts.Evaluator, cfg: mcts.SearchConfig, games: int, *, first_opening: int):
        """``games`` games against GNU Go from openings ``first_opening``, ..., in parts of MATCH_PART games
        (one GNU Go process per game of a part)."""
        r = self.recipe
        result = arena.ArenaResult()
        for done in range(0, games, MATCH_PART):
            result = result + arena.play_match(
                ours,
                games=min(MATCH_PART, games - done),
                size=self.size,
                komi=r.komi,
                cfg=cfg,
                opponent=arena.Opponent(level=r.opponent_level),
                opening_moves=r.opening_moves,
                first_opening=first_opening + done // 2,
            )
        return result


def _match_fields(result: arena.ArenaResult) -> dict[str, float]:
    """The logged details of all the games an evaluation played."""
    return {
        "games": result.games,
        "black_wins": result.black_wins,
        "black_games": result.black_games,
        "white_wins": result.white_wins,
        "white_games": result.white_games,
        "disagreements": result.disagreements,
    }


def symmetry(x: np.ndarray, pi: np.ndarray, k: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Apply one of the 8 board symmetries (k: 4 rotations x optional flip) to planes and policies."""
    board = pi[:, : size * size].reshape(-1, size, size)
    x, board = np.rot90(x, k % 4, axes=(2, 3)), np.rot90(board, k % 4, axes=(1, 2))
    if k >= 4:
        x, board = x[..., ::-1], board[..., ::-1]
    out = np.concatenate([board.reshape(len(pi), -1), pi[:, size * size :]], axis=1)
    return np.ascontiguousarray(x), np.ascontiguousarray(out)


def _init_worker() -> None:
    # A forked worker inherits the run's handlers, which turn SIGTERM and Ctrl-C into exceptions; then
    # Pool.terminate() (SIGTERM) could leave a worker alive and close() waiting for it forever. A worker
    # dies on SIGTERM and leaves Ctrl-C to the run.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)  # one core per worker; the workers together use every core


def _ping(_: int) -> int:
    return 0


def _self_play_worker(job: tuple) -> mcts.Games:
    state, size, komi, games, cfg, seed, temperature_moves = job
    torch.manual_seed(seed)
    model = mini_gonet(size) if size != 19 else reference_gonet()
    model.load_state_dict(state)
    model.eval()
    return mcts.self_play(
        mcts.network_evaluator(model),
        games=games,
        size=size,
        komi=komi,
        cfg=cfg,
        seed=seed,
        temperature_moves=temperature_moves,
    )
