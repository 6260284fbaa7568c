"""llama2_70b_lora's network: the shared decoder (``trainperf/workloads/common/llm/model.py``) at its sizes, and where
the LoRA adapters go. Architecture only: the adapters are peft's, injected by the workload."""

from __future__ import annotations

import dataclasses

from trainperf.workloads.common.llm.model import LLAMA2_70B, DecoderArgs
from trainperf.workloads.llama31_8b.workload import FLAVOURS as LLAMA31_FLAVOURS

FLAVOURS: dict[str, DecoderArgs] = {
    "70B": LLAMA2_70B,
    # A toy width for a reference dry or smoke run on a CPU (torchtitan's "debugmodel" idea): the 70B's code, data
    # path and 32,000-token vocabulary at a size a CPU steps through in seconds.
    "debug": dataclasses.replace(LLAMA2_70B, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=128),
    # The mini's base model: llama31_8b's mini decoder (4 layers of width 192, 6 heads with 2 key/value heads, SwiGLU
    # of 512, llama31_8b's mini BPE of 4,096 tokens), pretrained at `trainperf data prepare` (base.py).
    "mini": LLAMA31_FLAVOURS["mini"],
}
LORA_TARGETS = ["qkv", "out"]  # the decoder's names of the reference's "qkv_proj,o_proj" (Attention.qkv, .out)
