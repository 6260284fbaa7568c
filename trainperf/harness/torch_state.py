"""Global torch settings, applied for one run and restored afterwards.

A workload declares the settings it wants (``Workload.TORCH_STATE``); a workload that changes any other
global setting on its own is undone here too, so nothing leaks from one benchmark into the next in one
suite. torch has no getter for flush-denormal, so the harness owns it: off unless a workload asks.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from trainperf.contract.workload import TorchState


@dataclass(frozen=True)
class GlobalTorchState:
    """The global torch settings that a workload could change and a suite must get back."""

    num_threads: int
    default_dtype: torch.dtype
    grad_enabled: bool
    deterministic: bool
    matmul_precision: str
    cudnn_benchmark: bool
    anomaly: bool

    @classmethod
    def now(cls) -> GlobalTorchState:
        return cls(
            num_threads=torch.get_num_threads(),
            default_dtype=torch.get_default_dtype(),
            grad_enabled=torch.is_grad_enabled(),
            deterministic=torch.are_deterministic_algorithms_enabled(),
            matmul_precision=torch.get_float32_matmul_precision(),
            cudnn_benchmark=torch.backends.cudnn.benchmark,
            anomaly=torch.is_anomaly_enabled(),
        )

    def restore(self) -> None:
        torch.set_num_threads(self.num_threads)
        torch.set_default_dtype(self.default_dtype)
        torch.set_grad_enabled(self.grad_enabled)
        torch.use_deterministic_algorithms(self.deterministic)
        torch.set_float32_matmul_precision(self.matmul_precision)
        torch.backends.cudnn.benchmark = self.cudnn_benchmark
        torch.autograd.set_detect_anomaly(self.anomaly)


@contextmanager
def torch_state(wanted: TorchState) -> Iterator[None]:
    """Run the body under ``wanted`` and give every global setting back afterwards."""
    before = GlobalTorchState.now()
    try:
        if wanted.num_threads is not None:
            torch.set_num_threads(wanted.num_threads)
        torch.set_flush_denormal(wanted.flush_denormal)
        yield
    finally:
        torch.set_flush_denormal(False)
        before.restore()
