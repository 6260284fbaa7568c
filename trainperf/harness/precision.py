"""Mixed precision for the training step: which autocast a run uses, and the loss scaler fp16 needs.

``--precision`` asks for one of ``auto``, ``fp32``, ``bf16`` or ``fp16``; the run logs what was asked
(``trainperf_precision``) and what ran (``trainperf_autocast``). ``auto`` is the default: bf16 autocast for a
reference run on a CUDA device that has bf16 (fp16 with a loss scaler on older ones), as the MLPerf v2.0
reference implementations and the top submissions train in mixed precision; fp32 everywhere else (mini runs,
whose targets were calibrated in fp32, and CPUs, where autocast is slower on most machines). ``bf16`` on a CPU
is allowed when asked for. Autocast covers the workload's ``loss`` (the forward pass); backward follows the
dtypes autocast chose, and the optimizer steps in fp32 master weights, as ``torch.amp`` intends. Evaluation
stays in the workload's hands (fp32), so a target is always judged the same way.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from trainperf.errors import UsageError

CHOICES = ("auto", "fp32", "bf16", "fp16")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def resolve(requested: str, *, scale: str, device: torch.device) -> str:
    """The autocast a run uses: ``fp32`` (none), ``bf16`` or ``fp16``."""
    if requested not in CHOICES:
        raise UsageError(f"--precision {requested!r}: choose one of {', '.join(CHOICES)}")
    if requested == "auto":
        if scale != "reference" or device.type != "cuda":
            return "fp32"
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    if requested == "fp16" and device.type != "cuda":
        raise UsageError(
            f"--precision fp16 needs a CUDA device (this run is on {device.type}): use bf16 or fp32 on a CPU"
        )
    return requested


@dataclass
class Precision:
    """The autocast context of the forward pass and, for fp16, the gradient scaler of the step."""

    autocast: str  # fp32, bf16 or fp16
    device_type: str

    def __post_init__(self) -> None:
        self.scaler: Any = torch.amp.GradScaler(self.device_type) if self.autocast == "fp16" else None

    def forward(self) -> AbstractContextManager:
        if self.autocast == "fp32":
            return nullcontext()
        return torch.autocast(self.device_type, dtype=DTYPES[self.autocast])

    def backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def unscale(self, optimizer: Any) -> None:
        """Before clipping: the gradients in their true scale."""
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)

    def step(self, optimizer: Any) -> None:
        """The optimizer step (fp16: skipped when a gradient overflowed, and the scale adjusted)."""
        if self.scaler is None:
            optimizer.step()
        else:
            self.scaler.step(optimizer)
            self.scaler.update()


FP32 = Precision("fp32", "cpu")
