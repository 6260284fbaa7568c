"""minigo: Go by self-play (MLPerf: 19x19 MiniGo; mini: a 5x5 board against GNU Go). Pure data.

Progress is counted in **generations**: one generation is self-play games with tree search, then
``train_steps_per_generation`` optimizer steps on positions drawn from the newest generations, and the
harness evaluates after each generation (``eval_interval=1``).

reference: 19x19, the MLPerf v2.0 recipe (``ml_perf/flags/19``): the 6-block x 64-filter network on 13
input planes, starting from the reference bootstrap model, win rate >= 0.50 against the reference target
model. mini: a small board against GNU Go through GTP, target calibrated by
measurement (README.md beside this file).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainperf.contract.closed_rules import Tunable
from trainperf.spec import GENERATIONS, MINI_RUNAWAY_MINUTES, Benchmark, BenchmarkSpec, MiniData, Recipe

MINI_SIZE = 5  # board of the mini scale: 9x9 and 7x7 are out of reach in minutes (README.md)
KOMI = 7.5

MLPERF_KEYS = (
    "train_batch_size",
    "lr_boundaries",
    "lr_rates",
    "actual_selfplay_games_per_generation",
    "min_selfplay_games_per_generation",
)


@dataclass(frozen=True, kw_only=True)
class MiniGoRecipe(Recipe):
    """Both scales' hyperparameters. ``lr_boundaries`` are counted in optimizer steps; the learning rate
    is ``lr_rates[i]`` after the i-th boundary (one more rate than boundaries)."""

    board_size: int
    komi: float = KOMI
    train_batch_size: int
    lr_boundaries: tuple[int, ...]
    lr_rates: tuple[float, ...]
    weight_decay: float = 1e-4
    min_selfplay_games_per_generation: int
    num_readouts: int
    train_steps_per_generation: int
    window_generations: int  # the training window: positions of the newest generations
    dirichlet_alpha: float
    temperature_moves: int
    eval_games: int
    # The rules and the move filter (go.py). The v2.0 reference forbids positional superko and lets a player
    # fill its own eyes (no eye rule in cc/position.cc); the mini scale was calibrated with simple ko and
    # without own-eye moves, and keeps them (README.md, "Conformance").
    positional_superko: bool = False
    fill_own_eyes: bool = False


@dataclass(frozen=True, kw_only=True)
class MiniRecipe(MiniGoRecipe):
    eval_opponent: str = "gnugo --level 0"  # logged; the opponent actually started is GNU Go at opponent_level
    opponent_level: int = 0
    opening_moves: int = 3  # fixed random opening moves before each evaluation game (arena.openings)
    confirm_games: int = 200  # the confirmation match played when the eval_games screen reaches the target


@dataclass(frozen=True, kw_only=True)
class ReferenceRecipe(MiniGoRecipe):
    """The v2.0 flags (``ml_perf/flags/19/*.flags``). ``num_readouts`` and the fields after it are
    ``selfplay.flags``' (``temperature_moves`` is the C++ ``soft_pick_cutoff``); ``eval_readouts``
    ``eval.flags``'; ``train_filter`` and ``window_generations`` ``train_loop.flags``'; the learning
    rate, batch and L2 ``train.flags``'; ``value_cost_weight`` ``architecture.flags``'."""

    positional_superko: bool = True  # cc/position.cc UpdateLegalMoves against the game's Zobrist hashes
    fill_own_eyes: bool = True  # cc/position.cc: every legal point is a candidate (no eye rule)
    value_cost_weight: float = 0.5
    momentum: float = 0.9
    train_filter: float = 0.3  # the fraction of the window's examples sampled for each generation's training
    fastplay_frequency: float = 0.75
    fastplay_readouts: int = 80
    virtual_losses: int = 4
    noise_mix: float = 0.3
    value_init_penalty: float = 0.2
    target_pruning: bool = True
    policy_softmax_temp: float = 0.98
    min_resign_threshold: float = -1.0
    max_resign_threshold: float = -0.9
    disable_resign_pct: float = 0.0
    max_game_moves: int = 722  # 2 * 19 * 19 (trainperf's cap; README)
    eval_readouts: int = 100
    bootstrap_checkpoint: str = ""  # "": <data-dir>/minigo/reference/bootstrap.safetensors
    target_checkpoint: str = ""  # "": <data-dir>/minigo/reference/target.safetensors
    bootstrap_games: str = ""  # "": <data-dir>/minigo/reference/bootstrap_games.npz (bootstrap.py)


MINI_RECIPE = MiniRecipe(
    board_size=MINI_SIZE,
    komi=KOMI,
    train_batch_size=256,
    lr_boundaries=(400, 800),  # in optimizer steps: generation 10 and 20
    lr_rates=(0.003, 0.001, 0.0003),
    weight_decay=1e-4,
    min_selfplay_games_per_generation=64,
    num_readouts=24,
    train_steps_per_generation=40,
    window_generations=4,
    dirichlet_alpha=0.3,
    temperature_moves=8,
    eval_games=40,  # the screen: 20 openings x both colours
    positional_superko=False,  # calibrated with simple ko (GNU Go's play enforces no more)
    fill_own_eyes=False,  # calibrated with own-eye moves left out (games end once only eyes are left)
    eval_opponent="gnugo --level 0",
    opponent_level=0,
    opening_moves=3,  # 2-move openings are only 85 up to symmetry: too few for 120 distinct openings
    confirm_games=200,  # 100 further openings x both colours, played when the screen reaches the target
)
# MLPerf v2.0 reference (mlcommons/training reinforcement/tensorflow/minigo, ml_perf/flags/19 as of
# 2022-04-28): 8192 self-play games per generation (closed_minigo.yaml fixes it), 800 readouts with 75 % fast
# moves of 80, batch 4096, learning rate 0.016 / 0.16 / 0.016 / 0.0016 at steps 128 / 10000 / 20000.
REFERENCE_RECIPE = ReferenceRecipe(
    board_size=19,
    komi=KOMI,
    train_batch_size=4096,
    lr_boundaries=(128, 10000, 20000),
    lr_rates=(0.016, 0.16, 0.016, 0.0016),
    weight_decay=1e-4,  # l2_strength: on every weight but biases and BN offsets, as dual_net's l2_cost
    min_selfplay_games_per_generation=8192,
    num_readouts=800,
    train_steps_per_generation=0,  # 0: floor(train_filter x the window's examples / batch), as train.py
    window_generations=5,
    dirichlet_alpha=0.03,
    temperature_moves=30,
    # ml_perf/eval_models.py --num_games (default 256; the README's run command passes none); every published
    # v2.0 minigo log has eval_games 256 (README.md, "Conformance")
    eval_games=256,
)

# A reference smoke run (`--smoke`): the same code on two tiny generations (what changes is only sizes): a
# window of 2 generations of 2 games (the bootstrap window's 4 games; generation 2 replaces the older one).
SMOKE_OVERRIDES = {
    "min_selfplay_games_per_generation": 2,
    "window_generations": 2,
    "num_readouts": 8,
    "fastplay_readouts": 4,
    "fastplay_frequency": 0.5,
    "max_game_moves": 16,
    "temperature_moves": 6,
    "eval_games": 2,
    "eval_readouts": 4,
    "train_filter": 1.0,
}

REFERENCE = BenchmarkSpec(
    key="minigo",
    scale="reference",
    model="MiniGo ResNet (6 residual blocks x 64 filters, 13 input planes, 19x19)",
    dataset="none: self-play games",
    metric="win_rate",
    target=0.50,  # MLPerf Training v2.0, closed_minigo.yaml: eval_accuracy >= 0.5 against the target model
    runs_required=10,
    runs_dropped=1,
    unit=GENERATIONS,
    eval_interval=1.0,  # evaluated after every generation
    max_progress=100.0,
    max_minutes=24 * 60.0,
    hparam_keys=MLPERF_KEYS,
    target_source="MLPerf Training v2.0 rules (closed_minigo.yaml)",
)

MINI = BenchmarkSpec(
    key="minigo",
    scale="mini",
    model=f"MiniGo ResNet, 3 residual blocks x 32 filters, {MINI_SIZE}x{MINI_SIZE}",
    dataset=f"none: self-play on {MINI_SIZE}x{MINI_SIZE}; opponent GNU Go 3.8 over GTP (Debian gnugo)",
    metric="win_rate",
    # The win rate of a confirmation match of 200 games (100 openings distinct up to symmetry, both
    # colours) against GNU Go level 0, played when the 40-game screen reaches the target too; standard
    # error at the target sqrt(0.3 * 0.7 / 200) = 0.032. Measured (README.md): untrained and
    # one-generation networks win 0.05-0.15 over 200 games; a network that does not learn passes within
    # the budget with probability < 0.05 (benchmarks/minigo_false_pass.py).
    target=0.30,
    runs_required=10,  # MLPerf v2.0 asks 10 runs of reinforcement learning
    runs_dropped=1,
    unit=GENERATIONS,
    eval_interval=1.0,  # evaluated after every generation
    max_progress=20.0,  # generations
    max_minutes=MINI_RUNAWAY_MINUTES,  # a runaway guard only: the budget is max_progress
    # Binomial, not bootstrapped: the games are independent draws, sqrt(0.30 * 0.70 / 200) over the confirmation.
    metric_se=0.032,
    hparam_keys=(
        *MLPERF_KEYS,
        "num_readouts",
        "train_steps_per_generation",
        "window_generations",
        "board_size",
        "komi",
        "eval_games",
        "confirm_games",
        "opening_moves",
        "eval_opponent",
    ),
    target_source=(
        "measured: README.md beside minigo/workload.py (200-game confirmation vs GNU Go level 0 after a 40-game "
        "screen; false-pass probability of a network that does not learn < 0.05)"
    ),
)

BENCHMARK = Benchmark(
    key="minigo",
    title="reinforcement learning (Go)",
    not_scalable="its work is self-play, not steps over a dataset, and MLPerf v2.0 publishes no reference "
    "convergence points for it",
    specs={"mini": MINI, "reference": REFERENCE},
    recipes={"mini": MINI_RECIPE, "reference": REFERENCE_RECIPE},
    # Closed division: the v2.0 rules let a submission tune the batch and the learning-rate schedule; the
    # games per generation are fixed (closed_minigo.yaml checks min_selfplay_games_per_generation == 8192).
    closed_rules={
        "reference": {"train_batch_size": Tunable(), "lr_boundaries": Tunable(), "lr_rates": Tunable()},
        "mini": {"train_batch_size": Tunable(), "lr_boundaries": Tunable(), "lr_rates": Tunable()},
    },
    workload="trainperf.workloads.minigo.workload:MiniGoWorkload",
    mini_data=MiniData(
        description="no dataset (self-play); checks the GNU Go opponent (Debian gnugo)",
        prepare="trainperf.workloads.minigo.data:prepare_mini",
        verify="trainperf.workloads.minigo.data:verify_mini",
        fix="set up again (`make setup` installs GNU Go)",
    ),
    smoke_fixture="trainperf.workloads.minigo.data:write_smoke_fixture",
    mlperf_rcps=False,  # MLPerf publishes no reference convergence points for minigo
    # v2.0 reference (reinforcement/tensorflow/minigo/ml_perf/eval_models.py, run after train_loop.py): every
    # generation is evaluated once training is over, which training_rules.adoc "Quality measure" allows (a
    # reference that evaluates timestamped checkpoints after the clock stops); published v2.0 logs (NVIDIA's,
    # ASUSTeK's, ...) log those eval_accuracy lines after run_stop. trainperf's own runs evaluate on the clock.
    evaluates_after_run_stop=True,
    history_redefined=("v0.7", "9x9 Go until v0.6, 19x19 from v0.7"),
)
