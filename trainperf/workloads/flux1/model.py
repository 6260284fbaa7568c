"""flux1's network: the FLUX.1 transformer as ``diffusers`` builds it (``FluxTransformer2DModel``), at its sizes, with
the reference's initialization. Architecture only.

Why diffusers: the reference's model is torchtitan's ``experiments/flux`` (a fork branch, not a release); the
torchtitan release that carries FLUX (0.3.0, ``torchtitan.models.flux``) needs a nightly torch and brings its own
training framework (spmd_types, tyro, wandb, tensorboard), while diffusers' ``FluxTransformer2DModel`` is the same
network (Black Forest Labs' FLUX.1) as a plain ``nn.Module`` that installs beside the pinned torch: 19 double-stream
blocks of joint text-image attention, 38 single-stream blocks, RoPE over (t, h, w) ids with axes (16, 56, 56),
timestep (x 1000, 256 sinusoidal channels) and pooled CLIP conditioning, no guidance embedding (schnell).

The two codes hold the same functions with the tensors laid out differently: diffusers keeps separate q, k and v
(torchtitan a fused qkv), and a single-stream block's q, k, v and MLP-in matrices apart (torchtitan's ``linear1``).
:func:`init_weights` therefore draws each matrix with the fan-in and fan-out of the reference's fused layer
(``REFERENCE_FANS``), so that the initial distribution is the reference's (torchtitan ``model.py:init_weights``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass

import torch
from torch import nn


@dataclass(frozen=True, kw_only=True)
class FluxArgs:
    """diffusers' ``FluxTransformer2DModel`` arguments (the reference's ``FluxModelArgs`` in its own words)."""

    in_channels: int = 64  # 16 latent channels x a 2x2 patch
    num_layers: int = 19  # double-stream blocks (torchtitan: depth)
    num_single_layers: int = 38  # torchtitan: depth_single_blocks
    attention_head_dim: int = 128  # hidden 3,072 / 24 heads
    num_attention_heads: int = 24
    joint_attention_dim: int = 4096  # T5-XXL's width (torchtitan: context_in_dim)
    pooled_projection_dim: int = 768  # CLIP ViT-L's pooled output (torchtitan: vec_in_dim)
    guidance_embeds: bool = False  # schnell: no guidance embedding (torchtitan's FluxModel has none)
    axes_dims_rope: tuple[int, int, int] = (16, 56, 56)

    @property
    def hidden_size(self) -> int:
        return self.attention_head_dim * self.num_attention_heads


SCHNELL = FluxArgs()  # torchtitan experiments/flux/__init__.py "flux-schnell"
FLAVOURS: dict[str, FluxArgs] = {
    "schnell": SCHNELL,
    # A toy width for a reference dry or smoke run on a CPU: the same blocks, RoPE, conditioning and the reference's
    # input widths (64 latent channels, T5 4,096, CLIP 768), so the real files feed it; 2 + 2 blocks of width 64.
    "debug": FluxArgs(
        num_layers=2, num_single_layers=2, attention_head_dim=32, num_attention_heads=2, axes_dims_rope=(4, 14, 14)
    ),
    # The mini: the same blocks at width 128 (4 heads of 32), reading the mini's 12-channel latents (48 features a
    # 2x2 patch) and its text encoder's 8 x 64 sequence and 64-wide pooled vector (mini.py, glyphs.py).
    "mini": FluxArgs(
        in_channels=48,
        num_layers=2,
        num_single_layers=2,
        attention_head_dim=32,
        num_attention_heads=4,
        joint_attention_dim=64,
        pooled_projection_dim=64,
        axes_dims_rope=(8, 12, 12),
    ),  # fmt: skip
}
SCHNELL_PARAMETERS = 11_891_178_560  # FluxTransformer2DModel at SCHNELL (tests/unit/test_flux1.py counts them)


def build(args: FluxArgs) -> nn.Module:
    """The transformer (parameters uninitialized where the device is meta; :func:`init_weights` fills them)."""
    from diffusers.models.transformers.transformer_flux import FluxTransformer2DModel

    model = FluxTransformer2DModel(patch_size=1, out_channels=None, **asdict(args))
    for m in model.modules():
        if isinstance(m, nn.RMSNorm):
            m.eps = None  # torchtitan's QKNorm: nn.RMSNorm(dim), eps of the dtype (diffusers sets 1e-6)
    model.set_attn_processor(_cpu_attention_processor())
    return model


def _cpu_attention_processor():
    """diffusers' own FLUX attention, except that under a CPU's bf16 autocast it takes PyTorch's plain (math)
    attention kernel. PyTorch's CPU flash-attention backward is about 4 times slower in bf16 than the plain kernel at
    the mini's shapes (32 x 4 heads x 72 tokens x 32, forward and backward: 17.8 ms against 4.0 ms; fp32 flash 3.1
    ms), which cost a bf16 step more than its bf16 products save (``benchmarks/peers.py flux1 --precision bf16``).
    In fp32 and on a GPU the kernel is PyTorch's choice, as before."""
    return _cpu_attention_processor_class()()


@functools.cache
def _cpu_attention_processor_class() -> type:
    """One class for every model a process builds: ``torch.compile`` guards on the processor's type, and a class made
    anew for each model would be freed with it and make the compiler start over for the next run's model."""
    from diffusers.models.transformers.transformer_flux import FluxAttnProcessor
    from torch.nn.attention import SDPBackend, sdpa_kernel

    class CPUAttnProcessor(FluxAttnProcessor):
        def __call__(self, attn, hidden_states, *args, **kwargs):
            if hidden_states.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
                with sdpa_kernel(SDPBackend.MATH):
                    return super().__call__(attn, hidden_states, *args, **kwargs)
            return super().__call__(attn, hidden_states, *args, **kwargs)

    return CPUAttnProcessor


def reference_fans(args: FluxArgs) -> dict[str, tuple[int, int]]:
    """(fan_in, fan_out) of the reference's layer that holds each xavier-initialized matrix, by the end of its name."""
    h, mlp = args.hidden_size, 4 * args.hidden_size
    return {
        "x_embedder": (args.in_channels, h),  # img_in
        "context_embedder": (args.joint_attention_dim, h),  # txt_in
        # double-stream: img_attn.qkv / txt_attn.qkv are one (h -> 3h) matrix; proj; the two MLPs
        "attn.to_q": (h, 3 * h),
        "attn.to_k": (h, 3 * h),
        "attn.to_v": (h, 3 * h),
        "attn.add_q_proj": (h, 3 * h),
        "attn.add_k_proj": (h, 3 * h),
        "attn.add_v_proj": (h, 3 * h),
        "attn.to_out.0": (h, h),
        "attn.to_add_out": (h, h),
        "ff.net.0.proj": (h, mlp),
        "ff.net.2": (mlp, h),
        "ff_context.net.0.proj": (h, mlp),
        "ff_context.net.2": (mlp, h),
        # single-stream: linear1 (h -> 3h + mlp) holds q, k, v and the MLP's input; linear2 (h + mlp -> h)
        "single.attn.to_q": (h, 3 * h + mlp),
        "single.attn.to_k": (h, 3 * h + mlp),
        "single.attn.to_v": (h, 3 * h + mlp),
        "single.proj_mlp": (h, 3 * h + mlp),
        "single.proj_out": (h + mlp, h),
    }


def init_rule(name: str, args: FluxArgs) -> tuple[str, tuple[int, int] | None]:
    """How the reference initializes the parameter ``name`` (a diffusers name): ("xavier", fans), ("normal", None)
    (std 0.02: the time and pooled-text MLPs), ("zeros", None) (biases, every modulation, the final layer) or ("ones",
    None) (the q/k RMSNorm scales)."""
    layer, _, kind = name.rpartition(".")
    if kind == "bias" or layer.endswith("norm.linear") or layer.endswith(("norm1.linear", "norm1_context.linear")):
        return "zeros", None  # torchtitan: every bias 0; Modulation.init_weights: weight 0
    if layer in ("norm_out.linear", "proj_out"):
        return "zeros", None  # LastLayer.init_weights: adaLN_modulation and linear 0
    if layer.startswith("time_text_embed."):
        return "normal", None  # MLPEmbedder.init_weights(init_std=0.02): time_in, vector_in
    if layer.endswith(("norm_q", "norm_k", "norm_added_q", "norm_added_k")):
        return "ones", None  # QKNorm.init_weights: RMSNorm.reset_parameters
    key = layer.split(".", 2)[-1] if layer.startswith(("transformer_blocks.", "single_transformer_blocks.")) else layer
    if layer.startswith("single_transformer_blocks."):
        key = "single." + key
    fans = reference_fans(args).get(key)
    if fans is None:
        raise KeyError(f"flux1: no reference initialization for parameter {name}")
    return "xavier", fans


@torch.no_grad()
def fill(p: torch.Tensor, rule: str, fans: tuple[int, int] | None, g: torch.Generator) -> torch.Tensor:
    """A full tensor of ``p``'s shape (on the CPU, fp32) drawn by ``rule``."""
    out = torch.empty(p.shape)
    if rule == "zeros":
        return out.zero_()
    if rule == "ones":
        return out.fill_(1.0)
    if rule == "normal":
        return out.normal_(0.0, 0.02, generator=g)
    assert fans is not None
    bound = math.sqrt(6.0 / (fans[0] + fans[1]))  # nn.init.xavier_uniform_ of the reference's (fused) layer
    return out.uniform_(-bound, bound, generator=g)
