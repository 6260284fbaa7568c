"""deepseekv3_671b's network: the shared decoder (``trainperf/workloads/common/llm/model.py``) with multi-head latent
attention (``common/llm/mla.py``), YaRN rotary frequencies, the shared mixture-of-experts layer (``common/llm/moe.py``)
after three dense blocks, and one multi-token prediction block, at DeepSeek-V3's sizes. Architecture only."""

from __future__ import annotations

import dataclasses

from trainperf.workloads.common.llm.mla import MLAArgs
from trainperf.workloads.common.llm.model import DecoderArgs
from trainperf.workloads.common.llm.moe import MoEArgs
from trainperf.workloads.common.llm.rope import YarnScaling
from trainperf.workloads.llama31_8b import mini

# DeepSeek-V3 as the reference builds it: Megatron-Bridge v0.3.0 (the reference's Dockerfile, MBRIDGE_REVISION)
# DeepSeekV3ModelProvider and the checkpoint's config.json through DeepSeekV3Bridge; moe_aux_loss_coeff 0.01 and
# multi-token prediction (1 layer, loss x 0.1) from pretrain_deepseek_v3_671b.py and the recipe's defaults. The
# vocabulary is the Llama 3.1 tokenizer's 128,256 ids padded to a multiple of 1,280 (make_vocab_size_divisible_by):
# 129,280 rows.
DEEPSEEK_V3 = DecoderArgs(
    dim=7168,
    n_layers=61,
    n_heads=128,
    n_kv_heads=128,
    ffn_dim=18432,  # the three dense blocks' SwiGLU
    vocab_size=129_280,
    max_seq_len=4096,
    rope_theta=10_000.0,
    rope_scaling=YarnScaling(factor=40.0, original_max_position=4096, beta_fast=32.0, beta_slow=1.0),
    norm_eps=1e-6,
    init_std=0.006,
    mla=MLAArgs(q_lora_rank=1536, kv_lora_rank=512, nope_head_dim=128, rope_head_dim=64, v_head_dim=128),
    moe=MoEArgs(
        n_experts=256,
        top_k=8,
        expert_ffn_dim=2048,
        n_shared_experts=1,
        score_function="sigmoid",
        top_k_scaling=2.5,
        aux_loss_coeff=0.01,
        aux_loss_per_sequence=True,  # moe_router_load_balancing_type seq_aux_loss
        expert_bias_update_rate=1e-3,
        n_groups=8,
        group_top_k=4,
    ),
    dense_layers=3,
    mtp_layers=1,
    mtp_loss_scale=0.1,
)

FLAVOURS: dict[str, DecoderArgs] = {
    "671B": DEEPSEEK_V3,
    # The mini (README.md): DeepSeek-V3's kind of decoder at llama31_8b's mini width on its data, at about the cost of
    # llama31_8b's mini step. Latent attention of 6 heads (query rank 96, key/value rank 64, 32 + 16 rotary query/key
    # dimensions, values 32); the first block dense (SwiGLU of 512, llama31_8b's mini), then 3 MoE blocks of 8 SwiGLU
    # experts of 128 with 2 chosen by sigmoid scores among the best 2 of 4 groups (the 671B: 8 among 4 of 8 groups),
    # weights normalized and x 2.5, 1 shared expert, bias balancing and the per-sequence auxiliary loss x 0.01. No
    # multi-token prediction (it made the step 1.7x as long: README.md) and no YaRN at 128 tokens.
    "mini": dataclasses.replace(
        DEEPSEEK_V3,
        dim=192,
        n_layers=4,
        n_heads=6,
        n_kv_heads=6,
        ffn_dim=512,
        vocab_size=mini.VOCAB_SIZE,
        max_seq_len=mini.SEQ_LEN,
        rope_scaling=None,
        init_std=0.02,
        mla=MLAArgs(q_lora_rank=96, kv_lora_rank=64, nope_head_dim=32, rope_head_dim=16, v_head_dim=32),
        moe=dataclasses.replace(DEEPSEEK_V3.moe, n_experts=8, top_k=2, expert_ffn_dim=128, n_groups=4, group_top_k=2),  # type: ignore[type-var]
        dense_layers=1,
        mtp_layers=0,
        mtp_loss_scale=0.0,
    ),
    "debug": dataclasses.replace(
        DEEPSEEK_V3,
        dim=64,
        n_layers=2,
        n_heads=4,
        n_kv_heads=4,
        ffn_dim=128,
        mla=MLAArgs(q_lora_rank=32, kv_lora_rank=16, nope_head_dim=16, rope_head_dim=8, v_head_dim=16),
        moe=dataclasses.replace(DEEPSEEK_V3.moe, n_experts=8, top_k=2, expert_ffn_dim=32, n_groups=4, group_top_k=2),  # type: ignore[type-var]
        dense_layers=1,
    ),
}
