"""torch.distributed from torchrun's environment, with a few small verbs. No import-time side effects.

A single process is a world of size one: every verb then does the local thing, so workloads and the
harness call the same functions whether or not they run under torchrun. Evaluation uses three of them:
``shard`` gives each rank its part of the evaluation set exactly once (no padding duplicates, unlike
DistributedSampler), and ``all_reduce``/``all_gather``/``gather_objects`` bring the parts together.
"""

from __future__ import annotations

import datetime
import importlib
import os
import signal
import time
from dataclasses import dataclass

import torch
import torch.distributed as torch_dist

from trainperf.errors import ProcessGroupFailed, Terminated, UsageError

# How long a rank waits for the others at a collective before the job fails (torch's own default is 30 minutes
# for gloo, 10 for NCCL). The CLI sets it from the specs it runs: the longest legitimate wait is one rank's
# untimed initialization, which the rules cap (``BenchmarkSpec.max_init_minutes``). A killed rank is noticed at
# once (its connections close, and torchrun stops the job); the timeout bounds a rank that hangs.
TIMEOUT_ENV = "TRAINPERF_COLLECTIVE_TIMEOUT_S"  # seconds; overrides the spec's bound (e.g. a short one for tests)


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

    def longest_shard(self, n: int) -> int:
        """The most items any rank's :meth:`shard` of ``n`` holds: where every forward of a sharded model gathers its
        parameters (FSDP), every rank runs this many, a rank with fewer repeating one of its own and discarding it."""
        return -(-n // self.world_size)

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


def collective_timeout_s(default_s: float) -> float:
    """The collective timeout: ``$TRAINPERF_COLLECTIVE_TIMEOUT_S`` when set, else ``default_s``."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return default_s
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value > 0 and value < float("inf")):
        raise UsageError(f"{TIMEOUT_ENV}={text!r}: give the collective timeout as a positive number of seconds")
    return value


def init_from_env(timeout_s: float = 1800.0) -> DistContext:
    """Join the process group torchrun described (gloo on CPU, NCCL on GPU); else a world of one.

    ``timeout_s``: how long a collective waits for every rank before it fails (:func:`collective_timeout_s`).
    """
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
        # torch._dynamo (torchvision, timm and torch.compile import it) keeps a reference to the default group when
        # it is first imported after the group exists; destroy_process_group then leaves the group's gloo threads
        # running, and a rank could end in std::terminate at exit. Imported first, it holds no such reference.
        importlib.import_module("torch._dynamo")

        torch_dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=timeout_s))
    return DistContext(rank=rank, world_size=world, local_rank=local, device=device, backend=backend)


def shutdown(ctx: DistContext, *, completed: bool = False) -> None:
    """Leave the process group.

    ``completed``: every rank finished the same work, so all ranks meet at a barrier first and none tears down
    its gloo pairs while a peer is still reading the last collective from them (a rank that did so could be
    aborted by ``std::terminate`` at exit). After a rank-local failure there is no barrier: the peers may be
    waiting in another collective.
    """
    if ctx.distributed and torch_dist.is_initialized():
        if completed:
            torch_dist.barrier()
        torch_dist.destroy_process_group()


# --- a rank that fails --------------------------------------------------------------------------------------
_PEER_WORDS = ("gloo", "NCCL", "Connection reset by peer", "Connection closed by peer", "Broken pipe")


def is_peer_failure(exc: BaseException | None) -> bool:
    """Whether ``exc`` is a collective failing because another rank stopped or hung (not a bug of this rank),
    itself or as the cause of the error that ended the run (the runner wraps it in ``RunFailed``)."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, getattr(torch_dist, "DistError", ())):
            return True
        if isinstance(exc, RuntimeError) and any(word in str(exc) for word in _PEER_WORDS):
            return True
        exc, seen = exc.__cause__, seen + 1
    return False


def peer_failure(ctx: DistContext, exc: BaseException, timeout_s: float | None = None) -> ProcessGroupFailed:
    """The error a rank reports when the job lost another rank: what happened, what was kept, what to do."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    within = "the collective timeout" if timeout_s is None else f"the {timeout_s:g} s collective timeout"
    return ProcessGroupFailed(
        f"rank {ctx.rank} of {ctx.world_size}: a collective failed ({first[:200]}): another process of this torchrun "
        f"job stopped (killed, out of memory) or did not answer within {within}. A run "
        "in progress ends aborted (a started run counts as not converged) and earlier results stay; see the "
        "other ranks' messages, then run the same command to resume"
    )


def stop_on_sigterm(ctx: DistContext) -> None:
    """Under torchrun, SIGTERM has two senders. The job was asked to stop (``kill``, Slurm's ``scancel`` or time
    limit): `trainperf run`'s launcher got the signal and left its stop file (:data:`STOP_FILE_ENV`), and the run
    ends as on one process (``Terminated``: logged aborted and kept aside, then redone). Otherwise torchrun is
    stopping the job because another rank failed: ProcessGroupFailed, so this rank ends like a failed run (a started
    run is logged aborted and counted) instead of dying mid-write."""

    def stop(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # Slurm signals every process, torchrun then again: one is enough
        if _asked_to_stop():
            raise Terminated()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
        raise ProcessGroupFailed(
            f"rank {ctx.rank} of {ctx.world_size}: stopped by torchrun (SIGTERM), which ends the job when one of its "
            "processes fails. A run in progress ends aborted and earlier results stay; see the other ranks' "
            "messages, then run the same command to resume"
        )

    signal.signal(signal.SIGTERM, stop)


STOP_FILE_ENV = "TRAINPERF_STOP_FILE"  # `trainperf run`'s launcher creates this file when it is sent SIGTERM
STOP_FILE_WAIT_S = 1.0  # Slurm signals a step's processes in no set order: the launcher may hear it just after


def _asked_to_stop() -> bool:
    path = os.environ.get(STOP_FILE_ENV)
    if not path:
        return False
    deadline = time.monotonic() + STOP_FILE_WAIT_S
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
