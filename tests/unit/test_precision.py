"""Mixed precision of the training step: what --precision resolves to, autocast in the step, fp16's scaler."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from helpers import FakeWorkload
from test_runner import run_once

from trainperf.errors import UsageError
from trainperf.harness import precision
from trainperf.harness.precision import Precision, resolve
from trainperf.results import first_values, read_mllog

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def test_auto_is_mixed_only_for_reference_runs_on_a_gpu(monkeypatch):
    assert resolve("auto", scale="mini", device=CPU) == "fp32"
    assert resolve("auto", scale="reference", device=CPU) == "fp32"
    assert resolve("auto", scale="mini", device=CUDA) == "fp32"  # mini targets were calibrated in fp32
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert resolve("auto", scale="reference", device=CUDA) == "bf16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert resolve("auto", scale="reference", device=CUDA) == "fp16"


def test_an_explicit_choice_is_kept_and_fp16_needs_cuda():
    assert resolve("bf16", scale="mini", device=CPU) == "bf16"
    assert resolve("fp32", scale="reference", device=CUDA) == "fp32"
    with pytest.raises(UsageError, match="fp16 needs a CUDA device"):
        resolve("fp16", scale="reference", device=CPU)
    with pytest.raises(UsageError, match="choose one of"):
        resolve("fp8", scale="mini", device=CPU)


class _DtypeWorkload(FakeWorkload):
    seen: list[torch.dtype] = []

    def loss(self, model, batch):
        x, y = batch
        logits = model(x)
        _DtypeWorkload.seen.append(logits.dtype)
        return torch.nn.functional.cross_entropy(logits, y)


@pytest.mark.parametrize("asked, dtype", [("bf16", torch.bfloat16), ("fp32", torch.float32), ("auto", torch.float32)])
def test_the_forward_pass_runs_under_the_chosen_autocast_and_the_log_says_so(tmp_path, monkeypatch, asked, dtype):
    import test_runner

    monkeypatch.setattr(test_runner, "FakeWorkload", _DtypeWorkload)
    _DtypeWorkload.seen = []
    outcome, path = run_once(tmp_path, precision=asked)
    assert outcome.status == "success"
    assert _DtypeWorkload.seen and set(_DtypeWorkload.seen) == {dtype}
    logged = first_values(read_mllog(path))
    assert logged["trainperf_precision"] == asked
    assert logged["trainperf_autocast"] == {torch.bfloat16: "bf16", torch.float32: "fp32"}[dtype]


def test_the_fp16_scaler_skips_a_step_whose_gradients_overflowed():
    """The scaler path (CUDA's in practice; torch.amp also has it on the CPU, where it can be tested)."""
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    p = Precision("fp16", "cpu")
    assert p.scaler is not None
    before = model.weight.detach().clone()
    p.backward(model(torch.tensor([[float("inf"), 1.0]])).sum())
    p.unscale(opt)
    p.step(opt)
    assert torch.equal(model.weight, before)  # overflow: no update, and a smaller scale next time
    assert p.scaler.get_scale() < 2.0**16
    opt.zero_grad()
    p.backward(model(torch.tensor([[1.0, 1.0]])).sum())
    p.unscale(opt)
    assert torch.allclose(model.weight.grad, torch.ones(1, 2))  # unscaled before clipping: the true gradient
    p.step(opt)
    assert not torch.equal(model.weight, before)


def test_fp32_is_the_plain_step():
    assert precision.FP32.scaler is None and precision.FP32.autocast == "fp32"


def test_the_cli_refuses_fp16_on_a_cpu_before_anything_runs(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "trainperf", "run", "resnet", "--precision", "fp16", "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "fp16 needs a CUDA device" in r.stderr
    assert not (tmp_path / "o" / "results").exists()
