"""minigo: the specs (mini, reference) and the workload.

MiniGo's training block is not an epoch over a dataset: one block is one **generation** (self-play games
with tree search -> training on the newest games -> evaluation). The harness counts blocks in "epochs" of
``steps_per_epoch`` steps and evaluates every ``eval_every_epochs`` epochs, so this workload sets
``steps_per_epoch = 1`` and ``eval_every_epochs = 1``: one harness step = one epoch = one block = one
generation, and ``max_epochs`` is the generation budget. :meth:`MiniGoWorkload.train_steps` overrides the
block step of the contract to play and train one generation per step.

reference: 19x19, the MiniGo residual network (19 blocks x 256 filters), win rate >= 0.50 against the
reference target checkpoint. mini: a small board against GNU Go through GTP, target calibrated by
measurement (README.md beside this file).
"""

from __future__ import annotations

import math
import multiprocessing
import os
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from trainperf.errors import DataError, UsageError
from trainperf.rules.closed import Rule, Tunable
from trainperf.spec import BenchmarkSpec, ProgressFn, Workload
from trainperf.workloads.minigo import arena, mcts
from trainperf.workloads.minigo.model import mini_gonet, reference_gonet

MINI_SIZE = 5  # board of the mini scale: 9x9 and 7x7 are out of reach in minutes (README.md)
KOMI = 7.5

REFERENCE = BenchmarkSpec(
    key="minigo",
    scale="reference",
    model="MiniGo ResNet (19 residual blocks x 256 filters, 19x19)",
    dataset="none: self-play games",
    metric="win_rate",
    target=0.50,  # MLPerf Training v2.0, closed_minigo.yaml: eval_accuracy >= 0.5 against the target model
    runs_required=10,
    runs_dropped=1,
    eval_every_epochs=1.0,  # one generation per block, evaluated after each
    max_epochs=100.0,
    max_minutes=24 * 60.0,
    hparam_keys=(
        "train_batch_size",
        "lr_boundaries",
        "lr_rates",
        "actual_selfplay_games_per_generation",
        "min_selfplay_games_per_generation",
    ),
    target_source="MLPerf Training v2.0 rules (closed_minigo.yaml)",
)

MINI = BenchmarkSpec(
    key="minigo",
    scale="mini",
    model=f"MiniGo ResNet, 3 residual blocks x 32 filters, {MINI_SIZE}x{MINI_SIZE}",
    dataset=f"none: self-play on {MINI_SIZE}x{MINI_SIZE}; opponent GNU Go 3.8 over GTP (Debian gnugo)",
    metric="win_rate",
    # 10 of 40 games against GNU Go level 0, same search as self-play (24 readouts). Measured (README.md):
    # the untrained network wins at most 0.10 (4/40) on seeds 1-5; the default recipe reaches 0.25 in 5 of 5
    # seeds, median time-to-train 80 s.
    target=0.25,
    runs_required=5,
    runs_dropped=1,
    eval_every_epochs=1.0,  # one harness block = one generation (see the module docstring)
    max_epochs=20.0,  # generations
    max_minutes=5.0,
    hparam_keys=(
        "train_batch_size",
        "lr_boundaries",
        "lr_rates",
        "actual_selfplay_games_per_generation",
        "min_selfplay_games_per_generation",
        "num_readouts",
        "train_steps_per_generation",
        "window_generations",
        "board_size",
        "komi",
        "eval_games",
        "eval_opponent",
    ),
    target_source="measured: README.md beside minigo/workload.py (40 games vs GNU Go level 0; untrained <= 0.10)",
)


class MiniGoWorkload(Workload):
    SPECS = {"mini": MINI, "reference": REFERENCE}

    MINI_RECIPE: dict[str, Any] = {
        "board_size": MINI_SIZE,
        "komi": KOMI,
        "train_batch_size": 256,
        "lr_boundaries": [60, 120],  # in optimizer steps
        "lr_rates": [0.003, 0.001, 0.0003],
        "weight_decay": 1e-4,
        "min_selfplay_games_per_generation": 64,
        "num_readouts": 24,
        "train_steps_per_generation": 20,
        "window_generations": 4,  # the training window: positions of the newest generations
        "dirichlet_alpha": 0.3,
        "temperature_moves": 8,
        "eval_games": 40,  # 20 openings x both colours; 20 games let an untrained network reach 0.20
        "eval_opponent": "gnugo --level 0",
        "opponent_level": 0,
        "opening_moves": 2,
    }
    # MLPerf v2.0 reference (mlcommons/training minigo, ml_perf/flags/19): 8192 self-play games per
    # generation (the closed rules fix min_selfplay_games_per_generation == 8192), 240 readouts, batch 4096
    # (gradient steps over the newest games), piecewise-constant learning rate.
    REFERENCE_RECIPE: dict[str, Any] = {
        "board_size": 19,
        "komi": KOMI,
        "train_batch_size": 4096,
        "lr_boundaries": [25600, 51200],
        "lr_rates": [0.32, 0.032, 0.0032],
        "weight_decay": 1e-4,
        "min_selfplay_games_per_generation": 8192,
        "num_readouts": 240,
        "train_steps_per_generation": 8,
        "window_generations": 5,
        "dirichlet_alpha": 0.03,
        "temperature_moves": 30,
        "eval_games": 100,
        "target_checkpoint": "",
    }
    CLOSED_RULES: dict[str, dict[str, Rule]] = {
        "reference": {"train_batch_size": Tunable(), "lr_boundaries": Tunable(), "lr_rates": Tunable()},
        "mini": {"train_batch_size": Tunable(), "lr_boundaries": Tunable(), "lr_rates": Tunable()},
    }
    DRY_RUN_BATCH = 4  # a dry run trains the full-size network on synthetic positions

    @classmethod
    def default_recipe(cls, scale: str) -> dict[str, Any]:
        return dict(cls.MINI_RECIPE if scale == "mini" else cls.REFERENCE_RECIPE)

    def prepare(self) -> None:
        self.recipe = r = {**self.default_recipe(self.spec.scale), **self.config.overrides}
        if self.dist.world_size != 1:
            raise UsageError("minigo runs on one process (self-play uses its own worker processes)")
        if len(r["lr_rates"]) != len(r["lr_boundaries"]) + 1:
            raise UsageError("minigo: lr_rates needs exactly one more value than lr_boundaries")
        self.size = r["board_size"]
        self.games_played: list[int] = []
        self.window: list[mcts.Games] = []
        self.generation = 0
        self.search_cfg = mcts.SearchConfig(playouts=r["num_readouts"], dirichlet_alpha=r["dirichlet_alpha"])
        self._pool = None
        if self.config.dry_run:
            if self.spec.scale == "reference":
                r["train_batch_size"] = self.DRY_RUN_BATCH
            return
        if self.spec.scale == "reference":
            ckpt = Path(r["target_checkpoint"] or self.data_dir / "minigo" / "reference" / "target.pt")
            if not ckpt.is_file():
                raise DataError(
                    f"minigo reference: the target checkpoint {ckpt} is missing; give the MLPerf target model "
                    "converted to this network's state_dict with --set target_checkpoint=PATH"
                )
            self.target_model = reference_gonet()
            self.target_model.load_state_dict(torch.load(ckpt, map_location="cpu"))
            self.target_model.eval()
        else:
            arena.check_opponent(arena.Opponent(level=r["opponent_level"]), self.size, r["komi"])
        # Self-play workers, one per core, started before the clock (their start-up is initialization).
        ctx = multiprocessing.get_context("fork")
        self._pool = ctx.Pool(self.workers, initializer=_init_worker)
        self._pool.map(_ping, range(self.workers))
        weakref.finalize(self, self._pool.terminate)

    @property
    def workers(self) -> int:
        return max(1, min(len(os.sched_getaffinity(0)), 8))

    # --- sizes: one step = one epoch = one generation ----------------------------------------------
    @property
    def global_batch_size(self) -> int:
        return self.recipe["train_batch_size"]

    @property
    def steps_per_epoch(self) -> int:
        return 1

    @property
    def train_samples(self) -> int:
        return self.recipe["min_selfplay_games_per_generation"]  # self-play games per generation

    @property
    def eval_samples(self) -> int:
        return self.recipe["eval_games"]

    # --- model and optimizer ----------------------------------------------------------------------
    def build_model(self) -> torch.nn.Module:
        return mini_gonet(self.size) if self.spec.scale == "mini" else reference_gonet()

    def build_optimizer(self, model: torch.nn.Module) -> tuple[Any, Any]:
        r = self.recipe
        # MiniGo trains with momentum SGD; at the mini size Adam reaches a useful policy in fewer steps.
        if self.spec.scale == "reference":
            opt = torch.optim.SGD(model.parameters(), lr=r["lr_rates"][0], momentum=0.9, weight_decay=r["weight_decay"])
        else:
            opt = torch.optim.AdamW(model.parameters(), lr=r["lr_rates"][0], weight_decay=r["weight_decay"])
        bounds, rates = r["lr_boundaries"], r["lr_rates"]

        def factor(step: int) -> float:
            return rates[sum(step >= b for b in bounds)] / rates[0]

        return opt, torch.optim.lr_scheduler.LambdaLR(opt, factor)

    def hparams(self) -> dict[str, Any]:
        r = self.recipe
        out = {k: r[k] for k in self.spec.hparam_keys if k in r}
        out["actual_selfplay_games_per_generation"] = r["min_selfplay_games_per_generation"]
        return out

    # --- one generation per step ---------------------------------------------------------------------
    def train_steps(
        self, model: torch.nn.Module, optimizer: Any, scheduler: Any, steps: int, progress: ProgressFn
    ) -> float:
        losses = [self._generation(model, optimizer, scheduler, progress) for _ in range(steps)]
        return float(np.mean(losses))

    def _generation(self, model: torch.nn.Module, optimizer: Any, scheduler: Any, progress: ProgressFn) -> float:
        r = self.recipe
        self.generation += 1
        if not self.config.dry_run:  # a dry run trains on synthetic positions, without self-play
            self.window = [*self.window, self._self_play(model)][-r["window_generations"] :]
        losses = []
        for batch in self.train_loader(self.generation):
            loss = float(self.train_step(model, batch, optimizer))
            scheduler.step()
            losses.append(loss)
            progress(self.global_batch_size, loss)
        return float(np.mean(losses))

    def _self_play(self, model: torch.nn.Module) -> mcts.Games:
        """The generation's games, split over the worker processes (one per core), each batching its games."""
        r = self.recipe
        state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
        per = math.ceil(r["min_selfplay_games_per_generation"] / self.workers)
        seeds = [self.config.seed * 1_000_003 + self.generation * 101 + w for w in range(self.workers)]
        jobs = [(state, self.size, r["komi"], per, self.search_cfg, s, r["temperature_moves"]) for s in seeds]
        parts = self._pool.map(_self_play_worker, jobs)
        self.games_played.append(sum(p.games for p in parts))
        return mcts.Games(
            np.concatenate([p.features for p in parts]),
            np.concatenate([p.policy for p in parts]),
            np.concatenate([p.outcome for p in parts]),
            sum(p.black_wins for p in parts),
            sum(p.games for p in parts),
        )

    def train_step(self, model: torch.nn.Module, batch: Any, optimizer: Any) -> torch.Tensor:
        x, pi, z = batch
        model.train()
        logits, value = model(x.to(self.device))
        loss = -(pi.to(self.device) * F.log_softmax(logits, 1)).sum(1).mean() + F.mse_loss(value, z.to(self.device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss.detach()

    def synthetic_batch(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(self.config.seed)
        b, planes = self.global_batch_size, (3 if self.spec.scale == "mini" else 17)
        x = (torch.rand(b, planes, self.size, self.size, generator=g) < 0.3).float()
        pi = torch.softmax(torch.randn(b, self.size * self.size + 1, generator=g), 1)
        z = torch.randint(0, 2, (b,), generator=g).float() * 2 - 1
        return x, pi, z

    def train_loader(self, epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """The training batches of generation ``epoch``: positions drawn from the window of the newest games.

        ``train_steps_per_generation`` batches, each of ``train_batch_size`` positions drawn uniformly
        (with replacement) from the last ``window_generations`` generations and turned by one of the 8
        board symmetries, from a generator seeded by (seed, generation). A dry run yields one synthetic
        batch.
        """
        if self.config.dry_run:
            yield self.synthetic_batch()
            return
        feats = np.concatenate([g.features for g in self.window])
        pols = np.concatenate([g.policy for g in self.window])
        outs = np.concatenate([g.outcome for g in self.window])
        rng = np.random.default_rng((self.config.seed, epoch))
        for _ in range(self.recipe["train_steps_per_generation"]):
            idx = rng.integers(0, len(outs), self.global_batch_size)
            x, p = symmetry(feats[idx], pols[idx], int(rng.integers(8)), self.size)
            yield torch.from_numpy(x), torch.from_numpy(p), torch.from_numpy(outs[idx])

    # --- evaluation --------------------------------------------------------------------------------
    def evaluate(self, model: torch.nn.Module) -> float:
        """Win rate of the network with tree search (no noise) against the fixed opponent."""
        if self.config.dry_run:
            return 0.0  # no opponent games in a dry run: nothing won
        r = self.recipe
        model.eval()
        cfg = mcts.SearchConfig(playouts=r["num_readouts"])
        ours = mcts.network_evaluator(model)
        if self.spec.scale == "reference":
            result = arena.play_network_match(
                ours,
                mcts.network_evaluator(self.target_model),
                games=r["eval_games"],
                size=self.size,
                komi=r["komi"],
                cfg=cfg,
            )
        else:
            result = arena.play_match(
                ours,
                games=r["eval_games"],
                size=self.size,
                komi=r["komi"],
                cfg=cfg,
                opponent=arena.Opponent(level=r["opponent_level"]),
                opening_moves=r["opening_moves"],
            )
        self.last_eval = result
        return result.win_rate


def symmetry(x: np.ndarray, pi: np.ndarray, k: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Apply one of the 8 board symmetries (k: 4 rotations x optional flip) to planes and policies."""
    board = pi[:, : size * size].reshape(-1, size, size)
    x, board = np.rot90(x, k % 4, axes=(2, 3)), np.rot90(board, k % 4, axes=(1, 2))
    if k >= 4:
        x, board = x[..., ::-1], board[..., ::-1]
    out = np.concatenate([board.reshape(len(pi), -1), pi[:, size * size :]], axis=1)
    return np.ascontiguousarray(x), np.ascontiguousarray(out)


def _init_worker() -> None:
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
