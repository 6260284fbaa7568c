"""llama2_70b_lora: LLM fine-tuning (MLPerf Training 6.1: Llama 2 70B with LoRA adapters on SCROLLS GovReport).

reference: the pretrained Llama 2 70B (fused query/key/value projections) from the checkpoint the user provides, LoRA
of rank 16 (alpha 32, dropout 0.1) on the attention's fused qkv and output projections, GovReport documents and
their summaries tokenized into sequences of at most 8,192 tokens (the loss on the tokens the labels keep), AdamW at
4e-4 with a cosine schedule and no warm-up, evaluation loss <= 0.925 on the 173 validation sequences, evaluated every
384 sequences after the first FLOOR(0.125 * batch + 2) evaluations are skipped.
mini: llama31_8b's mini decoder, pretrained at ``trainperf data prepare`` on llama31_8b's mini prose (``base.py``),
fine-tuned with the reference's LoRA on Linux manual pages made into its summarization task (``mini.py``: each page's
DESCRIPTION the document, its NAME line the summary), the loss on the summary's tokens; target set by measurement
(README.md beside this file). Pure data: no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from trainperf.contract.closed_rules import Tunable
from trainperf.spec import MINI_RUNAWAY_MINUTES, SAMPLES, Benchmark, BenchmarkSpec, MiniData, Recipe

# The keys training_6.1.0/closed_llama2_70b_lora.yaml requires once in every log (global_batch_size,
# opt_base_learning_rate, opt_learning_rate_training_steps, opt_gradient_clip_norm, opt_adamw_weight_decay,
# lora_alpha, lora_rank == 16; gradient_accumulation_steps the harness logs), and the others the reference logs
# (scripts/mlperf_logging_utils.py: opt_learning_rate_warmup_factor) or the training rules fix (sequence length,
# lora_dropout).
HPARAM_KEYS = (
    "global_batch_size",
    "max_sequence_length",
    "opt_name",
    "opt_base_learning_rate",
    "opt_learning_rate_warmup_factor",
    "opt_learning_rate_training_steps",
    "opt_adamw_weight_decay",
    "opt_gradient_clip_norm",
    "lora_rank",
    "lora_alpha",
    "lora_dropout",
    "max_steps",
)
EVAL_EVERY = 384  # sequences (training_rules.adoc, "Evaluation frequency": every 384 sequences)
LORA_RANK = 16  # closed_llama2_70b_lora.yaml: lora_rank == 16


@dataclass(frozen=True, kw_only=True)
class LoraRecipe(Recipe):
    """The reference's run_llama_70B_scrolls_r16.sh: AdamW (transformers' ``adamw_torch``: β 0.9/0.999, ε 1e-8)
    at ``opt_base_learning_rate``, a linear warm-up over ``ceil(opt_learning_rate_warmup_factor x
    opt_learning_rate_training_steps)`` steps (0 in the reference) then a cosine to 0 at
    ``opt_learning_rate_training_steps``; weight decay on every trained tensor; gradients clipped to a global norm of
    ``clip_grad_norm``; LoRA of rank ``lora_rank`` on the fused qkv and output projections."""

    CHOICES: ClassVar = {"opt_name": ("adamw",), "model_flavour": ("70B", "mini", "debug")}

    global_batch_size: int = 8  # 1 per device x 8 devices (--per_device_train_batch_size 1, num_processes 8)
    max_sequence_length: int = 8192
    opt_name: str = "adamw"
    opt_base_learning_rate: float = 4e-4
    opt_learning_rate_warmup_factor: float = 0.0  # --warmup_ratio 0
    opt_learning_rate_training_steps: int = 1024  # the cosine's length: --max_steps 1024
    opt_adamw_beta_1: float = 0.9
    opt_adamw_beta_2: float = 0.999
    opt_adamw_epsilon: float = 1e-8
    opt_adamw_weight_decay: float = 1e-4
    clip_grad_norm: float = 0.3
    lora_rank: int = LORA_RANK
    lora_alpha: int = 32
    lora_dropout: float = 0.1
    max_steps: int = 1024
    # The base network's size: "70B" (the reference's), "mini", or "debug" (a toy width for a CPU smoke or dry run).
    model_flavour: str = "70B"
    activation_checkpointing: bool = True  # --use_gradient_checkpointing True

    @property
    def opt_gradient_clip_norm(self) -> float:
        return self.clip_grad_norm


def eval_interval(r: LoraRecipe) -> float:
    """Every 384 sequences, or the next whole step after them (CEIL(384 / batch) steps)."""
    return float(math.ceil(EVAL_EVERY / r.global_batch_size) * r.global_batch_size)


def first_eval(r: LoraRecipe) -> float:
    """The first evaluation that counts: FLOOR(0.125 x batch + 2) evaluations are skipped (1,536 sequences at 8)."""
    return (math.floor(0.125 * r.global_batch_size + 2) + 1) * eval_interval(r)


REFERENCE_RECIPE = LoraRecipe()

REFERENCE = BenchmarkSpec(
    key="llama2_70b_lora",
    scale="reference",
    model="Llama 2 70B (80 layers, dimension 8,192, FFN 28,672, 64 heads, 8 key/value heads, fused qkv; 68.98 B "
    "parameters, frozen) with LoRA rank 16 on qkv and output projections (44,564,480 trained parameters)",
    dataset="SCROLLS GovReport as the reference preprocessed it (parquet of input_ids and labels, sequences of at "
    "most 8,192 Llama 2 tokens; 3,901 training and 173 validation sequences)",
    metric="eval_loss",
    target=0.925,  # training_6.1.0/closed_llama2_70b_lora.yaml: eval_accuracy <= 0.925
    higher_is_better=False,
    metric_is_fraction=False,
    runs_required=10,  # mlperf-logging benchmark_meta.py: llama2_70b_lora 10 result files
    runs_dropped=1,
    unit=SAMPLES,
    eval_interval=eval_interval,
    first_eval=first_eval,
    max_progress=lambda r: float(r.max_steps * r.global_batch_size),  # --max_steps: the reference stops there
    max_minutes=24 * 60.0,
    hparam_keys=HPARAM_KEYS,
    target_source="MLPerf Training 6.1 rules (training_6.1.0/closed_llama2_70b_lora.yaml)",
    train_samples=3901,  # the reference's train-00000-of-00001.parquet (as its logs report train_samples)
    eval_samples=173,  # validation-00000-of-00001.parquet: "the validation subset that consists of 173 examples"
    allreduced_parameters=44_564_480,  # the LoRA tensors: 80 x (16 x 8,192 + 10,240 x 16 + 16 x 8,192 + 8,192 x 16)
)

# Mini recipe (README.md): the reference's LoRA (rank 16, alpha 32, dropout 0.1 on qkv and the output projection),
# AdamW, clip 0.3, weight decay 1e-4 and cosine without warm-up; a batch of 16 pages of at most 128 tokens and a
# higher rate (the best of a short probe from the base model, README.md), the cosine ending with the budget (480
# steps: 7,680 sequences, 8.5 epochs of the training pages).
MINI_RECIPE = LoraRecipe(
    global_batch_size=16,
    max_sequence_length=128,
    opt_base_learning_rate=4e-3,
    opt_learning_rate_training_steps=480,
    max_steps=480,
    model_flavour="mini",
    activation_checkpointing=False,
)
MINI_EVAL_EVERY = 320  # sequences: 20 steps of 16, about a third of an epoch of the 904 training pages

MINI = BenchmarkSpec(
    key="llama2_70b_lora",
    scale="mini",
    model="llama31_8b's mini decoder (4 layers, dimension 192, 6 heads with 2 key/value heads, SwiGLU of 512, 4,096 "
    "BPE tokens; 3,147,456 parameters, frozen) pretrained at prepare on other text, with LoRA rank 16 on the qkv "
    "and output projections (57,344 trained parameters)",
    dataset="Linux manual pages (Debian manpages, manpages-dev): each page's DESCRIPTION the document, its NAME line "
    "the summary, in the reference's parquet format (sequences of at most 128 tokens; 904 training and 104 validation "
    "pages of man-pages 6.03, split by the hash of the page's name)",
    metric="eval_loss",
    target=6.0,  # calibrated, 10 of 10 seeds (README.md): base model 7.0546, unigram of the summaries 6.2111
    higher_is_better=False,
    metric_is_fraction=False,
    runs_required=10,
    runs_dropped=1,
    unit=SAMPLES,
    eval_interval=float(MINI_EVAL_EVERY),
    max_progress=lambda r: float(r.max_steps * r.global_batch_size),
    max_minutes=MINI_RUNAWAY_MINUTES,
    hparam_keys=HPARAM_KEYS,
    target_source="measured: README.md beside llama2_70b_lora/workload.py",
    metric_se=0.0585,  # benchmarks/metric_error.py llama2_70b_lora: 5.9717 at 3,520 samples, seed 100001, B = 1000
    train_samples=904,  # the prepared training pages (Debian's manpages 6.03; the manifest says each machine's)
    eval_samples=104,  # the validation pages
)

CLOSED = {
    "global_batch_size": Tunable(),
    "opt_base_learning_rate": Tunable(),
    "opt_learning_rate_training_steps": Tunable(),
    "opt_learning_rate_warmup_factor": Tunable(),
    "gradient_accumulation_steps": Tunable(),
    "activation_checkpointing": Tunable(),
}

BENCHMARK = Benchmark(
    key="llama2_70b_lora",
    title="LLM fine-tuning",
    specs={"mini": MINI, "reference": REFERENCE},
    recipes={"mini": MINI_RECIPE, "reference": REFERENCE_RECIPE},
    # Closed division, MLPerf 6.1 (training_rules.adoc, llama2_70b_lora rows): the batch, the learning rate, the
    # cosine's length, the warm-up and gradient accumulation are unconstrained; LoRA rank 16, alpha 32, dropout 0.1,
    # clip 0.3, weight decay 1e-4 and the sequence length are fixed. Activation checkpointing is free.
    closed_rules={
        "reference": CLOSED,
        # The mini's: the reference's, the same hyperparameters tunable, the LoRA and the rest fixed.
        "mini": CLOSED,
    },
    workload="trainperf.workloads.llama2_70b_lora.workload:LoraWorkload",
    smoke_fixture="trainperf.workloads.llama2_70b_lora.reference:write_smoke_fixture",
    mini_data=MiniData(
        description="Linux manual pages as summarization examples (Debian manpages, manpages-dev) and the mini's base "
        "model, pretrained on llama31_8b's mini prose",
        prepare="trainperf.workloads.llama2_70b_lora.base:prepare_mini",
        verify="trainperf.workloads.llama2_70b_lora.base:verify_mini",
        needs=("llama31_8b",),
    ),
    not_scalable="the scaling model is fitted on the v2.0 round's RCPs; the current round's are not in it yet",
    published_batch_per_accelerator=1,
)
