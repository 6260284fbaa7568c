"""The optimization switches: system optimizations of the training step, each on or off from the command line.

MLPerf credits much of its speed-up to the software stack rather than to the model. trainperf exposes the
usual parts of that stack as switches that the harness applies to every workload (never the workload itself),
logs (``trainperf_*`` keys, so a result says how it was made) and compares on resume, as it does
``--precision``. They are system optimizations: allowed in the closed and the open division alike. With no
switch given, a run is made exactly as before.

=================== =============================== ===========================================================
switch              log key                         what the harness does
=================== =============================== ===========================================================
``--compile``       ``trainperf_compile``           ``torch.compile`` of the model (after placement and DDP);
                                                    the compilation happens in the first steps, on the clock
``--channels-last`` ``trainperf_channels_last``     parameters and input batches of convolutional models in
                                                    channels-last memory layout (``channels_last_3d`` for 3-D)
``--cuda-graphs``   ``trainperf_cuda_graphs``       the compiled step replayed as CUDA graphs (``torch.compile``
                                                    mode ``reduce-overhead``, CUDA graph trees): CUDA only
``--optimizer-impl`` ``trainperf_optimizer_impl``   ``foreach`` (multi-tensor) or ``fused`` kernels of the
                    (asked), ``..._used`` (ran)     workload's optimizer where it has them (torch's SGD, Adam,
                                                    AdamW, Adagrad; timm's LAMB has foreach)
``--ddp-bucket-mb`` ``trainperf_ddp_bucket_mb``     DDP's gradient bucket size: the all-reduce of a full bucket
                                                    overlaps the rest of backward; a bucket as large as the model
                                                    means one all-reduce after backward (no overlap)
``--pin-memory``    ``trainperf_pin_memory``        input batches in page-locked memory (faster, asynchronous
                                                    copies to the GPU): CUDA only
``--prefetch N``    ``trainperf_prefetch``          a background thread reads N batches ahead of the step
``--device-prefetch`` ``trainperf_device_prefetch`` each batch copied to the GPU one step ahead, on a side CUDA
                                                    stream, so the step finds its data on the device and the
                                                    copy overlaps the step before it: CUDA only
=================== =============================== ===========================================================

A switch that cannot apply to a workload (a model without convolutions and channels-last; an optimizer with
neither foreach nor fused kernels; DDP's bucket in one process) is left off and the reason logged in
``trainperf_switches_ignored``; a workload may declare such reasons itself
(``Workload.SWITCHES_NOT_APPLICABLE``). A switch the device cannot run (``--cuda-graphs``, ``--pin-memory`` or
``--device-prefetch`` on a CPU) is an error before anything runs.

The switches as data (:class:`Switches`, their names, flags and log keys) are :mod:`trainperf.contract.switches`.
This module is torch-free at import time (``trainperf list`` and ``--help`` stay instant); the functions that
apply the switches import torch when called.
"""

from __future__ import annotations

import queue
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trainperf.contract.switches import (
    CHANNELS_LAST,
    CUDA_GRAPHS,
    DDP_BUCKET_MB,
    DEVICE_PREFETCH,
    MAX_BUCKET_MB,
    MAX_PREFETCH,
    NAMES,
    OPTIMIZER_IMPL,
    OPTIMIZER_IMPLS,
    PIN_MEMORY,
    Switches,
)
from trainperf.errors import UsageError

if TYPE_CHECKING:
    import torch


def check_device(s: Switches, device_type: str) -> None:
    """A UsageError, before anything runs, for a switch this device cannot run."""
    if device_type == "cuda":
        return
    if s.cuda_graphs:
        raise UsageError(
            f"--cuda-graphs needs a CUDA device (this run is on {device_type}): CUDA graphs record and replay GPU "
            "kernels; leave it off here (--compile alone works on a CPU)"
        )
    if s.pin_memory:
        raise UsageError(
            f"--pin-memory needs a CUDA device (this run is on {device_type}): page-locked memory speeds copies from "
            "the host to a GPU, and there is no copy on a CPU; leave it off here"
        )
    if s.device_prefetch:
        raise UsageError(
            f"--device-prefetch needs a CUDA device (this run is on {device_type}): it copies each batch to the GPU "
            "on a side CUDA stream, and on a CPU the batches are already where the step runs; leave it off here "
            "(--prefetch N reads batches ahead on any device)"
        )


def device_reasons(device_type: str) -> dict[str, str]:
    """Why each switch cannot run on this kind of device (what the ablation lists as skipped)."""
    if device_type == "cuda":
        return {}
    return {
        CUDA_GRAPHS: f"needs a CUDA device (this is {device_type})",
        PIN_MEMORY: f"needs a CUDA device (this is {device_type}): no host-to-device copy",
        DEVICE_PREFETCH: f"needs a CUDA device (this is {device_type}): no host-to-device copy",
    }


def workload_reasons(workload_cls: type, *, distributed: bool) -> dict[str, str]:
    """Why switches do not apply to a workload: its own declarations, and DDP's bucket in one process."""
    reasons = dict(getattr(workload_cls, "SWITCHES_NOT_APPLICABLE", {}) or {})
    unknown = sorted(set(reasons) - set(NAMES))
    if unknown:  # a typo in a workload's declaration would silently apply the switch
        raise ValueError(f"{workload_cls.__name__}.SWITCHES_NOT_APPLICABLE names unknown switches {unknown}")
    if not distributed:
        reasons.setdefault(DDP_BUCKET_MB, "one process: there is no gradient all-reduce to bucket")
    return reasons


# --- applying them (torch from here on) ------------------------------------------------------------------
def model_reasons(model: torch.nn.Module) -> dict[str, str]:
    """Why switches do not apply to this model: channels-last needs 2-D or 3-D convolutions."""
    import torch

    convs = (torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d)
    if any(isinstance(m, convs) for m in model.modules()):
        return {}
    return {CHANNELS_LAST: "the model has no 2-D or 3-D convolutions: its tensors have no channels dimension to move"}


def _layout(t: torch.Tensor) -> torch.Tensor:
    import torch

    if t.dim() == 4:
        return t.contiguous(memory_format=torch.channels_last)
    if t.dim() == 5:
        return t.contiguous(memory_format=torch.channels_last_3d)
    return t


def to_channels_last(model: torch.nn.Module) -> torch.nn.Module:
    """Every 4-D parameter and buffer in channels-last, every 5-D one in channels-last-3d, in place.

    ``Module.to(memory_format=...)`` takes one format for both ranks and fails on a model with 3-D
    convolutions, hence this loop over the tensors (what ``Module._apply`` does for ``to``).
    """
    import torch

    with torch.no_grad():
        for module in model.modules():
            for _, p in module.named_parameters(recurse=False):
                p.data = _layout(p.data)
            for name, b in module.named_buffers(recurse=False):
                if b is not None:
                    setattr(module, name, _layout(b))
    return model


def map_tensors(batch: Any, fn: Callable[[Any], Any]) -> Any:
    """``fn`` applied to every tensor of a batch made of tuples, lists and dicts (other values kept as they are).

    Written here rather than with torch's pytree helpers, which are private API.
    """
    import torch

    if isinstance(batch, torch.Tensor):
        return fn(batch)
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a named tuple
        return type(batch)(*(map_tensors(x, fn) for x in batch))
    if isinstance(batch, tuple | list):
        return type(batch)(map_tensors(x, fn) for x in batch)
    if isinstance(batch, dict):
        return {k: map_tensors(v, fn) for k, v in batch.items()}
    return batch


def channels_last_batch(batch: Any) -> Any:
    """Floating-point 4-D and 5-D tensors of a batch (the images and volumes) in channels-last layout."""
    return map_tensors(batch, lambda t: _layout(t) if t.is_floating_point() else t)


def pinned_batch(batch: Any) -> Any:
    return map_tensors(batch, lambda t: t if t.device.type != "cpu" else t.pin_memory())


class Prefetcher:
    """An iterator that reads ``depth`` items ahead of its consumer, in one background thread, in order.

    The producer thread holds only the source iterator, the queue and a stop flag, so a Prefetcher that is
    dropped (the run ended) stops its thread through ``weakref.finalize``. An error of the source is raised
    to the consumer at the item where it happened. Written here because torch's DataLoader prefetches only
    for its own worker processes, and a workload's batches come from an iterator of its own.
    """

    _DONE = object()

    def __init__(self, source: Iterator[Any], depth: int) -> None:
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=_produce, args=(source, self._queue, self._stop), name="trainperf-prefetch", daemon=True
        )
        self._thread.start()
        self._finalizer = weakref.finalize(self, self._stop.set)

    def __iter__(self) -> Prefetcher:
        return self

    def __next__(self) -> Any:
        item = self._queue.get()
        if item is Prefetcher._DONE:
            self._stop.set()
            raise StopIteration
        if isinstance(item, _Failure):
            self._stop.set()
            raise item.error
        return item

    def close(self) -> None:
        self._finalizer()


@dataclass
class _Failure:
    error: BaseException


def _produce(source: Iterator[Any], q: queue.Queue, stop: threading.Event) -> None:
    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    try:
        for item in source:
            if not put(item):
                return
    except BaseException as e:  # handed to the consumer, raised there
        put(_Failure(e))
        return
    put(Prefetcher._DONE)


class CudaCopies:
    """Copies of batches to one CUDA device on a side stream, and the hand-over to the stream the step runs on."""

    def __init__(self, device: torch.device) -> None:
        import torch

        self.device = device
        self.stream = torch.cuda.Stream(device=device)

    def issue(self, batch: Any) -> tuple[Any, Any]:
        """Start the copies of every tensor of ``batch`` (asynchronous from pinned memory); (copies, their event)."""
        import torch

        with torch.cuda.stream(self.stream):
            moved = map_tensors(batch, lambda t: t.to(self.device, non_blocking=True))
            event = torch.cuda.Event()
            event.record(self.stream)
        return moved, event

    def ready(self, moved: Any, event: Any) -> Any:
        """The copies, usable on the current stream: it waits for them on the GPU (the host does not wait), and
        the caching allocator is told the current stream uses them (so their memory is not reused too early)."""
        import torch

        current = torch.cuda.current_stream(self.device)
        current.wait_event(event)
        map_tensors(moved, lambda t: t.record_stream(current) if t.device.type == "cuda" else t)
        return moved


class DeviceCopier:
    """An iterator of batches already on the device: batch k+1's copy is started when batch k is handed over,
    so it runs while step k computes (the data prefetcher of NVIDIA's reference ResNet training, for any batch
    made of tensors, tuples, lists and dicts). ``copies``: an object with ``issue(batch) -> (copies, event)``
    and ``ready(copies, event) -> batch``, :class:`CudaCopies` for a GPU. An error of the source is raised at the
    item where it happened. Written here because torch has no device-side prefetcher for an arbitrary iterator
    (its DataLoader pins memory but leaves the copy to the step)."""

    def __init__(self, source: Iterator[Any], copies: Any) -> None:
        self._source = source
        self._copies = copies
        self._next = self._issue()

    def _issue(self) -> Any:
        try:
            batch = next(self._source)
        except StopIteration:
            return None
        except Exception as e:  # raised to the consumer when this item is due
            return _Failure(e)
        return self._copies.issue(batch)

    def __iter__(self) -> DeviceCopier:
        return self

    def __next__(self) -> Any:
        item = self._next
        if item is None:
            raise StopIteration
        if isinstance(item, _Failure):
            self._next = None
            raise item.error
        batch = self._copies.ready(*item)
        self._next = self._issue()  # the next copy overlaps this step
        return batch

    def close(self) -> None:
        self._next = None
        close = getattr(self._source, "close", None)
        if close is not None:
            close()


def data_path(batches: Iterator[Any], s: Switches, device: torch.device | None = None) -> Iterator[Any]:
    """The run's batches with the data-path switches applied: layout and pinning per batch (in the prefetch
    thread when there is one), then the read-ahead, then the copy to the device one step ahead."""
    if s.channels_last:
        batches = map(channels_last_batch, batches)
    if s.pin_memory:
        batches = map(pinned_batch, batches)
    if s.prefetch:
        batches = Prefetcher(iter(batches), s.prefetch)
    if s.device_prefetch:
        if device is None or device.type != "cuda":
            raise UsageError(f"--device-prefetch needs a CUDA device, not {device}")
        batches = DeviceCopier(iter(batches), CudaCopies(device))
    return batches


def compile_model(model: torch.nn.Module, s: Switches) -> torch.nn.Module:
    """``torch.compile`` of the placed model; CUDA graphs through its ``reduce-overhead`` mode (CUDA graph trees)."""
    import torch

    if not (s.compile or s.cuda_graphs):
        return model
    return torch.compile(model, mode="reduce-overhead" if s.cuda_graphs else None)


def compiled(model: Any) -> bool:
    """Whether ``model`` is the result of ``torch.compile`` (an ``OptimizedModule``)."""
    return hasattr(model, "_orig_mod")


def optimizer_impl(optimizer: Any, impl: str, model: Any = None) -> tuple[str, str]:
    """Switch an optimizer built by the workload to ``foreach`` or ``fused`` kernels, before its first step.

    torch's optimizers (and timm's) read ``foreach`` and ``fused`` from each parameter group at every step, so
    setting them in the groups is what passing them to the constructor does; for ``fused`` this also repeats
    the constructor's checks and its flag for the gradient scaler. Returns (what runs, why when it is not
    what was asked): ``for-loop``, ``foreach`` or ``fused``, after the optimizer's class name. ``model``: the
    model it trains, whose sparse embeddings (sparse gradients) rule out fused kernels.
    """
    import torch

    name = type(optimizer).__name__
    defaults = getattr(optimizer, "defaults", {})
    if impl == "default":
        return f"{name}: {_current_impl(optimizer)}", ""
    if _stepped(optimizer):
        raise RuntimeError("the optimizer implementation must be chosen before the optimizer's first step")
    if impl not in defaults:
        return f"{name}: {_current_impl(optimizer)}", f"{name} has no {impl} implementation"
    if any(g.get("differentiable") for g in optimizer.param_groups):
        return f"{name}: {_current_impl(optimizer)}", f"{name} is differentiable: torch allows no {impl} kernel"
    if impl == "fused":
        problem = _fused_problem(optimizer, model)
        if problem:
            return f"{name}: {_current_impl(optimizer)}", problem
        for group in optimizer.param_groups:
            group["fused"], group["foreach"] = True, False
        optimizer.defaults["fused"], optimizer.defaults["foreach"] = True, False
        for p, state in optimizer.state.items():  # state made in the constructor (Adagrad): its step on the device
            if isinstance(state.get("step"), torch.Tensor):
                state["step"] = state["step"].to(p.device, torch.float32)
        optimizer._step_supports_amp_scaling = True  # as the constructor sets it for fused kernels
    else:
        for group in optimizer.param_groups:
            group["foreach"] = True
            if "fused" in group:
                group["fused"] = False
        optimizer.defaults["foreach"] = True
    return f"{name}: {impl}", ""


def _stepped(optimizer: Any) -> bool:
    """Whether the optimizer has taken a step (Adagrad creates its state, at step 0, in its constructor)."""
    import torch

    for state in getattr(optimizer, "state", {}).values():
        step = state.get("step", 0) if isinstance(state, dict) else 0
        if float(step.item() if isinstance(step, torch.Tensor) else step) > 0:
            return True
    for group in getattr(optimizer, "param_groups", []):  # timm's LAMB counts steps per group
        step = group.get("step", 0)
        if float(step.item() if isinstance(step, torch.Tensor) else step) > 0:
            return True
    return False


def _fused_problem(optimizer: Any, model: Any = None) -> str:
    import torch

    if model is not None:  # torch's fused kernels raise at the first step on a sparse gradient (dlrm's tables)
        for name, m in model.named_modules():
            if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and m.sparse:
                return f"fused kernels take no sparse gradients ({name or 'the model'} is a sparse embedding)"

    try:  # torch's own list of the devices with fused optimizer kernels (private, hence the fallback)
        from torch.optim.optimizer import _get_fused_kernels_supported_devices

        devices = set(_get_fused_kernels_supported_devices())
    except ImportError:
        devices = {"cuda", "cpu"}
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.device.type not in devices or not torch.is_floating_point(p):
                return (
                    f"fused kernels need floating-point parameters on {sorted(devices)}, "
                    f"not {p.dtype} on {p.device.type}"
                )
            if p.is_sparse:
                return "fused kernels take no sparse parameters"
    return ""


def _current_impl(optimizer: Any) -> str:
    """What an optimizer runs: what its groups say, or torch's default for their parameters."""
    groups = getattr(optimizer, "param_groups", [])
    if any(g.get("fused") for g in groups):
        return "fused"
    foreach = [g.get("foreach") for g in groups]
    if all(f is True for f in foreach) and foreach:
        return "foreach"
    if "foreach" not in getattr(optimizer, "defaults", {}):
        return "for-loop"
    if all(f is False for f in foreach):
        return "for-loop"
    try:
        from torch.optim.optimizer import _default_to_fused_or_foreach

        params = [p for g in groups if g.get("foreach") is None for p in g["params"]]
        return "foreach" if _default_to_fused_or_foreach(params, differentiable=False)[1] else "for-loop"
    except ImportError:
        return "torch's default"


# --- one run: what applies, and the log --------------------------------------------------------------------
@dataclass
class Applied:
    """The switches as they apply to one run: ``effective`` has every inapplicable switch off."""

    asked: Switches
    effective: Switches
    ignored: dict[str, str]  # switch -> why it was left off
    optimizer_used: str = ""

    @classmethod
    def resolve(cls, asked: Switches, workload_cls: type, *, distributed: bool, device_type: str) -> Applied:
        check_device(asked, device_type)
        reasons = workload_reasons(workload_cls, distributed=distributed)
        ignored = {n: r for n, r in reasons.items() if getattr(asked, n) != getattr(Switches(), n)}
        return cls(asked=asked, effective=asked.without(set(ignored)), ignored=ignored)

    def model(self, model: torch.nn.Module) -> torch.nn.Module:
        """After ``build_model``: channels-last where the model has convolutions."""
        if not self.effective.channels_last:
            return model
        reasons = model_reasons(model)
        if reasons:
            self._ignore(reasons)
            return model
        return to_channels_last(model)

    def _ignore(self, reasons: dict[str, str]) -> None:
        self.ignored.update(reasons)
        self.effective = self.effective.without(set(reasons))

    def placed(self, model: torch.nn.Module) -> torch.nn.Module:
        """After ``parallelize``: compiled (and CUDA graphs) where asked."""
        return compile_model(model, self.effective)

    def optimizer(self, optimizer: Any, model: Any = None) -> None:
        used, why = optimizer_impl(optimizer, self.effective.optimizer_impl, model)
        self.optimizer_used = used
        if why:
            self._ignore({OPTIMIZER_IMPL: why})

    def batches(self, batches: Iterator[Any], device: torch.device | None = None) -> Iterator[Any]:
        return data_path(batches, self.effective, device)

    def step_begin(self) -> Callable[[], None] | None:
        """What the step calls first: CUDA graph trees must be told where a training step begins."""
        if not self.effective.cuda_graphs:
            return None
        import torch

        return torch.compiler.cudagraph_mark_step_begin


# --- the command line ----------------------------------------------------------------------------------------
def add_arguments(parser: Any, *, prefetch_default: int = 0) -> None:
    """The switches' options, for `trainperf run` and `trainperf ablate`."""
    g = parser.add_argument_group(
        "optimization switches",
        "system optimizations, allowed in both divisions; each is logged (trainperf_<switch>) and compared on resume. "
        "With none given, a run is made as before",
    )
    g.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the model (after DDP). Compiling takes the first steps, on the clock (20-35 s for a "
        "mini model on a 2-core CPU)",
    )
    g.add_argument(
        "--channels-last",
        action="store_true",
        help="convolutional models: parameters and input batches in channels-last memory layout (channels_last_3d "
        "for 3-D convolutions); left off, with the reason logged, for a model without convolutions",
    )
    g.add_argument(
        "--cuda-graphs",
        action="store_true",
        help="replay the compiled step as CUDA graphs (torch.compile mode reduce-overhead; implies --compile). "
        "CUDA only: an error on a CPU",
    )
    g.add_argument(
        "--optimizer-impl",
        choices=OPTIMIZER_IMPLS,
        default="default",
        help="default: the workload's optimizer as it builds it; foreach: multi-tensor kernels; fused: one fused "
        "kernel (torch's SGD, Adam, AdamW, Adagrad). Applied where the optimizer has it; what ran is logged as "
        "trainperf_optimizer_impl_used",
    )
    g.add_argument(
        "--ddp-bucket-mb",
        type=_positive_float,
        default=None,
        metavar="MB",
        help="DDP gradient bucket size in MiB (default: DDP's 25). Each full bucket is all-reduced while backward "
        "goes on, so smaller buckets overlap more communication with computation (and send more messages); a "
        "bucket larger than the model all-reduces once, after backward. Several processes only",
    )
    g.add_argument(
        "--pin-memory",
        action="store_true",
        help="input batches in page-locked host memory, for faster asynchronous copies to the GPU. CUDA only: an "
        "error on a CPU",
    )
    g.add_argument(
        "--device-prefetch",
        action="store_true",
        help="copy each batch to the GPU one step ahead, on a side CUDA stream, so the copy overlaps the step "
        "before it and the step finds its data on the device (with --pin-memory the copies are asynchronous). "
        "CUDA only: an error on a CPU",
    )
    g.add_argument(
        "--prefetch",
        type=_count,
        default=prefetch_default,
        metavar="N",
        help="a background thread reads N batches ahead of the training step (default "
        f"{prefetch_default}: none). Batches stay in order; a workload whose batches draw from the global random "
        "generators is then no longer bit-reproducible",
    )


def from_args(args: Any) -> Switches:
    return Switches(
        compile=args.compile,
        channels_last=args.channels_last,
        cuda_graphs=args.cuda_graphs,
        optimizer_impl=args.optimizer_impl,
        ddp_bucket_mb=args.ddp_bucket_mb,
        pin_memory=args.pin_memory,
        prefetch=args.prefetch,
        device_prefetch=args.device_prefetch,
    )


def _positive_float(text: str) -> float:
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of MiB (e.g. 25)") from None
    if not math.isfinite(value) or not 0 < value <= MAX_BUCKET_MB:
        raise argparse.ArgumentTypeError(f"{text!r}: give a size above 0 and at most {MAX_BUCKET_MB:g} MiB")
    return value


def _count(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of batches (e.g. 2)") from None
    if not 0 <= value <= MAX_PREFETCH:
        raise argparse.ArgumentTypeError(f"{text!r}: give 0 (off) to {MAX_PREFETCH} batches")
    return value
