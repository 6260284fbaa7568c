"""The optimizer kernels: a workload's optimizer switched to torch's ``foreach`` (multi-tensor) or ``fused``
kernels before its first step (``--optimizer-impl``), and what an optimizer runs.

Torch-free at import time, like the switches; the functions import torch when called.
"""

from __future__ import annotations

from typing import Any


def optimizer_impl(optimizer: Any, impl: str, model: Any = None) -> tuple[str, str]:
    """Switch an optimizer built by the workload to ``foreach`` or ``fused`` kernels, before its first step.

    torch's optimizers (and timm's) read ``foreach`` and ``fused`` from each parameter group at every step, so
    setting them in the groups is what passing them to the constructor does; for ``fused`` this also repeats
    the constructor's checks and its flag for the gradient scaler. Returns (what runs, why when it is not
    what was asked): ``for-loop``, ``foreach`` or ``fused``, after the optimizer's class name. ``model``: the
    model it trains, whose sparse embeddings (sparse gradients) rule out fused kernels.
    """
    import torch  # torch-free at import (`trainperf --help` loads this module): torch when called

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
    import torch  # torch-free at import (`trainperf --help` loads this module): torch when called

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
    import torch  # torch-free at import (`trainperf --help` loads this module): torch when called

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
