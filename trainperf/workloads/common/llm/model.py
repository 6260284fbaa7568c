"""A Llama-style decoder-only transformer, architecture only: one model, its sizes as named flavours of one
:class:`DecoderArgs` (the reference's 8B and the mini are two flavours of the same code).

Pre-norm blocks: RMSNorm -> grouped-query attention with rotary position embeddings (Llama 3.1's frequency
adjustment where the flavour has one) -> residual; RMSNorm -> SwiGLU feed-forward -> residual; a final RMSNorm and
an untied output projection. No biases, no dropout (Llama 3.1's). As data on the same blocks: a mixture of experts in
place of the SwiGLU (``moe``, ``common/llm/moe.py``), heads wider than ``dim / n_heads`` (``kv_channels``) and
sliding-window attention on chosen layers (``sliding_window``, ``window_layers``); GPT-OSS 20B uses all three.
The query/key/value projections are one matrix and the gate/up projections another (one matrix product each instead
of three and two: the same function, fewer kernels, which is most of a small model's step on a CPU);
``reference_tensor_names`` gives the usual split names.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from trainperf.workloads.common.llm.mla import MLAArgs, MultiLatentAttention
from trainperf.workloads.common.llm.moe import MoE, MoEArgs
from trainperf.workloads.common.llm.rope import RopeScaling, YarnScaling, frequencies, rotate


@dataclass(frozen=True, kw_only=True)
class DecoderArgs:
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    vocab_size: int
    max_seq_len: int
    rope_theta: float = 500_000.0
    rope_scaling: RopeScaling | YarnScaling | None = None
    norm_eps: float = 1e-5
    init_std: float = 0.02
    # Megatron's scaled initialization: the projections that write into the residual stream (attention output and
    # feed-forward down) drawn with std init_std / sqrt(2 * n_layers).
    scaled_output_init: bool = True
    checkpoint_activations: bool = False  # recompute each block in the backward pass (memory for time)
    # Each head's width where it is not dim / n_heads (Megatron's kv_channels; GPT-OSS: 64 heads of 64 on 2,880).
    kv_channels: int | None = None
    # The blocks' feed-forward as a mixture of experts (common/llm/moe.py); None: the dense SwiGLU.
    moe: MoEArgs | None = None
    # Sliding-window attention: layer i attends to the ``sliding_window`` tokens before each position (and the position
    # itself) where ``window_layers[i % len(window_layers)]`` is 1, to every earlier token where it is 0 (Megatron's
    # window_size (w, 0) and window_attn_skip_freq list); () : every layer attends to all earlier tokens.
    sliding_window: int | None = None
    window_layers: tuple[int, ...] = ()
    # Multi-head latent attention (common/llm/mla.py) in place of grouped-query attention; None: GQA.
    mla: MLAArgs | None = None
    # The first ``dense_layers`` blocks keep the dense SwiGLU of ``ffn_dim`` where the rest are MoE (DeepSeek-V3: 3).
    dense_layers: int = 0
    # Multi-token prediction (DeepSeek-V3, Megatron's mtp_num_layers 1): one more block predicts the token after
    # next; its cross-entropy, times ``mtp_loss_scale``, is added to the training loss (not to the evaluation).
    mtp_layers: int = 0
    mtp_loss_scale: float = 0.0

    def __post_init__(self) -> None:
        split = self.kv_channels is not None or self.dim % self.n_heads == 0
        if not split or self.n_heads % self.n_kv_heads or self.head_dim % 2:
            raise ValueError(
                f"decoder: dim {self.dim} must split into {self.n_heads} heads of an even size (or kv_channels give "
                f"it), and the heads into {self.n_kv_heads} key/value groups"
            )

    @property
    def head_dim(self) -> int:
        return self.kv_channels if self.kv_channels is not None else self.dim // self.n_heads

    @property
    def rope_dim(self) -> int:
        """The rotated width of a head: all of it, or MLA's rotary part."""
        return self.mla.rope_head_dim if self.mla is not None else self.head_dim

    def window(self, layer: int) -> int | None:
        """The attention window of block ``layer`` (None: all earlier tokens)."""
        if self.sliding_window is None or not self.window_layers:
            return None
        return self.sliding_window if self.window_layers[layer % len(self.window_layers)] else None


# Llama 3.1 8B (Meta's params.json for Llama-3.1-8B; the reference's model config, README.md beside the workload).
LLAMA31_8B = DecoderArgs(
    dim=4096,
    n_layers=32,
    n_heads=32,
    n_kv_heads=8,
    ffn_dim=14336,
    vocab_size=128256,
    max_seq_len=8192,
    rope_scaling=RopeScaling(),
)
# Llama 2 70B (Meta's params.json for Llama-2-70b; the llama2_70b_lora reference's checkpoint config): RoPE θ 10,000
# without Llama 3.1's frequency adjustment, a 32,000-token vocabulary, positions to 8,192 as the reference sets
# max_position_embeddings (Llama 2 was pretrained at 4,096; the reference extends the table without scaling).
LLAMA2_70B = DecoderArgs(
    dim=8192,
    n_layers=80,
    n_heads=64,
    n_kv_heads=8,
    ffn_dim=28672,
    vocab_size=32000,
    max_seq_len=8192,
    rope_theta=10_000.0,
)

# GPT-OSS 20B as the gpt_oss_20b reference trains it (mlcommons/training small_llm_moe_pretraining/primus,
# conf/gpt_oss_20B-pretrain.yaml): 24 layers of width 2,880, 64 query heads of 64 (GPT-OSS's head width; 2,880 / 64
# is odd) in 8 key/value groups, a 128-token sliding window on every other layer (the first, third, ...), RoPE base
# 150,000 without scaling, 32 SwiGLU experts of 2,880 with top-4 softmax routing over the chosen logits, no balancing
# loss (moe_router_load_balancing_type none, moe_aux_loss_coeff 0), dropless; norm epsilon 1e-6, initialization std
# 0.008; the Llama 3.1 tokenizer's 128,256 tokens. Not here: GPT-OSS's attention sinks and biases (README.md of
# gpt_oss_20b, Conformance).
GPT_OSS_20B = DecoderArgs(
    dim=2880,
    n_layers=24,
    n_heads=64,
    n_kv_heads=8,
    kv_channels=64,
    ffn_dim=2880,
    vocab_size=128256,
    max_seq_len=8192,
    rope_theta=150_000.0,
    norm_eps=1e-6,
    init_std=0.008,
    moe=MoEArgs(n_experts=32, top_k=4, expert_ffn_dim=2880),
    sliding_window=128,  # window_size [128, 0] on the layers window_attn_skip_freq marks 1: the even ones
    window_layers=(1, 0),
)

RESIDUAL_WRITERS = ("attention.out.weight", "down.weight", "experts.down")  # scaled by scaled_output_init


def rope_frequencies(args: DecoderArgs) -> torch.Tensor:
    """The rotary angular frequencies of one head (``rope_dim / 2`` of them), the flavour's scaling applied."""
    return frequencies(args.rope_dim, args.rope_theta, args.rope_scaling)


class Attention(nn.Module):
    """Causal grouped-query attention: ``n_kv_heads`` key/value heads shared by groups of query heads; with a
    ``window``, each position sees itself and the ``window`` positions before it only."""

    def __init__(self, a: DecoderArgs, window: int | None = None) -> None:
        super().__init__()
        self.n_heads, self.n_kv, self.head_dim, self.window = a.n_heads, a.n_kv_heads, a.head_dim, window
        self.qkv = nn.Linear(a.dim, (a.n_heads + 2 * a.n_kv_heads) * a.head_dim, bias=False)
        self.out = nn.Linear(a.n_heads * a.head_dim, a.dim, bias=False)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, at: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The attention's output at every position; with ``at`` (a (batch, queries) tensor of positions), at those
        positions alone: keys and values from every position, the queries, the attention and the output projection
        only where asked (:meth:`Decoder.forward`'s last block when a loss scores a few positions)."""
        b, t, _ = x.shape
        q, k, v = self.qkv(x).split([self.n_heads * self.head_dim, *[self.n_kv * self.head_dim] * 2], dim=-1)
        q = rotate(q.view(b, t, self.n_heads, self.head_dim).transpose(1, 2), cos, sin)
        k = rotate(k.view(b, t, self.n_kv, self.head_dim).transpose(1, 2), cos, sin)
        v = v.view(b, t, self.n_kv, self.head_dim).transpose(1, 2)
        gqa = self.n_kv != self.n_heads
        if at is not None:
            q = q.gather(2, at[:, None, :, None].expand(-1, self.n_heads, -1, self.head_dim))
            # (batch, 1, queries, keys): how far before the query each key is
            back = at[:, None, :, None] - torch.arange(t, device=x.device)
            mask = (back >= 0) & (back <= (t if self.window is None else self.window))
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)
        elif self.window is None or self.window >= t - 1:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
        else:
            pos = torch.arange(t, device=x.device)
            back = pos[:, None] - pos[None, :]
            mask = (back >= 0) & (back <= self.window)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)
        return self.out(y.transpose(1, 2).reshape(b, y.shape[2], -1))


class FeedForward(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, a: DecoderArgs) -> None:
        super().__init__()
        self.gate_up = nn.Linear(a.dim, 2 * a.ffn_dim, bias=False)
        self.down = nn.Linear(a.ffn_dim, a.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, a: DecoderArgs, window: int | None = None, *, dense: bool = False) -> None:
        super().__init__()
        self.attention_norm = nn.RMSNorm(a.dim, eps=a.norm_eps)
        if a.mla is None:
            self.attention: nn.Module = Attention(a, window)
        else:
            yarn = a.rope_scaling if isinstance(a.rope_scaling, YarnScaling) else None
            self.attention = MultiLatentAttention(a.dim, a.n_heads, a.mla, norm_eps=a.norm_eps, yarn=yarn)
        self.ffn_norm = nn.RMSNorm(a.dim, eps=a.norm_eps)
        self.feed_forward = FeedForward(a) if a.moe is None or dense else MoE(a.dim, a.moe)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, at: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The block's output; with ``at`` (positions, (batch, queries)), at those positions alone (``scored_at``)."""
        if at is None:
            x = x + self.attention(self.attention_norm(x), cos, sin)
        else:
            y = self.attention(self.attention_norm(x), cos, sin, at=at)
            x = x.gather(1, at[..., None].expand(-1, -1, x.shape[-1])) + y
        return x + self.feed_forward(self.ffn_norm(x))

    @property
    def scored_at(self) -> bool:
        """Whether the block can compute a few positions alone: grouped-query attention and a dense feed-forward act
        on each position by itself once the keys and values are known (latent attention is not written for it, and
        an MoE layer's balancing statistics count every token it routes)."""
        return isinstance(self.attention, Attention) and isinstance(self.feed_forward, FeedForward)


class Decoder(nn.Module):
    """Token ids (batch, sequence) -> next-token logits (batch, sequence, vocabulary)."""

    def __init__(self, args: DecoderArgs) -> None:
        super().__init__()
        self.args = args
        self.embedding = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList(
            Block(args, args.window(i), dense=i < args.dense_layers) for i in range(args.n_layers)
        )
        self.norm = nn.RMSNorm(args.dim, eps=args.norm_eps)
        self.output = nn.Linear(args.dim, args.vocab_size, bias=False)
        self.mtp = MultiTokenPrediction(args) if args.mtp_layers else None
        self.register_buffer("rope_cos", torch.empty(args.max_seq_len, args.rope_dim // 2), persistent=False)
        self.register_buffer("rope_sin", torch.empty(args.max_seq_len, args.rope_dim // 2), persistent=False)
        self.reset_rope()
        self.reset_parameters()

    @torch.no_grad()
    def reset_rope(self) -> None:
        """The rotary tables, computed on their buffers' device (again after a model built on the meta device is
        placed with ``to_empty``)."""
        positions = torch.arange(self.args.max_seq_len, dtype=torch.float32, device=self.rope_cos.device)
        angles = torch.outer(positions, rope_frequencies(self.args).to(positions.device))
        self.rope_cos.copy_(angles.cos())
        self.rope_sin.copy_(angles.sin())

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Normal(0, init_std) for every matrix, routers and experts too (the residual writers, experts' down
        included, scaled by 1/sqrt(2 layers), as Megatron's output_layer_init_method); norms at 1."""
        std = self.args.init_std
        out_std = std / math.sqrt(2 * self.args.n_layers) if self.args.scaled_output_init else std
        for name, p in self.named_parameters():
            if p.ndim == 1:
                nn.init.ones_(p)
            else:
                nn.init.normal_(p, 0.0, out_std if name.endswith(RESIDUAL_WRITERS) else std)

    def forward(
        self, tokens: torch.Tensor, labels: torch.Tensor | None = None, *, scored: torch.Tensor | None = None
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """The logits; with ``labels`` (the next tokens) and multi-token prediction, also its loss: position i
        sees the embedding of token i+1 (``labels[:, i]``) and predicts token i+2 (``labels[:, i+1]``); the last
        position has no target (Megatron's ``roll_tensor`` masks it). With ``scored`` (a boolean mask of the
        tokens' shape), the logits of the masked positions alone, one row each in order: a loss that scores a few
        positions (a fine-tuning's summary) skips the output layer and its softmax everywhere else, and the last
        block's work but its keys and values (where the block allows it: ``Block.scored_at``)."""
        t = tokens.shape[1]
        if t > self.args.max_seq_len:
            raise ValueError(f"decoder: a sequence of {t} tokens is longer than the model's {self.args.max_seq_len}")
        cos, sin = self.rope_cos[:t], self.rope_sin[:t]
        x = self.embedding(tokens)
        # Only the scored positions' logits asked for: the last block need compute nothing else but its keys and
        # values (where it allows it: ``Block.scored_at``), its queries, attention, output projection and
        # feed-forward at the scored positions alone (a fine-tuning's summary: about a fifth of a sequence). The
        # same numbers as the full block's rows at those positions (tests/unit/test_lora.py).
        counts = scored.sum(1) if scored is not None and self.layers[-1].scored_at else None
        most = int(counts.max()) if counts is not None and counts.numel() else 0
        for layer in self.layers[:-1] if most else self.layers:
            x = self._block(layer, x, cos, sin)
        if most:
            # each row's scored positions first, in order (an unscored position sorts after every scored one),
            # padded to the longest row's count with unscored positions whose rows are dropped below
            order = torch.where(scored, 0, t) + torch.arange(t, device=tokens.device)
            at = order.argsort(dim=1)[:, :most]
            kept = torch.arange(most, device=tokens.device) < counts[:, None]
            return self.output(self.norm(self._block(self.layers[-1], x, cos, sin, at)[kept]))
        h = self.norm(x)
        if scored is not None:
            return self.output(h[scored])
        logits = self.output(h)
        if labels is None or self.mtp is None:
            return logits
        # Megatron hands the multi-token prediction layer the decoder's output after its final norm
        m = self.mtp(h, self.embedding(labels), lambda block, y: self._block(block, y, cos, sin))
        mtp_logits = self.output(m[:, :-1])
        return logits, F.cross_entropy(mtp_logits.float().flatten(0, 1), labels[:, 1:].flatten(), ignore_index=-100)

    def _block(
        self, layer: nn.Module, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, at: torch.Tensor | None = None
    ) -> torch.Tensor:
        extra = () if at is None else (at,)  # the multi-token prediction's blocks take no positions
        if self.args.checkpoint_activations and self.training:
            return checkpoint(layer, x, cos, sin, *extra, use_reentrant=False)
        return layer(x, cos, sin, *extra)


class MultiTokenPrediction(nn.Module):
    """DeepSeek-V3's multi-token prediction module of depth 1 (Megatron's ``MultiTokenPredictionLayer``): the next
    token's embedding and the decoder's hidden state, each RMS-normed, concatenated in that order and projected back
    to the model's width (``eh_proj``), one more block (MoE, like the decoder's last), a final norm; the decoder's
    embedding and output layer are shared."""

    def __init__(self, a: DecoderArgs) -> None:
        super().__init__()
        self.enorm = nn.RMSNorm(a.dim, eps=a.norm_eps)
        self.hnorm = nn.RMSNorm(a.dim, eps=a.norm_eps)
        self.eh_proj = nn.Linear(2 * a.dim, a.dim, bias=False)
        self.block = Block(a)
        self.norm = nn.RMSNorm(a.dim, eps=a.norm_eps)

    def forward(self, hidden: torch.Tensor, next_embedding: torch.Tensor, run_block) -> torch.Tensor:
        x = self.eh_proj(torch.cat((self.enorm(next_embedding), self.hnorm(hidden)), -1))
        return self.norm(run_block(self.block, x))


def token_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, *, compiled: bool = False) -> torch.Tensor:
    """The decoder benchmarks' training loss: the mean cross-entropy, in fp32, of every position's logits against
    its label (the next token; -100 is ignored). ``compiled`` (a run with ``--compile``): the same function through
    ``torch.compile``, outside the compiled model, so that the fp32 cast, the log-softmax and their gradients over
    the whole vocabulary fuse into a few loops instead of full-size passes over memory (deepseekv3_671b's mini step
    in bf16 on the 2-core CPU: ``benchmarks/peers.py``, the workload's README)."""
    return (_compiled_cross_entropy() if compiled else _cross_entropy)(logits, labels)


def _cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=-100)


@functools.cache
def _compiled_cross_entropy():
    return torch.compile(_cross_entropy)


def reference_tensor_names(model: Decoder) -> list[str]:
    """The usual (Hugging Face / Meta) names of the tensors, the fused projections split into their parts."""
    names = []
    for name, _ in model.named_parameters():
        if name.endswith("attention.qkv.weight"):
            base = name.removesuffix("qkv.weight")
            names += [f"{base}{p}.weight" for p in ("wq", "wk", "wv")]
        elif name.endswith(("feed_forward.gate_up.weight", "shared.gate_up.weight")):
            base = name.removesuffix("gate_up.weight")
            names += [f"{base}{p}.weight" for p in ("w1", "w3")]
        elif name.endswith("experts.gate_up"):  # every expert's, stacked
            names += [name.replace("gate_up", "w1"), name.replace("gate_up", "w3")]
        else:
            renamed = name.replace("attention.out.", "attention.wo.").replace("feed_forward.down.", "feed_forward.w2.")
            names.append(renamed.replace("shared.down.", "shared.w2.").replace("experts.down", "experts.w2"))
    return names
