"""dlrm: recommendation (MLPerf: DLRM on the Criteo 1TB click logs; mini: generated Criteo-format logs).

reference: the MLPerf v2.0 reference DLRM (bottom MLP 13-512-256-128, embeddings of 128, dot interaction,
top MLP 1024-1024-512-256-1, the reference's 26 table sizes), SGD with the v2.0 closed keys, AUC >= 0.8025
over the whole evaluation set, evaluated every 0.05 epoch. mini: a smaller DLRM of the same code on click
logs from a known latent-factor model, AUC target calibrated by measurement (README.md beside this file).
Pure data: no torch here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from trainperf.contract.closed_rules import Tunable
from trainperf.errors import UsageError
from trainperf.spec import EPOCHS, MINI_RUNAWAY_MINUTES, Benchmark, BenchmarkSpec, MiniData, Recipe

SGD_KEYS = (
    "opt_name",
    "opt_base_learning_rate",
    "opt_learning_rate_warmup_steps",
    "lr_decay_start_steps",
    "sgd_opt_base_learning_rate",
    "sgd_opt_learning_rate_decay_poly_power",
    "sgd_opt_learning_rate_decay_steps",
)


@dataclass(frozen=True, kw_only=True)
class DLRMRecipe(Recipe):
    """The reference's SGD and its learning-rate policy (``workload.lr_policy``): linear warm-up over
    ``opt_learning_rate_warmup_steps``, held, then from ``lr_decay_start_steps`` a polynomial decay of power
    ``sgd_opt_learning_rate_decay_poly_power`` over ``sgd_opt_learning_rate_decay_steps`` (0: none)."""

    # the optimizers build_optimizer makes
    CHOICES: ClassVar[Mapping[str, tuple[str, ...]]] = {"opt_name": ("sgd", "adagrad")}

    global_batch_size: int
    opt_name: str = "sgd"
    opt_base_learning_rate: float
    opt_learning_rate_warmup_steps: int
    lr_decay_start_steps: int
    sgd_opt_learning_rate_decay_steps: int
    sgd_opt_learning_rate_decay_poly_power: int = 2
    # The MLPs' learning rate when it differs from the tables' (``opt_base_learning_rate``); None: the same.
    dense_learning_rate: float | None = None

    def __post_init__(self) -> None:
        w, d = self.opt_learning_rate_warmup_steps, self.lr_decay_start_steps
        if d < w:  # the reference's LRPolicyScheduler refuses it (facebookresearch/dlrm dlrm_s_pytorch.py:106-107)
            raise UsageError(
                f"dlrm: lr_decay_start_steps={d} is before the end of the warm-up, opt_learning_rate_warmup_steps={w}: "
                "the reference stops there ('Learning rate warmup must finish before the decay starts'); set "
                f"lr_decay_start_steps to at least {w}"
            )


# The v2.0 reference's own run (mlcommons/training recommendation/dlrm, run_and_time.sh): batch 2048,
# learning rate 1.0, no warm-up and no decay (its LR policy's defaults).
REFERENCE_RECIPE = DLRMRecipe(
    global_batch_size=2048,
    opt_base_learning_rate=1.0,
    opt_learning_rate_warmup_steps=0,
    lr_decay_start_steps=0,
    sgd_opt_learning_rate_decay_steps=0,
)
# Mini recipe (README.md): Adagrad with the same LR policy, the tables (sparse gradients) at 0.3 and the
# MLPs at 0.02. Plain SGD at rates 1.0-4.0 learned the generated interactions too slowly (AUC 0.63-0.69
# after 200,000 samples) or diverged; one Adagrad rate of 0.3 or more for all parameters kills the MLPs'
# ReLUs (AUC 0.50), and one of 0.1-0.2 peaks near 0.75.
MINI_RECIPE = DLRMRecipe(
    global_batch_size=512,
    opt_name="adagrad",
    opt_base_learning_rate=0.3,
    dense_learning_rate=0.02,
    opt_learning_rate_warmup_steps=0,
    lr_decay_start_steps=0,
    sgd_opt_learning_rate_decay_steps=0,
)

REFERENCE = BenchmarkSpec(
    key="dlrm",
    scale="reference",
    model="DLRM (bottom MLP 13-512-256-128, embeddings of 128, dot interaction, top MLP 1024-1024-512-256-1)",
    dataset="Criteo 1TB click logs (day_0..day_23 TSV, or the reference's terabyte_processed_{train,test}.bin)",
    metric="auc",
    target=0.8025,  # MLPerf Training v2.0 rules, closed_dlrm.yaml: eval_accuracy >= 0.8025
    runs_required=5,
    runs_dropped=1,
    unit=EPOCHS,
    # v2.0: 20 evaluations per epoch. The reference's --test-freq=102400 counts iterations at its batch of
    # 2048: 102,400 x 2048 = 209.7 M samples = 0.05 of the 4,195,197,692 training samples.
    eval_interval=0.05,
    max_progress=1.0,  # the reference trains at most one epoch
    max_minutes=24 * 60.0,
    hparam_keys=SGD_KEYS,
    target_source="MLPerf Training v2.0 rules (closed_dlrm.yaml)",
    # training_rules.adoc's epoch reporting for the RCPs: "1 + Epoch / 20.0 (1.05, 1.1, 1.15...)", as the
    # published v2.0 logs have it (NVIDIA's first evaluation at epoch_num 1.049994); v2.0's rcps_dlrm.json counts so
    epoch_num_offset=1.0,
    # Criteo 1TB: days 0-22 train; the first ceil(N / 2) of day 23 are the reference's test split.
    train_samples=4_195_197_692,
    eval_samples=89_137_318,
    # The embedding tables are sharded over the ranks (exchanged by all-to-all, not all-reduced), so only the
    # dense MLPs are all-reduced: 24,036,595,969 - 187,767,399 rows x 128 (README.md).
    allreduced_parameters=2_368_897,
)

MINI = BenchmarkSpec(
    key="dlrm",
    scale="mini",
    model="MiniDLRM: bottom MLP 13-64-16, embeddings of 16, dot interaction, top MLP 128-64-1 "
    "(26 tables of 4,953 rows; 136,609 parameters)",
    dataset="Criteo-format TSV click logs from a known latent-factor model (400,000 train / 100,000 eval)",
    metric="auc",
    target=0.765,  # calibrated (README.md): best achievable AUC 0.8256, untrained 0.46-0.53
    metric_se=0.0016,  # bootstrap over the 100,000 evaluation samples (benchmarks/metric_error.py dlrm, B = 1000)
    runs_required=5,
    runs_dropped=1,
    unit=EPOCHS,
    eval_interval=0.25,
    max_progress=3.0,
    max_minutes=MINI_RUNAWAY_MINUTES,  # a runaway guard only: the budget is max_progress
    hparam_keys=(*SGD_KEYS, "dense_learning_rate"),
    target_source="trainperf calibration, 10 seeds (README.md beside dlrm/workload.py; best achievable AUC 0.8256)",
    train_samples=400_000,  # what generator.py draws
    eval_samples=100_000,
    allreduced_parameters=57_361,  # 136,609 - 4,953 rows x 16 of sharded tables (README.md)
)

CLOSED_SGD = {
    "global_batch_size": Tunable(),
    "opt_base_learning_rate": Tunable(),
    "opt_learning_rate_warmup_steps": Tunable(),
    "lr_decay_start_steps": Tunable(),
    "sgd_opt_learning_rate_decay_steps": Tunable(),
}

BENCHMARK = Benchmark(
    key="dlrm",
    title="recommendation",
    # The scaling model's assumption for published results: 8 x 6,912 = 55,296 samples a step on one 8-accelerator node.
    published_batch_per_accelerator=6_912,
    specs={"mini": MINI, "reference": REFERENCE},
    recipes={"mini": MINI_RECIPE, "reference": REFERENCE_RECIPE},
    # Closed division, MLPerf v2.0 (closed_dlrm.yaml and the rules' hyperparameter table): SGD, polynomial
    # decay of power 2; batch size, learning rate, warm-up, decay start and decay steps may change.
    closed_rules={
        "reference": CLOSED_SGD,
        "mini": {**CLOSED_SGD, "dense_learning_rate": Tunable()},
    },
    workload="trainperf.workloads.dlrm.workload:DLRMWorkload",
    smoke_fixture="trainperf.workloads.dlrm.data:write_smoke_fixture",
    mini_data=MiniData(
        description="Criteo-format click logs from a seeded latent-factor generator (known best AUC)",
        prepare="trainperf.workloads.dlrm.generator:prepare_mini",
        verify="trainperf.workloads.dlrm.generator:verify_mini",
    ),
)
