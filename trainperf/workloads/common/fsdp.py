"""FSDP2 as the current round's large models use it: each unit (a block, an embedding) sharded over the data-parallel
ranks with ``fully_shard``, then the whole model, leaving out any parameters each rank keeps its own of (an MoE's
sharded experts); on a GPU the shards gathered in bf16 and gradients reduced in fp32 (torchtitan's
mixed_precision_param / mixed_precision_reduce). And the copy of a full tensor, drawn or read on the CPU, into a
parameter or this rank's shard of it, so that a model built on the meta device is filled shard by shard."""

from __future__ import annotations

from collections.abc import Iterable

import torch


def shard_units(
    model: torch.nn.Module,
    units: Iterable[torch.nn.Module],
    device: torch.device,
    *,
    ignored: set[torch.nn.Parameter] | None = None,
    mixed_precision: bool = True,
) -> torch.nn.Module:
    """``fully_shard`` each of ``units``, then ``model`` (call only when distributed), leaving out the ``ignored``
    parameters (each rank keeps its own: an MoE's sharded experts); ``mixed_precision`` false: the parameters are
    gathered in their own dtype on a GPU too."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mp = MixedPrecisionPolicy()
    if device.type == "cuda" and mixed_precision:
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for unit in units:
        fully_shard(unit, mp_policy=mp, ignored_params=ignored or None)
    fully_shard(model, mp_policy=mp, ignored_params=ignored or None)
    return model


@torch.no_grad()
def copy_into(p: torch.Tensor, full: torch.Tensor) -> None:
    """``full`` (the whole tensor, on the CPU) into the parameter ``p``, or into this rank's shard of it."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    if isinstance(p, DTensor):
        local = distribute_tensor(full.to(p.dtype), p.device_mesh, p.placements, src_data_rank=None).to_local()
        p.to_local().copy_(local)
    else:
        p.copy_(full.to(p.dtype))
