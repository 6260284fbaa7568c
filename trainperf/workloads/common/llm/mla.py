"""Multi-head latent attention (DeepSeek-V2/V3), a block's attention configured as data (``DecoderArgs.mla``).

Queries pass through a low-rank bottleneck (down to ``q_lora_rank``, RMSNorm, up to every head); keys and values
are rebuilt per head from one compressed latent of ``kv_lora_rank`` (RMSNorm, then up-projected), beside one rotary
key of ``rope_head_dim`` shared by all heads. Each head's query and key are ``nope_head_dim`` dimensions without
position and ``rope_head_dim`` rotated ones; values are ``v_head_dim``. The names follow Megatron's MLA and the
Hugging Face checkpoint (``q_a_proj``, ``q_a_layernorm``, ``q_b_proj``, ``kv_a_proj_with_mqa``, ``kv_a_layernorm``,
``kv_b_proj``, ``o_proj``). Architecture only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from trainperf.workloads.common.llm.rope import YarnScaling, deinterleave, rotate, yarn_mscale


@dataclass(frozen=True, kw_only=True)
class MLAArgs:
    q_lora_rank: int | None  # None: one query projection, no bottleneck (DeepSeek-V2-Lite)
    kv_lora_rank: int
    nope_head_dim: int
    rope_head_dim: int
    v_head_dim: int

    @property
    def qk_head_dim(self) -> int:
        return self.nope_head_dim + self.rope_head_dim


def softmax_scale(m: MLAArgs, yarn: YarnScaling | None) -> float:
    """1/sqrt(query width), times YaRN's mscale squared (Megatron's MLA and Hugging Face's DeepseekV3Attention)."""
    scale = 1.0 / math.sqrt(m.qk_head_dim)
    if yarn is not None and yarn.mscale_all_dim:
        scale *= yarn_mscale(yarn.factor, yarn.mscale_all_dim) ** 2
    return scale


class MultiLatentAttention(nn.Module):
    """Causal multi-head latent attention: (batch, sequence, dim) -> the same shape."""

    def __init__(self, dim: int, n_heads: int, m: MLAArgs, *, norm_eps: float, yarn: YarnScaling | None) -> None:
        super().__init__()
        self.m, self.n_heads, self.scale = m, n_heads, softmax_scale(m, yarn)
        if m.q_lora_rank is None:
            self.q = nn.Linear(dim, n_heads * m.qk_head_dim, bias=False)
        else:
            self.q_a = nn.Linear(dim, m.q_lora_rank, bias=False)
            self.q_norm = nn.RMSNorm(m.q_lora_rank, eps=norm_eps)
            self.q_b = nn.Linear(m.q_lora_rank, n_heads * m.qk_head_dim, bias=False)
        self.kv_a = nn.Linear(dim, m.kv_lora_rank + m.rope_head_dim, bias=False)
        self.kv_norm = nn.RMSNorm(m.kv_lora_rank, eps=norm_eps)
        self.kv_b = nn.Linear(m.kv_lora_rank, n_heads * (m.nope_head_dim + m.v_head_dim), bias=False)
        self.out = nn.Linear(n_heads * m.v_head_dim, dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        m, h = self.m, self.n_heads
        q = self.q(x) if m.q_lora_rank is None else self.q_b(self.q_norm(self.q_a(x)))
        q_nope, q_pe = q.view(b, t, h, m.qk_head_dim).transpose(1, 2).split([m.nope_head_dim, m.rope_head_dim], -1)
        latent, k_pe = self.kv_a(x).split([m.kv_lora_rank, m.rope_head_dim], -1)
        kv = self.kv_b(self.kv_norm(latent)).view(b, t, h, m.nope_head_dim + m.v_head_dim).transpose(1, 2)
        k_nope, v = kv.split([m.nope_head_dim, m.v_head_dim], -1)
        q_pe = rotate(deinterleave(q_pe), cos, sin)
        k_pe = rotate(deinterleave(k_pe.view(b, 1, t, m.rope_head_dim)), cos, sin)
        q = torch.cat((q_nope, q_pe), -1)
        k = torch.cat((k_nope, k_pe.expand(b, h, t, m.rope_head_dim)), -1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
        return self.out(y.transpose(1, 2).reshape(b, t, h * m.v_head_dim))
