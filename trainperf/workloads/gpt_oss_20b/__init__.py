"""gpt_oss_20b: mixture-of-experts LLM pretraining (MLPerf Training 6.1: GPT-OSS 20B from scratch on C4).

reference: GPT-OSS 20B as mlcommons/training ``small_llm_moe_pretraining/primus`` trains it (24 layers, 32 experts,
top-4), on llama31_8b's C4 indexed files and Llama 3.1 tokenizer, sequences of 8,192 tokens, AdamW with the closed
keys of training_6.1.0/closed_gpt_oss_20b.yaml, validation log-perplexity <= 3.34 on the first 1,024 validation
sequences, evaluated every 12,288 sequences. mini: the same decoder and MoE layer at a small width on llama31_8b's mini
data, target calibrated by measurement (README.md beside this file). Pure data: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from trainperf.contract.closed_rules import Tunable
from trainperf.spec import MINI_RUNAWAY_MINUTES, SAMPLES, Benchmark, BenchmarkSpec
from trainperf.workloads.llama31_8b import BENCHMARK as LLAMA31_8B
from trainperf.workloads.llama31_8b import HPARAM_KEYS, LlamaRecipe

# training_6.1.0/closed_gpt_oss_20b.yaml requires exactly the keys closed_llama31_8b.yaml does (the same AdamW, clip,
# cosine, 8,192 tokens, max_steps 1,200,000 and decay steps 1,200,000 - warm-up), so the list is llama31_8b's.


@dataclass(frozen=True, kw_only=True)
class GptOssRecipe(LlamaRecipe):
    """llama31_8b's recipe (AdamW, linear warm-up then cosine to 0.1x over ``max_steps - warmup``, clip 1.0) with
    GPT-OSS's flavours: "20B" (the reference's) or "debug" (a toy width for a CPU smoke run)."""

    CHOICES: ClassVar = {"opt_name": ("adamw",), "model_flavour": ("20B", "mini", "debug")}


# The reference's closed recipe: batch 16, LR 4e-4, 128 warm-up steps, max_steps 1,200,000 (conf/gpt_oss_20B-
# pretrain.yaml and config_MI355X_1x8x1.sh; rcps_gpt_oss_20b.json gpt_oss_20b_ref_16: 4e-4, 2,048 warm-up samples).
REFERENCE_RECIPE = GptOssRecipe(
    global_batch_size=16,
    max_sequence_length=8192,
    opt_base_learning_rate=4e-4,
    opt_learning_rate_warmup_steps=128,
    max_steps=1_200_000,
    model_flavour="20B",
)

# Mini recipe (README.md): llama31_8b's mini recipe (batch 32 of 128 tokens, the cosine over the 9,600-sample budget).
MINI_RECIPE = GptOssRecipe(
    global_batch_size=32,
    max_sequence_length=128,
    opt_base_learning_rate=3e-3,
    opt_learning_rate_warmup_steps=20,
    max_steps=300,
    model_flavour="mini",
)

REFERENCE = BenchmarkSpec(
    key="gpt_oss_20b",
    scale="reference",
    model="GPT-OSS 20B (24 layers, dimension 2,880, 64 heads of 64, 8 key/value heads, 32 SwiGLU experts of 2,880, "
    "top-4; 20.49 B parameters, 3.77 B active per token)",
    dataset="C4 en 3.0.1 in Megatron indexed files, Llama 3.1 tokenizer (llama31_8b's files; first 1,024 validation "
    "sequences)",
    metric="log_perplexity",
    target=3.34,  # training_6.1.0/closed_gpt_oss_20b.yaml: eval_accuracy <= 3.34
    higher_is_better=False,
    metric_is_fraction=False,
    runs_required=10,  # mlperf-logging benchmark_meta.py: gpt_oss_20b 10 result files
    runs_dropped=1,
    unit=SAMPLES,
    eval_interval=12_288.0,  # the reference: evaluation every 12,288 samples (README.md, config_*.sh)
    max_progress=lambda r: float(r.max_steps * r.global_batch_size),  # max_steps, as the reference stops
    max_minutes=24 * 60.0,
    hparam_keys=HPARAM_KEYS,
    target_source="MLPerf Training 6.1 rules (training_6.1.0/closed_gpt_oss_20b.yaml)",
    eval_samples=1024,  # closed_gpt_oss_20b.yaml: eval_samples == 1024
    allreduced_parameters=20_488_415_040,  # every parameter (with expert parallelism: less the experts)
)

MINI = BenchmarkSpec(
    key="gpt_oss_20b",
    scale="mini",
    model="GPT-OSS-style MoE decoder: 4 layers, dimension 192, 6 heads of 32, 2 key/value heads, a 32-token sliding "
    "window on every other layer, 8 SwiGLU experts of 256 with top-2 softmax routing, 4,096 BPE tokens",
    dataset="llama31_8b's mini data: English prose from Debian dict-gcide, wordnet-base, python3-doc in Megatron "
    "indexed files (byte-level BPE; sequences of 128 tokens; the first 512 validation sequences)",
    metric="log_perplexity",
    target=5.75,  # calibrated: README.md (seeds 100001-100010)
    higher_is_better=False,
    metric_is_fraction=False,
    runs_required=10,
    runs_dropped=1,
    unit=SAMPLES,
    eval_interval=1_600.0,  # every 50 steps of the default batch
    max_progress=9_600.0,
    max_minutes=MINI_RUNAWAY_MINUTES,
    hparam_keys=HPARAM_KEYS,
    target_source="measured: README.md beside gpt_oss_20b/workload.py",
    eval_samples=512,
    metric_se=0.0111,  # benchmarks/metric_error.py gpt_oss_20b: 5.7254 at 4,800 samples, seed 100001, B = 1000
)

BENCHMARK = Benchmark(
    key="gpt_oss_20b",
    title="mixture-of-experts LLM pretraining",
    specs={"mini": MINI, "reference": REFERENCE},
    recipes={"mini": MINI_RECIPE, "reference": REFERENCE_RECIPE},
    # Closed division, MLPerf 6.1 (closed_gpt_oss_20b.yaml fixes AdamW 0.9/0.95/1e-5, weight decay 0.1, clip 1.0,
    # 8,192 tokens, max_steps 1,200,000 and the cosine): the batch, the learning rate and its warm-up may change
    # (the RCPs' batches 16, 32, 64 do), gradient accumulation and activation checkpointing are free.
    closed_rules={
        scale: {
            "global_batch_size": Tunable(),
            "opt_base_learning_rate": Tunable(),
            "opt_learning_rate_warmup_steps": Tunable(),
            "gradient_accumulation_steps": Tunable(),
            "activation_checkpointing": Tunable(),
        }
        for scale in ("reference", "mini")
    },
    workload="trainperf.workloads.gpt_oss_20b.workload:GptOssWorkload",
    smoke_fixture="trainperf.workloads.llama31_8b.reference:write_smoke_fixture",  # the same C4-layout fixture
    mini_data=LLAMA31_8B.mini_data,  # llama31_8b's mini files, prepared once for both
    not_scalable="the scaling model is fitted on the v2.0 round's RCPs; the current round's are not in it yet",
    published_batch_per_accelerator=2,  # the reference's micro-batch (PRIMUS_MICRO_BATCH_SIZE=2)
)
