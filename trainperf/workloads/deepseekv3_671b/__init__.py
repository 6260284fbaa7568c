"""deepseekv3_671b: mixture-of-experts LLM continued pretraining (MLPerf Training 6.1: DeepSeek-V3 671B from the
benchmark's checkpoint on C4).

reference: DeepSeek-V3 as mlcommons/training ``llm_moe_pretraining/nemo`` trains it (61 layers, multi-head latent
attention, 256 routed experts with 8 active and 1 shared, multi-token prediction), continued from the checkpoint
the user provides (Hugging Face safetensors), on llama31_8b's C4 indexed files and Llama 3.1 tokenizer, sequences
of 4,096 tokens, AdamW with the closed keys of training_6.1.0/closed_deepseekv3_671b.yaml, validation
log-perplexity <= 3.6 on the first 1,024 validation sequences after every step from step floor(42 + 24576 / batch).
mini: the same decoder at llama31_8b's mini width, continued from a starting checkpoint that ``trainperf data
prepare`` trains on llama31_8b's mini training split (``mini_start.py``), on llama31_8b's mini data; target set by
measurement (README.md beside this file). Pure data: no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from trainperf.contract.closed_rules import AtLeast, Tunable
from trainperf.spec import MINI_RUNAWAY_MINUTES, SAMPLES, Benchmark, BenchmarkSpec, MiniData
from trainperf.workloads.llama31_8b import HPARAM_KEYS, LlamaRecipe

# training_6.1.0/closed_deepseekv3_671b.yaml: llama31_8b's keys and moe_aux_loss_coeff (== 0.01)
DEEPSEEK_HPARAM_KEYS = (*HPARAM_KEYS, "moe_aux_loss_coeff")
LR_AT_16384 = 2.4e-5  # the README: opt_base_learning_rate = 0.000024 * sqrt(GBS / 16384), rounded to 9 decimals
DECAY_TOTAL = 12_000  # closed yaml: opt_learning_rate_decay_steps == 12000 - opt_learning_rate_warmup_steps
MIN_BATCH = 15_360  # closed yaml: global_batch_size >= 15360 ("GBS<15360 - not allowed", the README)


def learning_rate(batch: int) -> float:
    return round(LR_AT_16384 * math.sqrt(batch / 16384), 9)


@dataclass(frozen=True, kw_only=True)
class DeepSeekRecipe(LlamaRecipe):
    """The reference's AdamW (0.9, 0.95, epsilon 1e-8, weight decay 0.1, clip 1.0) with Megatron's schedule: linear
    warm-up from 0 over ``opt_learning_rate_warmup_steps``, then cosine to ``opt_end_learning_rate`` (1e-8) by step
    ``opt_learning_rate_decay_steps`` (``decay_total_steps`` - warm-up: the reference's 12,000 - 4); ``max_steps``
    ends the run (the reference's 100)."""

    CHOICES: ClassVar = {"opt_name": ("adamw",), "model_flavour": ("671B", "mini", "debug")}

    opt_adamw_epsilon: float = 1e-8
    min_learning_rate: float = 1e-8  # the reference's MIN_LR
    decay_total_steps: int = DECAY_TOTAL

    @property
    def opt_end_learning_rate(self) -> float:
        return self.min_learning_rate

    @property
    def opt_learning_rate_decay_steps(self) -> int:
        return self.decay_total_steps - self.opt_learning_rate_warmup_steps


# config_GB300_64x4x256xtp1pp4cp1.sh: GBS 16384, MAX_LR 2.4e-5, MIN_LR 1e-8, MAX_STEPS 100, WARMUP_STEPS 4,
# LR_DECAY_STEPS 11996, sequence length 4,096.
REFERENCE_RECIPE = DeepSeekRecipe(
    global_batch_size=16384,
    max_sequence_length=4096,
    opt_base_learning_rate=learning_rate(16384),
    opt_learning_rate_warmup_steps=4,
    max_steps=100,
    model_flavour="671B",
)

# Mini recipe (README.md): llama31_8b's mini batch (32 sequences of 128 tokens) with the reference's kind of schedule:
# a short warm-up from 0 (4 steps, the reference's), then Megatron's cosine to 1e-8, here ending with the budget
# (9,600 samples: 300 steps) where the reference's runs 100 steps of a 12,000-step cosine. The learning rate: the
# best of a short probe continuing from the starting checkpoint (README.md).
MINI_LR = 2e-3
MINI_RECIPE = DeepSeekRecipe(
    global_batch_size=32,
    max_sequence_length=128,
    opt_base_learning_rate=MINI_LR,
    opt_learning_rate_warmup_steps=4,
    max_steps=300,
    decay_total_steps=300,
    model_flavour="mini",
)


def first_eval(r: DeepSeekRecipe) -> float:
    """The first evaluation: after step floor(42 + 24576 / batch) (START_EVAL_AT_ITER; the closed yaml's
    FIRST_CHECK on eval_accuracy's samples_count)."""
    return float(r.global_batch_size * math.floor(42 + 24576 / r.global_batch_size))


REFERENCE = BenchmarkSpec(
    key="deepseekv3_671b",
    scale="reference",
    model="DeepSeek-V3 (61 layers, dimension 7,168, 128 heads of multi-head latent attention, 3 dense layers then "
    "256 routed SwiGLU experts of 2,048 with 8 active and 1 shared, one multi-token prediction layer; 671 B "
    "parameters, 37 B active per token)",
    dataset="C4 en 3.0.1 in Megatron indexed files, Llama 3.1 tokenizer (llama31_8b's files: shard 6 trained on, the "
    "first 1,024 validation sequences scored)",
    metric="log_perplexity",
    target=3.6,  # training_6.1.0/closed_deepseekv3_671b.yaml: eval_accuracy <= 3.6
    higher_is_better=False,
    metric_is_fraction=False,
    runs_required=3,  # mlperf-logging benchmark_meta.py: deepseekv3_671b 3 result files
    runs_dropped=1,
    unit=SAMPLES,
    eval_interval=lambda r: float(r.global_batch_size),  # after every step (EVAL_CHECK_INTERVAL=1)
    first_eval=first_eval,
    max_progress=lambda r: float(r.max_steps * r.global_batch_size),  # MAX_STEPS: the reference stops there
    max_minutes=24 * 60.0,
    hparam_keys=DEEPSEEK_HPARAM_KEYS,
    target_source="MLPerf Training 6.1 rules (training_6.1.0/closed_deepseekv3_671b.yaml)",
    eval_samples=1024,  # closed_deepseekv3_671b.yaml: eval_samples == 1024
    allreduced_parameters=682_636_472_320,  # every parameter, the prediction block's too (with EP: less the experts)
)

MINI = BenchmarkSpec(
    key="deepseekv3_671b",
    scale="mini",
    model="DeepSeek-V3-style MoE decoder: 4 layers, dimension 192, 6 heads of multi-head latent attention (ranks 96 "
    "and 64), 1 dense block then 8 SwiGLU experts of 128 with 2 chosen by sigmoid scores among 2 of 4 groups and 1 "
    "shared, bias balancing and a sequence auxiliary loss x 0.01, 4,096 BPE tokens; continued from a starting "
    "checkpoint trained at prepare",
    dataset="llama31_8b's mini data: English prose from Debian dict-gcide, wordnet-base, python3-doc in Megatron "
    "indexed files (byte-level BPE; sequences of 128 tokens; the first 512 validation sequences)",
    metric="log_perplexity",
    target=5.15,  # calibrated: README.md (10/10 seeds; the starting checkpoint 5.648, unigram model 6.667)
    higher_is_better=False,
    metric_is_fraction=False,
    runs_required=10,
    runs_dropped=1,
    unit=SAMPLES,
    eval_interval=1_600.0,  # every 50 steps of the default batch, as llama31_8b's mini
    max_progress=9_600.0,  # llama31_8b's mini budget: 300 steps of 32
    max_minutes=MINI_RUNAWAY_MINUTES,
    hparam_keys=DEEPSEEK_HPARAM_KEYS,
    target_source="measured: README.md beside deepseekv3_671b/workload.py",
    eval_samples=512,
    metric_se=0.0124,  # benchmarks/metric_error.py deepseekv3_671b: 5.0991 at 4,800 samples, seed 100001, B = 1000
)


@dataclass(frozen=True)
class SqrtOfBatch:
    """The closed rule of the learning rate: ``base * sqrt(batch / reference_batch)``, rounded to 9 decimals, at the
    recipe's batch (the checker allows 1e-9 either side)."""

    base: float
    reference_batch: int
    key: str = "global_batch_size"

    def value_at(self, batch: float) -> float:
        return round(self.base * math.sqrt(batch / self.reference_batch), 9)

    def allows_in(self, value: object, recipe: dict) -> bool:
        if not isinstance(value, int | float) or isinstance(value, bool):
            return False
        return abs(value - self.base * math.sqrt(recipe[self.key] / self.reference_batch)) < 1e-9

    def allows(self, value: object, default: object) -> bool:  # without the rest of the recipe: the default batch's
        return value == default

    def describe_in(self, recipe: dict) -> str:
        batch = recipe[self.key]
        return f"{self.base:g} * sqrt({self.key} / {self.reference_batch}) = {self.value_at(batch):.9f} at {batch}"

    def describe(self, default: object) -> str:
        return f"{self.base:g} * sqrt({self.key} / {self.reference_batch}), rounded to 9 decimals"


BENCHMARK = Benchmark(
    key="deepseekv3_671b",
    title="mixture-of-experts LLM continued pretraining",
    specs={"mini": MINI, "reference": REFERENCE},
    recipes={"mini": MINI_RECIPE, "reference": REFERENCE_RECIPE},
    # Closed division, MLPerf 6.1 (closed_deepseekv3_671b.yaml fixes AdamW 0.9/0.95/1e-8, weight decay 0.1, clip 1.0,
    # 4,096 tokens, 4 warm-up steps, decay to step 12,000, the cosine, moe_aux_loss_coeff 0.01): the batch may grow
    # from 15,360 with the learning rate its formula gives; gradient accumulation and activation checkpointing free.
    closed_rules={
        "reference": {
            "global_batch_size": AtLeast(MIN_BATCH),
            "opt_base_learning_rate": SqrtOfBatch(LR_AT_16384, 16384),
            "gradient_accumulation_steps": Tunable(),
            "activation_checkpointing": Tunable(),
        },
        # The mini's, in the reference's shape: any batch, with the learning rate the same formula gives from the
        # mini's (2e-3 at 32 sequences).
        "mini": {
            "global_batch_size": Tunable(),
            "opt_base_learning_rate": SqrtOfBatch(MINI_LR, 32),
            "gradient_accumulation_steps": Tunable(),
            "activation_checkpointing": Tunable(),
        },
    },
    workload="trainperf.workloads.deepseekv3_671b.workload:DeepSeekWorkload",
    smoke_fixture="trainperf.workloads.deepseekv3_671b.checkpoint:write_smoke_fixture",
    mini_data=MiniData(
        description="llama31_8b's mini files and the mini's starting checkpoint, trained on their training split",
        prepare="trainperf.workloads.deepseekv3_671b.mini_start:prepare_start",
        verify="trainperf.workloads.deepseekv3_671b.mini_start:verify_start",
        needs=("llama31_8b",),
    ),
    not_scalable="the scaling model is fitted on the v2.0 round's RCPs; the current round's are not in it yet",
    published_batch_per_accelerator=1,  # the reference's micro-batch (MBS=1)
)
