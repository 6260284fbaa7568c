"""gpt_oss_20b's network: the shared decoder (``trainperf/workloads/common/llm/model.py``) with the shared
mixture-of-experts layer (``common/llm/moe.py``) on every block, at its sizes. Architecture only."""

from __future__ import annotations

import dataclasses

from trainperf.workloads.common.llm.model import GPT_OSS_20B, DecoderArgs

FLAVOURS: dict[str, DecoderArgs] = {
    "20B": GPT_OSS_20B,
    # A toy width for a reference dry or smoke run on a CPU (torchtitan's "debugmodel" idea): the 20B's code and data
    # path, heads wider than dim / heads as GPT-OSS's are, 8 experts with GPT-OSS's top-4 softmax routing. Its
    # vocabulary is the tokenizer's (or the 20B's).
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
