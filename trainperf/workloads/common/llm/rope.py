"""Rotary position embeddings of the shared decoder: the frequencies of one head (Llama 3.1's long-context adjustment,
or YaRN's, where a flavour has one) and the rotation. Architecture only."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True, kw_only=True)
class RopeScaling:
    """Llama 3.1's adjustment of the rotary frequencies for long contexts: wavelengths longer than
    ``original_max_position / low_freq_factor`` are divided by ``factor``, those shorter than
    ``original_max_position / high_freq_factor`` kept, and those between interpolated smoothly."""

    factor: float = 8.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position: int = 8192


@dataclass(frozen=True, kw_only=True)
class YarnScaling:
    """YaRN, as DeepSeek-V3 configures it (its config.json ``rope_scaling``; Megatron's ``YarnRotaryEmbedding`` and
    ``MLATransformerConfig``): frequencies whose wavelength fits fewer than ``beta_slow`` times in
    ``original_max_position`` are divided by ``factor``, those that fit more than ``beta_fast`` times kept, a linear
    ramp between; attention logits scaled by ``yarn_mscale(factor, mscale_all_dim)**2``."""

    factor: float = 40.0
    original_max_position: int = 4096
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    mscale: float = 1.0
    mscale_all_dim: float = 1.0


def yarn_mscale(factor: float, mscale: float) -> float:
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def _correction_dim(rotations: float, dim: int, base: float, max_position: int) -> float:
    """The dimension index whose wavelength fits ``rotations`` times in ``max_position`` positions."""
    return dim * math.log(max_position / (rotations * 2 * math.pi)) / (2 * math.log(base))


def frequencies(head_dim: int, theta: float, scaling: RopeScaling | YarnScaling | None = None) -> torch.Tensor:
    """The rotary angular frequencies of one head (``head_dim / 2`` of them), the flavour's scaling applied."""
    freqs = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    if scaling is None:
        return freqs.float()
    if isinstance(scaling, YarnScaling):
        s = scaling
        low = max(math.floor(_correction_dim(s.beta_fast, head_dim, theta, s.original_max_position)), 0)
        high = min(math.ceil(_correction_dim(s.beta_slow, head_dim, theta, s.original_max_position)), head_dim - 1)
        span = (high - low) if high != low else 0.001
        ramp = ((torch.arange(head_dim // 2, dtype=torch.float64) - low) / span).clamp(0, 1)
        return (freqs / s.factor * ramp + freqs * (1 - ramp)).float()  # ramp 0: kept (high frequency), 1: divided
    s = scaling
    wavelen = 2 * math.pi / freqs
    low_wavelen = s.original_max_position / s.low_freq_factor
    high_wavelen = s.original_max_position / s.high_freq_factor
    smooth = (s.original_max_position / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor)
    between = (1 - smooth) * freqs / s.factor + smooth * freqs
    out = torch.where(wavelen > low_wavelen, freqs / s.factor, torch.where(wavelen < high_wavelen, freqs, between))
    return out.float()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding in the half-split layout (the first and second halves of a head are the pairs)."""
    a, b = x.chunk(2, dim=-1)
    return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)


def deinterleave(x: torch.Tensor) -> torch.Tensor:
    """Pairs stored interleaved (0, 1), (2, 3), ... reordered into the half-split layout, as DeepSeek-V3's checkpoint
    lays out its rotary dimensions (Hugging Face's ``apply_rotary_pos_emb_interleave``; Megatron's MLA rotation)."""
    return torch.cat((x[..., 0::2], x[..., 1::2]), dim=-1)
