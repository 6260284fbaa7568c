"""gpt_oss_20b's network: the shared decoder (``trainperf/workloads/common/llm/model.py``) with the shared
mixture-of-experts layer (``common/llm/moe.py``) on every block, at its sizes. Architecture only."""

from __future__ import annotations

import dataclasses

from trainperf.workloads.common.llm.model import GPT_OSS_20B, DecoderArgs
from trainperf.workloads.llama31_8b import mini

FLAVOURS: dict[str, DecoderArgs] = {
    "20B": GPT_OSS_20B,
    # A toy width for a reference dry or smoke run on a CPU (torchtitan's "debugmodel" idea): the 20B's code and data
    # path, heads wider than dim / heads as GPT-OSS's are, 8 experts with GPT-OSS's top-4 softmax routing. Its
    # vocabulary is the tokenizer's (or the 20B's).
    # The mini (README.md): GPT-OSS's kind of decoder at llama31_8b's mini width on its data: 8 SwiGLU experts of 256
    # with GPT-OSS's top-k softmax routing over the chosen logits (2 of 8 active, the same active width as llama31_8b's
    # mini feed-forward of 512), no balancing, a 32-token sliding window on every other layer (GPT-OSS: 128 of 8,192).
    "mini": dataclasses.replace(
        GPT_OSS_20B,
        dim=192,
        n_layers=4,
        n_heads=6,
        n_kv_heads=2,
        kv_channels=32,
        ffn_dim=256,
        vocab_size=mini.VOCAB_SIZE,
        max_seq_len=mini.SEQ_LEN,
        init_std=0.02,
        moe=dataclasses.replace(GPT_OSS_20B.moe, n_experts=8, top_k=2, expert_ffn_dim=256),  # type: ignore[type-var]
        sliding_window=32,
    ),
    "debug": dataclasses.replace(
        GPT_OSS_20B,
        dim=64,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        kv_channels=32,
        ffn_dim=64,
        moe=dataclasses.replace(GPT_OSS_20B.moe, n_experts=8, expert_ffn_dim=64),  # type: ignore[type-var]
    ),
}
