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

The switches as data (:class:`Switches`, their names, flags and log keys) are :mod:`trainperf.contract.switches`,
their options on the command line :mod:`trainperf.switch_flags`; the batch pipeline is
:mod:`trainperf.harness.batches`, the optimizer kernels :mod:`trainperf.harness.optimizer_kernels`.
This module is torch-free at import time (``trainperf list`` and ``--help`` stay instant); the functions that
apply the switches import torch when called.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trainperf.contract.switches import (
    CHANNELS_LAST,
    CUDA_GRAPHS,
    DDP_BUCKET_MB,
    DEVICE_PREFETCH,
    NAMES,
    OPTIMIZER_IMPL,
    PIN_MEMORY,
    Switches,
)
from trainperf.errors import UsageError
from trainperf.harness.batches import (  # the batch pipeline the data-path switches build
    CudaCopies,
    DeviceCopier,
    Prefetcher,
    channels_last_batch,
    layout,
    map_tensors,
    pinned_batch,
)
from trainperf.harness.optimizer_kernels import optimizer_impl

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
    import torch  # torch-free at import (`trainperf --help` loads this module): torch when called

    convs = (torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d)
    if any(isinstance(m, convs) for m in model.modules()):
        return {}
    return {CHANNELS_LAST: "the model has no 2-D or 3-D convolutions: its tensors have no channels dimension to move"}


def to_channels_last(model: torch.nn.Module) -> torch.nn.Module:
    """Every 4-D parameter and buffer in channels-last, every 5-D one in channels-last-3d, in place.

    ``Module.to(memory_format=...)`` takes one format for both ranks and fails on a model with 3-D
    convolutions, hence this loop over the tensors (what ``Module._apply`` does for ``to``).
    """
    import torch  # torch-free at import (`trainperf --help` loads this module): torch when called

    with torch.no_grad():
        for module in model.modules():
            for _, p in module.named_parameters(recurse=False):
                p.data = layout(p.data)
            for name, b in module.named_buffers(recurse=False):
                if b is not None:
                    setattr(module, name, layout(b))
    return model


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
    import torch  # torch-free at import (`trainperf --help` loads this module): torch when called

    if not (s.compile or s.cuda_graphs):
        return model
    return torch.compile(model, mode="reduce-overhead" if s.cuda_graphs else None)


def compiled(model: Any) -> bool:
    """Whether ``model`` is the result of ``torch.compile`` (an ``OptimizedModule``)."""
    return hasattr(model, "_orig_mod")


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
        import torch  # torch-free at import (`trainperf --help` loads this module): torch when called

        return torch.compiler.cudagraph_mark_step_begin


def from_args(args: Any) -> Switches:
    """The switches asked for, from the parsed options of :mod:`trainperf.switch_flags`."""
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


__all__ = [  # with the batch pipeline and the optimizer kernels it applies
    "Applied",
    "CudaCopies",
    "DeviceCopier",
    "Prefetcher",
    "channels_last_batch",
    "check_device",
    "compile_model",
    "compiled",
    "data_path",
    "device_reasons",
    "from_args",
    "map_tensors",
    "model_reasons",
    "optimizer_impl",
    "pinned_batch",
    "to_channels_last",
    "workload_reasons",
]
