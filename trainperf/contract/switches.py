"""The optimization switches of a run as plain data: their names, flags, log keys, and :class:`Switches`.

What each switch does, and the code that applies it, is the harness's (:mod:`trainperf.harness.switches`);
this module is what the contract (``RunConfig.switches``) and the log need, and imports nothing but the errors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainperf.errors import UsageError

OPTIMIZER_IMPLS = ("default", "foreach", "fused")
MAX_PREFETCH = 64  # batches held ahead; more only costs memory
MAX_BUCKET_MB = 65536.0  # 64 GiB: larger than any model trainperf trains

# The switches' names as the ablation and `trainperf_switches_ignored` name them.
COMPILE, CHANNELS_LAST, CUDA_GRAPHS = "compile", "channels_last", "cuda_graphs"
OPTIMIZER_IMPL, DDP_BUCKET_MB, PIN_MEMORY, PREFETCH = "optimizer_impl", "ddp_bucket_mb", "pin_memory", "prefetch"
DEVICE_PREFETCH = "device_prefetch"
NAMES = (COMPILE, CHANNELS_LAST, CUDA_GRAPHS, OPTIMIZER_IMPL, DDP_BUCKET_MB, PIN_MEMORY, PREFETCH, DEVICE_PREFETCH)
FLAGS = {
    COMPILE: "--compile",
    CHANNELS_LAST: "--channels-last",
    CUDA_GRAPHS: "--cuda-graphs",
    OPTIMIZER_IMPL: "--optimizer-impl",
    DDP_BUCKET_MB: "--ddp-bucket-mb",
    PIN_MEMORY: "--pin-memory",
    PREFETCH: "--prefetch",
    DEVICE_PREFETCH: "--device-prefetch",
}
LOG_KEYS = {name: f"trainperf_{name}" for name in NAMES}  # what was asked
OPTIMIZER_IMPL_USED = "trainperf_optimizer_impl_used"  # what the optimizer ran
IGNORED = "trainperf_switches_ignored"  # {switch: reason} of the switches asked for but left off


@dataclass(frozen=True, kw_only=True)
class Switches:
    """The switches of one run; the defaults are a run as trainperf made it before the switches existed."""

    compile: bool = False
    channels_last: bool = False
    cuda_graphs: bool = False  # implies compile (torch.compile's reduce-overhead mode)
    optimizer_impl: str = "default"  # default (the workload's optimizer as built), foreach, fused
    ddp_bucket_mb: float | None = None  # None: DDP's default (25 MiB)
    pin_memory: bool = False
    prefetch: int = 0  # batches read ahead by a background thread; 0: none
    device_prefetch: bool = False  # each batch copied to the GPU one step ahead, on a side stream

    def __post_init__(self) -> None:
        check_values(self)

    def as_logged(self) -> dict[str, Any]:
        """Each switch's log key and value (what was asked)."""
        return {LOG_KEYS[f.name]: getattr(self, f.name) for f in dataclasses.fields(self)}

    @property
    def any_on(self) -> bool:
        return self != Switches()

    def without(self, names: Mapping[str, str] | set[str]) -> Switches:
        """A copy with the named switches back at their defaults."""
        default = Switches()
        return dataclasses.replace(self, **{n: getattr(default, n) for n in names})

    def short(self) -> str:
        """The switches that are on, as command-line flags ("baseline" when none)."""
        parts = []
        for name in NAMES:
            value = getattr(self, name)
            if value == getattr(Switches(), name):
                continue
            text = f"{value:g}" if isinstance(value, float) else str(value)
            parts.append(FLAGS[name] if isinstance(value, bool) else f"{FLAGS[name]} {text}")
        return " ".join(parts) or "baseline"


def check_values(s: Switches) -> None:
    """A UsageError naming the flag for a value no run can use."""
    if s.optimizer_impl not in OPTIMIZER_IMPLS:
        raise UsageError(f"--optimizer-impl {s.optimizer_impl!r}: choose one of {', '.join(OPTIMIZER_IMPLS)}")
    if isinstance(s.prefetch, bool) or not isinstance(s.prefetch, int) or not 0 <= s.prefetch <= MAX_PREFETCH:
        raise UsageError(
            f"--prefetch {s.prefetch!r}: give a whole number of batches from 0 (off) to {MAX_PREFETCH}, "
            "e.g. --prefetch 2"
        )
    if s.ddp_bucket_mb is not None:
        v = s.ddp_bucket_mb
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= MAX_BUCKET_MB:
            raise UsageError(
                f"--ddp-bucket-mb {v!r}: give a size in MiB above 0 and at most {MAX_BUCKET_MB:g} (DDP's default is 25)"
            )
