"""The mixture-of-experts feed-forward layer every MoE benchmark configures (torchtitan's one ``moe.py``): a router
picks ``top_k`` of ``n_experts`` SwiGLU experts for each token, the chosen experts' outputs are summed with the
router's weights, and optional shared experts see every token. Written once; GPT-OSS and DeepSeek-V3 differ only in
their :class:`MoEArgs`.

Routing follows Megatron-Core's ``TopKRouter`` (``moe/router.py``, ``moe/moe_utils.py``), which both references run:
- ``softmax`` scores: top-k of the logits, then a softmax over the k chosen (``pre_softmax=False``, GPT-OSS), or a
  softmax over all experts, then their top-k (``pre_softmax=True``);
- ``sigmoid`` scores (DeepSeek-V3): the k highest sigmoids, divided by their sum;
- both then multiplied by ``top_k_scaling`` (DeepSeek-V3: 2.5);
- group-limited choice (DeepSeek-V3: 8 groups of 32 experts, 4 groups kept): the experts split into ``n_groups``
  consecutive groups, each group scored by the sum of its ``top_k / group_top_k`` highest scores, and the k experts
  chosen among the ``group_top_k`` best groups only (Megatron's ``group_limited_topk``).
Balancing: the Switch/GShard auxiliary loss ``coeff * E * sum_e f_e * P_e`` (over the batch, or per sequence and
averaged as Megatron's ``seq_aux_loss``), added to the gradient only (the logged loss stays the language-model loss,
as Megatron's ``MoEAuxLossAutoScaler`` does); or DeepSeek-V3's auxiliary-loss-free balancing, a per-expert bias
added to the scores for the choice only and moved by ``expert_bias_update_rate`` after each step
(:func:`update_expert_bias`). Dropless: every token reaches its k experts (no capacity, as both references run).
Expert parallelism: :meth:`MoE.shard_experts` keeps a rank's experts; tokens travel to them and back through
``all_to_all``. The counts a layer keeps (the bias's and the load reported) are of the tokens this rank routes, to
every expert, with or without it: summed over ranks they count the global batch. Several processes run it through
``expert_parallel.py`` (FSDP2 for the rest, the experts' gradients scaled and clipped with the rest).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

SCORE_FUNCTIONS = ("softmax", "sigmoid")
PAD_ROWS = 64  # Experts.padded: the row counts a CPU's bf16 products are built for


@dataclass(frozen=True, kw_only=True)
class MoEArgs:
    n_experts: int
    top_k: int
    expert_ffn_dim: int  # each expert's SwiGLU hidden width (Megatron's moe_ffn_hidden_size)
    n_shared_experts: int = 0  # experts every token passes through, unweighted (DeepSeek-V3: 1)
    score_function: str = "softmax"
    pre_softmax: bool = False  # softmax scores: over all experts before the top-k, or over the k chosen logits
    top_k_scaling: float = 1.0  # the routed weights multiplied by this (Megatron's moe_router_topk_scaling_factor)
    aux_loss_coeff: float = 0.0  # 0: no auxiliary loss
    aux_loss_per_sequence: bool = False  # Megatron's seq_aux_loss (each sequence balanced, then averaged)
    expert_bias_update_rate: float = 0.0  # > 0: DeepSeek-V3's bias-based balancing
    n_groups: int = 1  # group-limited routing (Megatron's moe_router_num_groups); 1: every expert is a candidate
    group_top_k: int = 1  # the groups kept (moe_router_group_topk)

    def __post_init__(self) -> None:
        if not 1 <= self.top_k <= self.n_experts or self.score_function not in SCORE_FUNCTIONS:
            raise ValueError(
                f"moe: top_k {self.top_k} must lie in 1..n_experts ({self.n_experts}) and the score function be one "
                f"of {SCORE_FUNCTIONS}, not {self.score_function!r}"
            )
        if (
            self.n_experts % self.n_groups
            or not 1 <= self.group_top_k <= self.n_groups
            or self.top_k % self.group_top_k
        ):
            raise ValueError(
                f"moe: {self.n_experts} experts must split into {self.n_groups} groups, {self.group_top_k} of them "
                f"kept, and top_k {self.top_k} be a multiple of the groups kept"
            )


def group_limited_topk(scores: torch.Tensor, m: MoEArgs) -> torch.Tensor:
    """The chosen experts (N, k) of scores (N, E): the k best among the experts of the ``group_top_k`` groups whose
    ``top_k / group_top_k`` best scores sum highest (all experts when there is one group)."""
    if m.n_groups == 1:
        return scores.topk(m.top_k, -1).indices
    grouped = scores.view(scores.shape[0], m.n_groups, -1)
    group_scores = grouped.topk(m.top_k // m.group_top_k, -1).values.sum(-1)  # (N, groups)
    kept = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(
        1, group_scores.topk(m.group_top_k, -1).indices, True
    )
    masked = grouped.masked_fill(~kept[..., None], float("-inf")).view_as(scores)
    return masked.topk(m.top_k, -1).indices


def switch_aux_loss(scores: torch.Tensor, chosen: torch.Tensor, top_k: int) -> torch.Tensor:
    """``E * sum_e f_e * P_e`` over tokens (..., T, E): f the fraction of the T*k choices that went to expert e, P
    the mean score of e (scores normalized over all experts); 1 when perfectly balanced; the mean over leading
    dimensions (sequences)."""
    n_experts, n_tokens = scores.shape[-1], scores.shape[-2]
    counts = F.one_hot(chosen, n_experts).sum(-2).sum(-2).to(scores.dtype)  # (..., E) choices per expert
    f = counts / (n_tokens * top_k)
    return (n_experts * (f * scores.mean(-2)).sum(-1)).mean()


class _AddAuxGradient(torch.autograd.Function):
    """Returns ``x`` unchanged; its backward also sends a gradient of 1 into ``aux`` (Megatron's
    ``MoEAuxLossAutoScaler``): the auxiliary loss is trained without entering the loss the harness logs."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, aux: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(aux)
        return x

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        (aux,) = ctx.saved_tensors
        return grad, torch.ones_like(aux)


class _AllToAll(torch.autograd.Function):
    """Rows of ``x`` in ``send`` blocks to the ranks, ``recv`` blocks back from them; the gradient the way back."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, recv: list[int], send: list[int], group: dist.ProcessGroup | None):
        ctx.splits, ctx.group = (recv, send), group
        out = x.new_empty(sum(recv), *x.shape[1:])
        dist.all_to_all_single(out, x.contiguous(), recv, send, group=group)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        recv, send = ctx.splits
        out = grad.new_empty(sum(send), *grad.shape[1:])
        dist.all_to_all_single(out, grad.contiguous(), send, recv, group=ctx.group)
        return out, None, None, None


class Router(nn.Module):
    """Token states (N, dim) -> (weights (N, k), experts (N, k)); the scores in fp32 (moe_router_dtype fp32)."""

    def __init__(self, dim: int, m: MoEArgs) -> None:
        super().__init__()
        self.m = m
        self.weight = nn.Parameter(torch.empty(m.n_experts, dim))
        if m.expert_bias_update_rate > 0:
            self.register_buffer("expert_bias", torch.zeros(m.n_experts))
        else:
            self.expert_bias = None
        self.aux_loss: torch.Tensor | None = None  # the last forward's (unweighted) auxiliary loss

    def forward(self, x: torch.Tensor, n_seqs: int) -> tuple[torch.Tensor, torch.Tensor]:
        m = self.m
        with torch.autocast(x.device.type, enabled=False):
            logits = F.linear(x.float(), self.weight.float())
        if m.score_function == "softmax":
            scores = torch.softmax(logits, -1)
            choose_from = scores if m.pre_softmax else logits
        else:
            scores = torch.sigmoid(logits)
            choose_from = scores
        if self.expert_bias is not None:
            choose_from = choose_from + self.expert_bias  # the choice only: the weights stay the scores
        experts = group_limited_topk(choose_from, m)
        if m.score_function == "softmax" and not m.pre_softmax:
            weights = torch.softmax(logits.gather(-1, experts), -1)
        else:
            weights = scores.gather(-1, experts)
            if m.score_function == "sigmoid" and m.top_k > 1:
                weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
        self.aux_loss = None
        if m.aux_loss_coeff > 0 and self.training:
            normed = scores if m.score_function == "softmax" else scores / (scores.sum(-1, keepdim=True) + 1e-20)
            shape = (n_seqs, -1) if m.aux_loss_per_sequence else (1, -1)
            self.aux_loss = switch_aux_loss(normed.view(*shape, m.n_experts), experts.view(*shape, m.top_k), m.top_k)
        return weights * m.top_k_scaling, experts


class Experts(nn.Module):
    """``n`` SwiGLU experts as stacked matrices: tokens (sorted by expert) and their counts -> outputs."""

    def __init__(self, n: int, dim: int, ffn_dim: int) -> None:
        super().__init__()
        self.gate_up = nn.Parameter(torch.empty(n, dim, 2 * ffn_dim))
        self.down = nn.Parameter(torch.empty(n, ffn_dim, dim))

    def forward(self, x: torch.Tensor, counts: list[int]) -> torch.Tensor:
        if x.device.type == "cpu" and x.shape[0]:
            if torch.is_autocast_enabled("cpu"):  # grouped_mm is not autocast's
                return self.padded(x, counts)
            if x.dtype == self.down.dtype and not torch.compiler.is_compiling():
                return self.grouped(x, counts)
        return self.looped(x, counts)

    def padded(self, x: torch.Tensor, counts: list[int]) -> torch.Tensor:
        """Under a CPU's bf16 autocast: every expert's rows padded with zero rows to one length, a multiple of
        ``PAD_ROWS``, and two batched products. oneDNN builds (JIT-compiles) a kernel for every new shape of a bf16
        product, about 1 ms each, which per-expert products of a step's varying row counts would pay every step
        (a 1,016 x 192 by 192 x 128 product: 965 us the first time, 47 us from its cache); a handful of padded
        lengths are built once. The padding rows are zeros: they add nothing to the real rows or to the gradients."""
        n, d = len(counts), x.shape[1]
        length = -(-max(counts) // PAD_ROWS) * PAD_ROWS
        sizes = torch.tensor(counts, device=x.device)
        starts = sizes.cumsum(0) - sizes
        slot = torch.arange(x.shape[0], device=x.device) - starts.repeat_interleave(sizes, output_size=x.shape[0])
        rows = slot + (torch.arange(n, device=x.device) * length).repeat_interleave(sizes, output_size=x.shape[0])
        batch = x.new_zeros(n * length, d).index_copy(0, rows, x).view(n, length, d)
        gate, up = torch.bmm(batch, self.gate_up).chunk(2, dim=-1)
        out = torch.bmm(F.silu(gate) * up, self.down)
        return out.view(n * length, -1)[rows]

    def grouped(self, x: torch.Tensor, counts: list[int]) -> torch.Tensor:
        """One grouped product per matrix (a CPU's path): each expert's rows times its matrices, computed as
        :meth:`looped` computes them, in one kernel forward and backward instead of a few per expert (a small
        model's step on a CPU is mostly the cost of launching its kernels)."""
        offs = torch.tensor(counts).cumsum(0).to(torch.int32)
        gate, up = F.grouped_mm(x, self.gate_up, offs=offs).chunk(2, dim=-1)
        return F.grouped_mm(F.silu(gate) * up, self.down, offs=offs)

    def looped(self, x: torch.Tensor, counts: list[int]) -> torch.Tensor:
        """A loop over the experts that got tokens (any device, dtype, autocast or compiler; no rows included)."""
        # unbind: the backward writes one gradient per matrix stack (indexing would allocate a zero-filled gradient
        # of the whole stack for every expert and add them up)
        # to(x.dtype): a no-op but where the experts stay fp32 beside bf16 inputs (FSDP2 gathering the rest in bf16)
        gate_ups, downs = self.gate_up.to(x.dtype).unbind(0), self.down.to(x.dtype).unbind(0)
        outs = []
        for e, part in enumerate(x.split(counts)):
            if part.shape[0]:
                gate, up = (part @ gate_ups[e]).chunk(2, dim=-1)
                outs.append((F.silu(gate) * up) @ downs[e])
        return torch.cat(outs) if outs else x.new_zeros(0, self.down.shape[-1]) + 0 * self.down.sum()


class SharedExperts(nn.Module):
    """The shared experts, one SwiGLU of ``n * expert_ffn_dim`` that every token passes through."""

    def __init__(self, dim: int, ffn_dim: int) -> None:
        super().__init__()
        self.gate_up = nn.Linear(dim, 2 * ffn_dim, bias=False)
        self.down = nn.Linear(ffn_dim, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class MoE(nn.Module):
    """The block's feed-forward, mixture-of-experts: (batch, sequence, dim) -> the same shape."""

    def __init__(self, dim: int, m: MoEArgs) -> None:
        super().__init__()
        self.m = m
        self.router = Router(dim, m)
        self.experts = Experts(m.n_experts, dim, m.expert_ffn_dim)
        self.shared = SharedExperts(dim, m.n_shared_experts * m.expert_ffn_dim) if m.n_shared_experts else None
        self.register_buffer("tokens_per_expert", torch.zeros(m.n_experts), persistent=False)  # for the bias
        self.register_buffer("tokens_seen", torch.zeros(m.n_experts), persistent=False)  # for the load reported
        self.group: dist.ProcessGroup | None = None  # expert parallelism (None: the default group) over ep_size ranks
        self.ep_size, self.ep_rank = 1, 0

    def shard_experts(self, group: dist.ProcessGroup | None = None) -> None:
        """Expert parallelism: keep this rank's ``n_experts / world`` experts (rank r holds experts r*n .. r*n+n-1,
        sliced from the full tensors, so that every rank's initialization agrees with one process's)."""
        size, rank = dist.get_world_size(group), dist.get_rank(group)
        if self.m.n_experts % size:
            raise ValueError(f"moe: {self.m.n_experts} experts do not split over {size} ranks")
        n = self.m.n_experts // size
        for name in ("gate_up", "down"):
            full = getattr(self.experts, name)
            setattr(self.experts, name, nn.Parameter(full.detach()[rank * n : (rank + 1) * n].clone()))
        self.group, self.ep_size, self.ep_rank = group, size, rank

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        flat = x.reshape(-1, d)
        weights, experts = self.router(flat, b)
        chosen = experts.flatten()
        order = chosen.argsort(stable=True)
        counts = torch.bincount(chosen, minlength=self.m.n_experts)
        if self.training:
            self.tokens_per_expert += counts.detach().to(self.tokens_per_expert.dtype)
            self.tokens_seen += counts.detach().to(self.tokens_seen.dtype)
        routed = self._route(flat[order // self.m.top_k], counts)
        weighted = (routed * weights.flatten()[order, None]).to(flat.dtype)  # the weights are fp32, as the router
        out = torch.zeros_like(flat).index_add_(0, order // self.m.top_k, weighted)
        if self.shared is not None:
            out = out + self.shared(flat)
        if self.router.aux_loss is not None:
            out = _AddAuxGradient.apply(out, self.m.aux_loss_coeff * self.router.aux_loss)
        return out.view(b, t, d)

    @torch.compiler.disable
    def _route(self, routed: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """Sorted tokens through their experts (here or on the ranks that hold them). Outside a compiled graph: the
        row counts are the data's, new every step, which a compiled graph would have to guard on or break at; here
        the CPU's paths (grouped, padded) serve a compiled run as they serve an eager one."""
        if self.ep_size == 1:
            return self.experts(routed, counts.tolist())
        return self._exchange(routed, counts)

    def _exchange(self, routed: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """Tokens sorted by expert -> to the ranks that hold their experts (all_to_all), through the experts, and
        back in the same order."""
        w, n = self.ep_size, self.m.n_experts // self.ep_size
        received_counts = torch.empty_like(counts)
        dist.all_to_all_single(received_counts, counts, group=self.group)  # (source rank, local expert)
        send = counts.view(w, n).sum(1).tolist()
        recv_matrix = received_counts.view(w, n)
        recv = recv_matrix.sum(1).tolist()
        got = _AllToAll.apply(routed, recv, send, self.group)
        # received in (source rank, expert) order: regroup by expert for the experts, then back
        expert_of = torch.arange(n, device=got.device).repeat(w).repeat_interleave(recv_matrix.flatten())
        perm = expert_of.argsort(stable=True)
        done = torch.empty_like(got).index_copy(0, perm, self.experts(got[perm], recv_matrix.sum(0).tolist()))
        return _AllToAll.apply(done, send, recv, self.group)


@torch.no_grad()
def update_expert_bias(model: nn.Module) -> None:
    """DeepSeek-V3's auxiliary-loss-free balancing, after an optimizer step: each bias-balanced MoE layer's bias
    moves by ``expert_bias_update_rate`` toward the experts that got fewer than the mean of the tokens counted since
    the last update (summed over data-parallel ranks), away from those that got more; the counts restart."""
    for layer in model.modules():
        if isinstance(layer, MoE):
            counts = layer.tokens_per_expert
            if layer.router.expert_bias is not None:
                if dist.is_available() and dist.is_initialized():
                    dist.all_reduce(counts)
                layer.router.expert_bias += layer.m.expert_bias_update_rate * torch.sign(counts.mean() - counts)
            counts.zero_()


def expert_load(model: nn.Module) -> list[list[float]]:
    """Each MoE layer's share of the training tokens this rank routed to each expert since the counts last restarted
    (the workloads log the counts summed over ranks: ``gpt_oss_20b/workload.py`` ``expert_balance``)."""
    return [
        (layer.tokens_seen / layer.tokens_seen.sum().clamp(min=1)).tolist()
        for layer in model.modules()
        if isinstance(layer, MoE)
    ]
