"""bert: language (MLPerf: BERT-large phase-2 pretraining on Wikipedia; mini: a small BERT on a Debian corpus).

reference: BERT-large from the reference checkpoint, masked LM plus next sentence on the packed HDF5 form of
Wikipedia 2020-01-01, LAMB with the v2.0 closed keys, masked-LM accuracy >= 0.720 on the 10,000-example
evaluation set, evaluated every FLOOR(0.05 * (230.23 * global_batch + 3,000,000), 25,000) samples. mini: a
small BERT of the same code on English prose from Debian text packages written in the same HDF5 layout, target
calibrated by measurement (README.md beside this file). Pure data: no torch here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainperf.contract.closed_rules import Tunable
from trainperf.spec import MINI_RUNAWAY_MINUTES, SAMPLES, Benchmark, BenchmarkSpec, MiniData, Recipe

# The v2.0 closed keys of closed_bert.yaml (num_warmup_steps is logged with opt_learning_rate_warmup_steps'
# value, as the reference logs both).
LAMB_KEYS = (
    "opt_base_learning_rate",
    "opt_epsilon",
    "opt_lamb_beta_1",
    "opt_lamb_beta_2",
    "opt_lamb_weight_decay_rate",
    "opt_learning_rate_warmup_steps",
    "num_warmup_steps",
    "start_warmup_step",
    "opt_learning_rate_training_steps",
)


@dataclass(frozen=True, kw_only=True)
class BertRecipe(Recipe):
    """LAMB with the reference's learning-rate policy: linear warm-up from ``start_warmup_step`` over
    ``opt_learning_rate_warmup_steps``, then linear decay to 0 at ``opt_learning_rate_training_steps``;
    gradients clipped to a global norm of 1.0 first (the reference's clip_by_global_norm)."""

    global_batch_size: int
    opt_base_learning_rate: float
    opt_epsilon: float = 1e-6
    opt_lamb_beta_1: float = 0.9
    opt_lamb_beta_2: float = 0.999
    opt_lamb_weight_decay_rate: float = 0.01
    opt_learning_rate_warmup_steps: int
    start_warmup_step: int = 0
    opt_learning_rate_training_steps: int
    clip_grad_norm: float = 1.0
    # GELU's form (model.BertConfig.gelu_approximate): "tanh", the reference's, or "none" (exact erf), the form the
    # mini recipe was calibrated with and keeps (README.md).
    model_gelu_approximate: str = "tanh"
    # The warm-up's first step, as the reference's create_optimizer counts it (optimization.py:53-72): global_step
    # from 0, so that step k - start_warmup_step takes (k - start_warmup_step) / warm-up of the rate and the first
    # takes 0. The mini recipe keeps the count it was calibrated with, one step ahead: (k - start + 1) / warm-up.
    opt_learning_rate_warmup_from_zero: bool = True


def eval_interval_samples(recipe: Recipe) -> float:
    """MLPerf v2.0 rules: evaluate every FLOOR(0.05 * (230.23 * global_batch + 3,000,000), 25,000) samples."""
    batch = recipe.global_batch_size  # type: ignore[attr-defined]
    return float(math.floor(0.05 * (230.23 * batch + 3_000_000) / 25_000) * 25_000)


# The reference code's run at the smallest batch of the v2.0 RCPs: mlperf-logging
# rcp_checker/training_2.0.0/rcps_bert.json, record "bert_ref_256" (global batch 256, LAMB learning rate 3.5e-4,
# no warm-up, 13,700 training steps, beta 0.9/0.999, epsilon 1e-6, weight decay 0.01, no gradient accumulation).
# The reference README's own 8-GPU run (global batch 24: --train_batch_size is the total, split over --num_gpus)
# is below every RCP batch, so the RCP check could not judge it (README.md, Conformance).
REFERENCE_RECIPE = BertRecipe(
    global_batch_size=256,
    opt_base_learning_rate=3.5e-4,
    opt_learning_rate_warmup_steps=0,
    opt_learning_rate_training_steps=13_700,
)
# Mini recipe (README.md): a larger learning rate than the reference's (a model trained from scratch, not from a
# checkpoint; 8e-3 learned faster than 3e-3, 2e-2 and 5e-2 in a short sweep), a short warm-up, and a decay
# planned well past the budget.
MINI_RECIPE = BertRecipe(
    global_batch_size=64,
    opt_base_learning_rate=8e-3,
    opt_learning_rate_warmup_steps=100,
    opt_learning_rate_training_steps=3000,
    model_gelu_approximate="none",
    opt_learning_rate_warmup_from_zero=False,
)

REFERENCE = BenchmarkSpec(
    key="bert",
    scale="reference",
    model="BERT-large (24 layers, hidden 1024, 16 heads; 336,226,108 parameters), from the reference checkpoint",
    dataset="Wikipedia 2020-01-01, packed HDF5 (10,000-sample evaluation set)",
    metric="mlm_accuracy",
    target=0.720,  # MLPerf Training v2.0 rules, closed_bert.yaml: eval_accuracy >= 0.720
    runs_required=10,  # v2.0 training_rules.adoc "Benchmark Results": 10 runs for NLP
    runs_dropped=1,
    unit=SAMPLES,  # MLPerf's BERT logs count samples (epoch_num holds samples trained)
    eval_interval=eval_interval_samples,
    max_progress=20_000_000.0,  # a bound well past published convergence (a few million samples)
    max_minutes=24 * 60.0,
    hparam_keys=LAMB_KEYS,
    target_source="MLPerf Training v2.0 rules (closed_bert.yaml); evaluation interval from the v2.0 rules",
    # The 10,000-example evaluation set; its training examples are counted from the shards by a real run (a
    # dry run logs 0, not a guess).
    eval_samples=10_000,
    allreduced_parameters=336_226_108,  # README.md (with the pretraining heads)
)

MINI = BenchmarkSpec(
    key="bert",
    scale="mini",
    model="MiniBERT: 2 layers, hidden 128, 2 heads, 8,192 WordPieces (1.50 M parameters)",
    dataset="English prose from Debian dict-gcide, wordnet-base, python3-doc in the packed HDF5 layout "
    "(125,492 train / 2,000 eval examples of 64 tokens)",
    metric="mlm_accuracy",
    target=0.110,  # calibrated: README.md (unigram guesser 0.066, untrained model 0.000)
    runs_required=10,
    runs_dropped=1,
    unit=SAMPLES,
    eval_interval=3_200.0,  # every 50 steps of the default batch (about 10 s)
    max_progress=96_000.0,  # the budget: 3.75x the 25,600 samples the slowest calibration seed needed (README.md)
    max_minutes=MINI_RUNAWAY_MINUTES,  # a runaway guard only: the budget is max_progress
    hparam_keys=LAMB_KEYS,
    target_source="measured: README.md beside bert/workload.py",
    metric_se=0.0023,  # benchmarks/metric_error.py bert: 0.1118 at 25,600 samples, seed 100001, B = 1000 (README.md)
    train_samples=125_492,  # the mini corpus (README.md)
    eval_samples=2_000,  # what mini.py draws
    allreduced_parameters=1_495_554,  # README.md
)

BENCHMARK = Benchmark(
    key="bert",
    title="language (masked LM)",
    # The scaling model's assumption for published results: 8 x 56 = 448 samples a step on one 8-accelerator node.
    published_batch_per_accelerator=56,
    # rcp_checker.py (mlperf-logging): --bert_train_samples reads samples to converge from train_samples, as a
    # log may give them (Baidu's v2.0 bert logs epoch_num 1)
    rcp_train_samples_flag="--bert_train_samples",
    specs={"mini": MINI, "reference": REFERENCE},
    recipes={"mini": MINI_RECIPE, "reference": REFERENCE_RECIPE},
    # Closed division, MLPerf v2.0 (closed_bert.yaml and the rules' hyperparameter table): LAMB; the batch, the
    # learning rate, its warm-up and training steps, beta 1/2, epsilon and weight decay may change; the gradient
    # accumulation is free.
    closed_rules={
        scale: {
            "global_batch_size": Tunable(),
            "opt_base_learning_rate": Tunable(),
            "opt_epsilon": Tunable(),
            "opt_lamb_beta_1": Tunable(),
            "opt_lamb_beta_2": Tunable(),
            "opt_lamb_weight_decay_rate": Tunable(),
            "opt_learning_rate_warmup_steps": Tunable(),
            "start_warmup_step": Tunable(),
            "opt_learning_rate_training_steps": Tunable(),
            "gradient_accumulation_steps": Tunable(),
        }
        for scale in ("reference", "mini")
    },
    workload="trainperf.workloads.bert.workload:BertWorkload",
    smoke_fixture="trainperf.workloads.bert.reference:write_smoke_fixture",
    mini_data=MiniData(
        description="pretraining examples in the reference's HDF5 layout from Debian's dict-gcide, wordnet-base and "
        "python3-doc, with a WordPiece vocabulary trained on them",
        prepare="trainperf.workloads.bert.mini:prepare_mini",
        verify="trainperf.workloads.bert.mini:verify_mini",
    ),
    history_redefined=("v1.0", "masked-LM target 0.712 in v0.7, 0.720 from v1.0"),
)
