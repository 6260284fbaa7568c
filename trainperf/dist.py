"""torch.distributed from torchrun's environment, with a few small verbs. No import-time side effects.

A single process is a world of size one: every verb then does the local thing, so workloads and the
harness call the same functions whether or not they run under torchrun. Evaluation uses three of them:
``shard`` gives each rank its part of the evaluation set exactly once (no padding duplicates, unlike
DistributedSampler), and ``all_reduce``/``all_gather``/``gather_objects`` bring the parts together.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as torch_dist


@dataclass(frozen=True, kw_only=True)
class DistContext:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    backend: str | None = None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def barrier(self) -> None:
        if self.distributed:
            torch_dist.barrier()

    def all_reduce(self, values: list[float], op: str = "sum") -> list[float]:
        """Reduce a few floats over ranks (``sum`` or ``max``); float64 on the device."""
        if not self.distributed:
            return list(values)
        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        torch_dist.all_reduce(t, op=torch_dist.ReduceOp.MAX if op == "max" else torch_dist.ReduceOp.SUM)
        return t.tolist()

    def broadcast_object(self, obj: object) -> object:
        """Rank 0's object on every rank."""
        if not self.distributed:
            return obj
        box = [obj]
        torch_dist.broadcast_object_list(box, src=0)
        return box[0]

    def shard(self, n: int) -> range:
        """This rank's contiguous part of ``n`` items; the parts of all ranks cover each item exactly once."""
        start = n * self.rank // self.world_size
        stop = n * (self.rank + 1) // self.world_size
        return range(start, stop)

    def all_gather(self, tensor: torch.Tensor) -> torch.Tensor:
        """Every rank's tensor (lengths may differ along dim 0), concatenated in rank order, on every rank."""
        if not self.distributed:
            return tensor
        local = tensor.to(self.device)
        sizes = [torch.zeros(1, dtype=torch.int64, device=self.device) for _ in range(self.world_size)]
        torch_dist.all_gather(sizes, torch.tensor([local.shape[0]], dtype=torch.int64, device=self.device))
        longest = int(max(int(s) for s in sizes))
        padded = torch.zeros((longest, *local.shape[1:]), dtype=local.dtype, device=self.device)
        padded[: local.shape[0]] = local
        parts = [torch.empty_like(padded) for _ in range(self.world_size)]
        torch_dist.all_gather(parts, padded)
        return torch.cat([p[: int(s)] for p, s in zip(parts, sizes, strict=True)]).to(tensor.device)

    def gather_objects(self, obj: object) -> list[object]:
        """Every rank's object, in rank order, on every rank (evaluation results gathered for scoring)."""
        if not self.distributed:
            return [obj]
        out: list[object] = [None] * self.world_size
        torch_dist.all_gather_object(out, obj)
        return out

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def launched_by_torchrun() -> bool:
    return "TORCHELASTIC_RUN_ID" in os.environ or (
        "RANK" in os.environ and "WORLD_SIZE" in os.environ and "MASTER_ADDR" in os.environ
    )


def init_from_env() -> DistContext:
    """Join the process group torchrun described (gloo on CPU, NCCL on GPU); else a world of one."""
    if not launched_by_torchrun() or int(os.environ.get("WORLD_SIZE", "1")) == 1:
        device = torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu")
        return DistContext(device=device)
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    if torch.cuda.is_available():
        torch.cuda.set_device(local)
        device, backend = torch.device("cuda", local), "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    if not torch_dist.is_initialized():
        torch_dist.init_process_group(backend=backend)
    return DistContext(rank=rank, world_size=world, local_rank=local, device=device, backend=backend)


def shutdown(ctx: DistContext) -> None:
    if ctx.distributed and torch_dist.is_initialized():
        torch_dist.destroy_process_group()
