"""minigo's workload: self-play, training batches from the replay window, and win-rate evaluation.

Its facts (specs, recipes, closed rules) are in ``__init__.py``. The spec's unit is **generations**: the
harness calls :meth:`MiniGoWorkload.generation_batches` for generation 1, 2, ..., which plays that
generation's self-play games with the current network (split over worker processes), adds them to the
window of the newest ``window_generations`` generations and yields ``train_steps_per_generation`` batches
drawn from the window; the harness takes one optimizer step (and one scheduler step) per batch and
evaluates after each generation.

The reference scale follows the MLPerf v2.0 recipe (``reference_search.py``'s search, ``features.py``'s 13 planes,
``tfweights.py``'s bootstrap and target models): self-play runs in this process, every search round of all
the generation's games evaluated in one batch on the run's device, and each generation trains on a
``train_filter`` sample of the window's examples.
"""

from __future__ import annotations

import dataclasses
import math
import multiprocessing
import os
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F

from trainperf import seeds
from trainperf.contract.workload import Workload
from trainperf.errors import TrainperfWarning, UsageError
from trainperf.spec import BenchmarkSpec, Recipe, RunConfig
from trainperf.workloads.minigo import SMOKE_OVERRIDES, arena, bootstrap, mcts, workers
from trainperf.workloads.minigo import reference_search as ref
from trainperf.workloads.minigo.data import TARGET_FILE
from trainperf.workloads.minigo.model import REFERENCE_PLANES, mini_gonet, reference_gonet
from trainperf.workloads.minigo.tfweights import load_reference_weights, read_training_state

if TYPE_CHECKING:
    from trainperf.dist import DistContext

MAX_WORKERS = 8  # self-play worker processes: one per core, at most this many
MATCH_PART = 40  # evaluation games played at once (one GNU Go process each)


@dataclass(frozen=True, kw_only=True)
class Flavour:
    """What a scale fixes beyond the recipe: which loop plays, and what a smoke run shrinks."""

    # True: the MLPerf v2.0 loop (the bootstrap and target models and the bootstrap window's games read
    # before the clock, reference_search.py's self-play in this process on the run's device, features.py's
    # planes, the recipe's value_cost_weight, evaluation against the target model); False: the mini loop
    # (mcts.py's self-play in worker processes, the loss's value term at weight 1, evaluation against GNU Go).
    reference_loop: bool
    planes: int  # input feature planes of the network (a dry run's synthetic positions)
    smoke_overrides: Mapping[str, Any] | None  # a smoke run's recipe changes (sizes only); None: no smoke run


FLAVOURS = {
    "reference": Flavour(reference_loop=True, planes=REFERENCE_PLANES, smoke_overrides=SMOKE_OVERRIDES),
    "mini": Flavour(reference_loop=False, planes=3, smoke_overrides=None),
}


class MiniGoWorkload(Workload):
    SINGLE_PROCESS = True  # self-play uses its own worker processes
    # Each generation's batches come from self-play (generation_batches), not from one iterator of the harness.
    SWITCHES_NOT_APPLICABLE = {
        name: "minigo's batches come from each generation's self-play, which the harness does not read"
        for name in ("channels_last", "pin_memory", "prefetch", "device_prefetch")
    }
    BATCH_FIELD = "train_batch_size"
    DRY_RUN_LOCAL_BATCH = 4  # a reference dry run trains the full-size network on 4 synthetic positions a step

    def __init__(
        self, spec: BenchmarkSpec, recipe: Recipe, config: RunConfig, *, data_dir: Path, dist: DistContext
    ) -> None:
        super().__init__(spec, recipe, config, data_dir=data_dir, dist=dist)
        self.flavour = FLAVOURS[spec.scale]
        if self.flavour.smoke_overrides is not None and config.smoke:  # two tiny generations of the same code
            self.recipe = dataclasses.replace(self.recipe, **self.flavour.smoke_overrides)
        r = self.recipe
        if len(r.lr_rates) != len(r.lr_boundaries) + 1:
            raise UsageError("minigo: lr_rates needs exactly one more value than lr_boundaries")
        self.size = self.recipe.board_size
        self.reference = self.flavour.reference_loop  # the MLPerf v2.0 loop (Flavour)
        self.search_cfg = mcts.SearchConfig(
            playouts=r.num_readouts,
            dirichlet_alpha=r.dirichlet_alpha,
            superko=r.positional_superko,
            fill_own_eyes=r.fill_own_eyes,
        )
        if self.reference:
            self.ref_cfg = bootstrap.search_config(r)
        self.window: list[Any] = []  # the newest generations' games, oldest first
        self._pool = None
        self.target_model: torch.nn.Module | None = None
        self.bootstrap_model: torch.nn.Module | None = None
        # the bootstrap checkpoint's global_step and momentum (torch names), as the reference's Estimator restores them
        self.bootstrap_state: tuple[int, dict[str, torch.Tensor]] | None = None
        self._evaluations = 0  # the reference's evaluations so far: each draws its own inference symmetries
        # the reference's bootstrap window (oldest generation first), generation 1's: read by load_data()
        self.bootstrap_games: list[ref.Games] | None = None

    # --- set-up (untimed) -----------------------------------------------------------------------------
    def prepare(self) -> None:
        """mini: check GNU Go and start the self-play workers. reference: read the bootstrap and target
        models and check the bootstrap window's games file (``bootstrap.py``)."""
        r = self.recipe
        if self.reference:
            # Both models read (names, shapes, values checked) before the clock; self-play runs in this
            # process, batched on the run's device: no worker pool.
            folder = self.data_dir / "minigo" / "reference"
            bootstrap.check_bootstrap_games(
                self._bootstrap_games_path,
                size=self.size,
                games=r.min_selfplay_games_per_generation,
                generations=r.window_generations,
            )
            self.bootstrap_model = reference_gonet()
            path = Path(r.bootstrap_checkpoint or folder / bootstrap.BOOTSTRAP_FILE)
            what = "minigo reference: the bootstrap model"
            load_reference_weights(self.bootstrap_model, path, what=what)
            self.bootstrap_state = read_training_state(self.bootstrap_model, path, what=what)
            if self.bootstrap_state is None:
                warnings.warn(
                    f"{what} {path} keeps no global_step and momentum slots: the learning-rate schedule starts at "
                    "step 0 and the momentum at 0, where the reference goes on from its checkpoint's; convert the "
                    "checkpoint again with `python -m trainperf.workloads.minigo.convert`",
                    TrainperfWarning,
                    stacklevel=2,
                )
            self.target_model = reference_gonet()
            load_reference_weights(
                self.target_model,
                Path(r.target_checkpoint or folder / TARGET_FILE),
                what="minigo reference: the target model",
            )
            self.target_model.to(self.device).eval()
            return
        arena.check_opponent(arena.Opponent(level=r.opponent_level), self.size, r.komi)
        # One worker per core, started before the clock (their start-up is initialization); close() ends them.
        ctx = multiprocessing.get_context("fork")
        self._pool = ctx.Pool(self.workers, initializer=workers.init_worker)
        self._pool.map(workers.ping, range(self.workers))

    @property
    def _bootstrap_games_path(self) -> Path:
        folder = self.data_dir / "minigo" / "reference"
        return Path(self.recipe.bootstrap_games or folder / bootstrap.BOOTSTRAP_GAMES_FILE)

    def load_data(self) -> None:
        """reference, on the clock: read the bootstrap window's games (the v2.0 loop reads the checkpoint's
        games on the clock too); generation 1 trains on them without self-play."""
        if self.reference:
            self.bootstrap_games = bootstrap.read_bootstrap_games(self._bootstrap_games_path, size=self.size)

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
        """mini: a fresh network. reference: the v2.0 network, from the bootstrap model (closed division:
        the run starts from it); a dry run, which reads no files, starts from torch's initialisation."""
        if not self.reference:
            return mini_gonet(self.size)
        model = reference_gonet()
        if self.bootstrap_model is not None:
            model.load_state_dict(self.bootstrap_model.state_dict())
        return model

    def build_optimizer(self, model: torch.nn.Module) -> tuple[Any, Any]:
        r = self.recipe
        # MiniGo trains with momentum SGD; at the mini size Adam reaches a useful policy in fewer steps.
        if self.reference:
            # dual_net's l2_cost: l2_strength * sum(w^2) / 2 over every variable but biases and BN offsets
            # (its gradient is weight decay l2_strength on those); TF's MomentumOptimizer is torch's SGD.
            decay = [p for n, p in model.named_parameters() if not _no_decay(n)]
            rest = [p for n, p in model.named_parameters() if _no_decay(n)]
            opt = torch.optim.SGD(
                [{"params": decay, "weight_decay": r.weight_decay}, {"params": rest, "weight_decay": 0.0}],
                lr=r.lr_rates[0],
                momentum=r.momentum,
            )
        else:
            opt = torch.optim.AdamW(model.parameters(), lr=r.lr_rates[0], weight_decay=r.weight_decay)
        bounds, rates = r.lr_boundaries, r.lr_rates
        offset = self._restore_momentum(model, opt) if self.reference else 0

        def factor(step: int) -> float:  # the harness steps the scheduler once per optimizer step
            return rates[sum(step + offset >= b for b in bounds)] / rates[0]

        return opt, torch.optim.lr_scheduler.LambdaLR(opt, factor)

    def _restore_momentum(self, model: torch.nn.Module, opt: torch.optim.Optimizer) -> int:
        """The bootstrap checkpoint's momentum slots into ``opt``; its global_step, from which the learning-rate
        schedule goes on (0 where the file keeps none, or in a dry run)."""
        if self.bootstrap_state is None:
            return 0
        step, momentum = self.bootstrap_state
        for name, p in model.named_parameters():
            opt.state[p]["momentum_buffer"] = momentum[name.removeprefix("module.")].to(p.device, p.dtype).clone()
        return step

    def hparams(self) -> dict[str, Any]:
        values = self.recipe.as_dict()
        out = {
            k: list(values[k]) if isinstance(values[k], tuple) else values[k]
            for k in self.spec.hparam_keys
            if k in values
        }
        if self.reference:  # self-play plays exactly the recipe's games, in this process
            out["actual_selfplay_games_per_generation"] = self.recipe.min_selfplay_games_per_generation
            if self.bootstrap_games is not None:  # logged beside: the window generation 1 trains on
                out["trainperf_bootstrap_generations"] = len(self.bootstrap_games)
                out["trainperf_bootstrap_games"] = sum(g.games for g in self.bootstrap_games)
                out["trainperf_bootstrap_examples"] = sum(len(g.outcome) for g in self.bootstrap_games)
            out |= {k: values[k] for k in REFERENCE_DETAILS}
        else:
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
        if self.reference:
            # Generation 1 trains on the bootstrap window, played before any run as the v2.0 checkpoint's
            # games are; every later generation plays with the model the generation before trained and
            # replaces the window's oldest generation.
            games, self.bootstrap_games = self.bootstrap_games, None
            if games is None or generation != 1:
                games = [self._reference_self_play(model, generation)]
            self.window = [*self.window, *games][-r.window_generations :]
            yield from self._reference_batches(generation)
            return
        self.window = [*self.window, self._self_play(model, generation)][-r.window_generations :]
        yield from self._window_batches(generation)

    def _reference_self_play(self, model: torch.nn.Module, generation: int) -> ref.Games:
        """The generation's games with the current network, in this process: each search round of all the
        games is one batch on the run's device."""
        model.eval()
        try:
            return ref.self_play(
                ref.network_evaluator(model, self.device),
                games=self.recipe.min_selfplay_games_per_generation,
                size=self.size,
                komi=self.recipe.komi,
                cfg=self.ref_cfg,
                seed=seeds.derive(self.config.seed, seeds.STREAM_SELF_PLAY, generation, 0),
            )
        finally:
            model.train()

    def _reference_batches(self, generation: int) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """v2.0's training of a generation: each of the window's examples kept with probability ``train_filter``
        (``cc/sample_records.cc:105``), shuffled, floor(sample / batch) steps (``train.py:226``), each example
        under its own random board symmetry (``random_rotation``)."""
        r = self.recipe
        feats = np.concatenate([g.features for g in self.window])
        pols = np.concatenate([g.policy for g in self.window])
        outs = np.concatenate([g.outcome for g in self.window])
        rng = seeds.numpy_rng(self.config.seed, seeds.STREAM_WINDOW, generation)
        sample = rng.permutation(np.flatnonzero(rng.random(len(outs)) < r.train_filter))
        batch = self.local_batch_size
        for start in range(0, len(sample) - batch + 1, batch):
            idx = np.sort(sample[start : start + batch])
            x, p = feats[idx].astype(np.float32), pols[idx].copy()
            ks = rng.integers(0, 8, len(idx))
            for k in range(1, 8):
                sel = ks == k
                if sel.any():
                    x[sel], p[sel] = symmetry(x[sel], p[sel], k, self.size)
            yield torch.from_numpy(x), torch.from_numpy(p), torch.from_numpy(outs[idx])

    def _self_play(self, model: torch.nn.Module, generation: int) -> mcts.Games:
        """The generation's games, split over the worker processes (one per core), each batching its games."""
        if self._pool is None:
            raise RuntimeError("minigo: self-play needs the worker pool that prepare() starts")
        r = self.recipe
        state = workers.worker_state(model)
        per = self._games_per_worker
        worker_seeds = [
            seeds.derive(self.config.seed, seeds.STREAM_SELF_PLAY, generation, w) for w in range(self.workers)
        ]
        jobs = [(state, self.size, r.komi, per, self.search_cfg, s, r.temperature_moves) for s in worker_seeds]
        parts = self._pool.map(workers.self_play_worker, jobs)
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
        weight = self.recipe.value_cost_weight if self.reference else 1.0  # v2.0: value_cost_weight 0.5
        return policy_loss + weight * F.mse_loss(value, z.to(self.device))

    def synthetic_batch(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        g = seeds.torch_generator(self.config.seed, seeds.STREAM_DATA, self.dist.rank)
        b, planes = self.local_batch_size, self.flavour.planes
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
        if self.reference:
            if self.target_model is None:
                raise RuntimeError("minigo reference: evaluation needs the target model that prepare() loads")
            match = ref.play_match(
                ref.network_evaluator(model, self.device),
                ref.network_evaluator(self.target_model, self.device),
                games=r.eval_games,
                size=self.size,
                komi=r.komi,
                readouts=r.eval_readouts,
                cfg=self.ref_cfg,
                seed=seeds.derive(self.config.seed, seeds.STREAM_DATA, self._evaluations),
            )
            self._evaluations += 1
            model.train()
            return {
                "win_rate": match.win_rate,
                "games": match.games,
                "black_wins": match.black_wins,
                "black_games": match.black_games,
                "white_wins": match.wins - match.black_wins,
                "white_games": match.games - match.black_games,
            }
        cfg = mcts.SearchConfig(playouts=r.num_readouts, fill_own_eyes=r.fill_own_eyes)  # GNU Go: simple ko
        state = workers.worker_state(model)
        screen = self._gnugo_match(state, cfg, r.eval_games, first_opening=0)
        out = {"win_rate": screen.win_rate, "screen_win_rate": screen.win_rate, "screen_games": screen.games}
        total = screen
        if r.confirm_games and self.spec.reached({"win_rate": screen.win_rate}):
            confirmation = self._gnugo_match(state, cfg, r.confirm_games, first_opening=r.eval_games // 2)
            out["win_rate"] = out["confirmation_win_rate"] = confirmation.win_rate
            total = screen + confirmation
        out["confirmation_games"] = total.games - screen.games
        model.train()
        return {**out, **_match_fields(total)}

    def _gnugo_match(self, state: dict, cfg: mcts.SearchConfig, games: int, *, first_opening: int):
        """``games`` games against GNU Go from openings ``first_opening``, ..., split over the worker processes.

        The games are cut into parts of MATCH_PART (one GNU Go process per game of a part) and each part into
        one share per worker; all shares go to the pool at once, so one worker searches while the other's
        opponents think. Game g of a part meets GNU Go seeded ``g`` whichever share plays it, so the games
        do not depend on the number of workers."""
        if self._pool is None:
            raise RuntimeError("minigo: evaluation needs the worker pool that prepare() starts")
        r = self.recipe
        jobs = []
        for done in range(0, games, MATCH_PART):
            part = min(MATCH_PART, games - done)
            share = 2 * math.ceil(part / 2 / self.workers)  # even: each opening with both colours
            for offset in range(0, part, share):
                opponent = arena.Opponent(level=r.opponent_level, seed=offset)
                opening = first_opening + (done + offset) // 2
                jobs.append(
                    (state, self.size, r.komi, min(share, part - offset), cfg, opponent, r.opening_moves, opening)
                )
        result = arena.ArenaResult()
        for part in self._pool.map(workers.match_worker, jobs, chunksize=1):
            result = result + part
        return result


# The reference's further logged settings (beside MLPERF_KEYS): what a reader needs to compare a run.
REFERENCE_DETAILS = (
    "num_readouts",
    "fastplay_frequency",
    "fastplay_readouts",
    "virtual_losses",
    "window_generations",
    "train_filter",
    "value_cost_weight",
    "eval_games",
    "eval_readouts",
)


def _no_decay(name: str) -> bool:
    """Biases and batch-norm offsets (torch names both ``bias``): dual_net leaves its 'bias' and 'beta'
    variables out of the L2 cost; BN scales ('gamma') and all kernels are in it."""
    return name.endswith(".bias")


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
