"""Expert parallelism as the MoE workloads run it on several processes: each MoE layer keeps ``n_experts / W`` of
its experts (:meth:`~trainperf.workloads.common.llm.moe.MoE.shard_experts`: tokens travel to them and back through
``all_to_all``), FSDP2 shards the rest of the model and leaves the experts out (``ignored_params``), and the step
treats the experts' gradients as the FSDP ones are treated, so that W ranks step as one process does on the same
global batch:

- scaling: each rank's loss is the mean over its own tokens and FSDP2 averages the other gradients over the W
  ranks: the gradient of the global batch's mean. An expert's gradient reaches the rank that holds it from every
  rank's tokens, through the all-to-all's backward: the sum of the W ranks' gradients, W times the global mean's. A
  hook on each expert tensor divides its gradient by W (:func:`average_expert_gradients`).
- clipping: the norm of the whole model's gradient, the FSDP gradients' norm (DTensors, whose norm torch reduces over
  their mesh) with the squares of the local experts' gradients summed over the ranks (:func:`clip_grad_norm_`).
- balancing and the load reported count tokens where they are routed (each rank counts its own tokens for every
  expert) and sum the counts over ranks, with or without expert parallelism (``moe.py``).
The expert-parallel ranks are the data-parallel ranks (the reference's expert parallelism 8 runs over its
data-parallel ranks): the degree is the world size where it divides the experts, else 1 (every parameter in FSDP2).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from trainperf.workloads.common.fsdp import shard_units
from trainperf.workloads.common.llm.moe import MoE


def degree(n_experts: int, world_size: int) -> int:
    """The expert-parallel degree of a run of ``world_size`` ranks: all of them where they split the experts evenly,
    else 1."""
    return world_size if world_size > 1 and n_experts % world_size == 0 else 1


def moe_layers(model: nn.Module) -> list[MoE]:
    return [m for m in model.modules() if isinstance(m, MoE)]


def shard_experts(model: nn.Module) -> set[nn.Parameter]:
    """Every MoE layer keeps this rank's experts (sliced from the tensors it holds, on any device, meta included);
    returns the experts' parameters, for FSDP2 to leave out."""
    kept: set[nn.Parameter] = set()
    for layer in moe_layers(model):
        layer.shard_experts()
        kept.update(layer.experts.parameters())
    return kept


def shard(
    model: nn.Module, units: list[nn.Module], device: torch.device, degree: int, *, mixed_precision: bool
) -> None:
    """Expert parallelism where ``degree`` is more than 1 (the experts left out of FSDP2), then FSDP2 of each of
    ``units`` and of the model (``common/fsdp.py``)."""
    experts = shard_experts(model) if degree > 1 else set()
    shard_units(model, units, device, ignored=experts, mixed_precision=mixed_precision)


def local_rows(model: nn.Module) -> dict[str, slice]:
    """The parameter names of the sharded experts, each with the rows (experts) of the whole tensor this rank holds:
    what a loader or an initialization copies into them."""
    rows = {}
    for prefix, layer in model.named_modules():
        if isinstance(layer, MoE) and layer.ep_size > 1:
            n = layer.m.n_experts // layer.ep_size
            for name, _ in layer.experts.named_parameters():
                rows[f"{prefix}.experts.{name}"] = slice(layer.ep_rank * n, (layer.ep_rank + 1) * n)
    return rows


def average_expert_gradients(model: nn.Module) -> None:
    """The hook that divides each sharded expert tensor's gradient by the expert-parallel degree (the scaling
    above); called once the parameters are placed (placing may replace a parameter, and its hooks with it)."""
    for layer in moe_layers(model):
        if layer.ep_size > 1:
            for p in layer.experts.parameters():
                p.register_hook(lambda g, w=layer.ep_size: g / w)


@torch.no_grad()
def clip_grad_norm_(model: nn.Module, max_norm: float) -> torch.Tensor:
    """torch's ``clip_grad_norm_`` over the whole model (every gradient times ``min(1, max_norm / (norm + 1e-6))``)
    where the experts are sharded: the norm combines the FSDP gradients' (reduced over their mesh) and the local
    experts' (their squares summed over the ranks); returns the norm before clipping, the same on every rank."""
    from torch.distributed.tensor import DTensor

    local_ids = {id(p) for layer in moe_layers(model) if layer.ep_size > 1 for p in layer.experts.parameters()}
    params = [p for p in model.parameters() if p.grad is not None]
    if not local_ids:
        return torch.nn.utils.clip_grad_norm_(params, max_norm)
    sharded = [p.grad for p in params if id(p) not in local_ids]
    local = [p.grad for p in params if id(p) in local_ids]
    norm = torch.nn.utils.get_total_norm(sharded) if sharded else torch.zeros((), device=local[0].device)
    if isinstance(norm, DTensor):
        norm = norm.full_tensor()
    squares = torch.stack([g.float().square().sum() for g in local]).sum()
    dist.all_reduce(squares)  # the expert-parallel group (the default): every rank's experts once
    total = (norm.float().square() + squares).sqrt()
    scale = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for g in [*sharded, *local]:
        (g.to_local() if isinstance(g, DTensor) else g).mul_(scale.to(g.dtype))
    return total
