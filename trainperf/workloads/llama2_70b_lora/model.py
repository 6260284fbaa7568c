"""llama2_70b_lora's network: the shared decoder (``trainperf/workloads/common/llm/model.py``) at its sizes, and where
the LoRA adapters go. Architecture only: the adapters are peft's, injected by the workload."""

from __future__ import annotations

import dataclasses

import torch

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


class Dropout(torch.nn.Module):
    """``nn.Dropout``: in training each element zeroed with probability ``p``, the rest scaled by 1 / (1 - p). peft's
    LoRA layers draw their dropout with ``nn.Dropout``, whose CPU kernel (``bernoulli_``, then a boolean mask) takes a
    third longer forward and backward than this one on a CPU, which draws ``torch.rand`` (fp32, whatever the input's
    dtype) and turns it in place into the scaled mask: at the mini's sizes, 2.1 against 3.2 ms for one adapter's
    input of 16 x 128 x 192, eight of them a step. The same distribution (each element kept when its draw is >=
    ``p``), other random numbers; drawn from torch's global generator, which activation checkpointing replays. On
    another device, torch's own fused dropout."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        if x.device.type != "cpu":
            return torch.nn.functional.dropout(x, self.p, training=True)
        scale = torch.rand(x.shape, device=x.device).ge_(self.p).mul_(1.0 / (1.0 - self.p))
        return x * scale.to(x.dtype)

    def extra_repr(self) -> str:
        return f"p={self.p}"
