"""The reference's bootstrap and target models, read without TensorFlow.

MLPerf v2.0 ships both as TensorFlow checkpoints (``checkpoint/19/work_dir/model.ckpt-*`` and
``target/19/target.{index,data-*}``). No well-kept reader of the TF checkpoint format exists outside
TensorFlow, so a user converts each once where TensorFlow is installed (``python -m
trainperf.workloads.minigo.convert``) into a **safetensors** file that keeps the TF variable names and
layouts (HWIO convolution kernels, [in, out] dense kernels). trainperf reads that file with the
safetensors library (a JSON header and raw arrays: nothing in it can run), checks every name and shape
against :func:`tf_layout` and maps the tensors onto :func:`~trainperf.workloads.minigo.model.reference_gonet`.
Every fault names the file and the tensor. Nothing read from the file is executed or used as a path.

TF names (``tf.layers`` defaults, in ``dual_net.model_inference_fn``'s order of creation): the stem is
``conv2d`` and ``batch_normalization``; residual block i (0-based) holds ``conv2d_{2i+1}``,
``batch_normalization_{2i+1}``, ``conv2d_{2i+2}``, ``batch_normalization_{2i+2}``; then the policy head's
``conv2d_{2B+1}``, ``batch_normalization_{2B+1}`` (moving statistics only: no scale, no offset) and ``dense``;
the value head's ``conv2d_{2B+2}``, ``batch_normalization_{2B+2}`` (likewise), ``dense_1`` and ``dense_2``.
These are the names ``closed_minigo.yaml`` lists (in comments) for ``weights_initialization``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from trainperf.errors import DataError

if TYPE_CHECKING:
    import torch

# The training state the converter keeps beside the model's variables: the Estimator's step counter and
# MomentumOptimizer's slot of each trainable variable (``<variable>/Momentum``). The reference's loop copies the
# bootstrap checkpoint into its work_dir (``ml_perf/init_from_checkpoint.py:44``) and its Estimator restores both
# from there (``dual_net.py:684``): the piecewise learning rate goes on from that step (``dual_net.py:313-315``).
GLOBAL_STEP = "global_step"
MOMENTUM = "/Momentum"
REFERENCE_FORMAT = "trainperf-minigo-tf-v1"  # safetensors metadata "format": what the converter writes


def _bn(name: str, affine: bool, width: int) -> dict[str, tuple[int, ...]]:
    out = {f"{name}/moving_mean": (width,), f"{name}/moving_variance": (width,)}
    if affine:
        out |= {f"{name}/gamma": (width,), f"{name}/beta": (width,)}
    return out


def _bn_name(k: int) -> str:
    return "batch_normalization" if k == 0 else f"batch_normalization_{k}"


def _conv_name(k: int) -> str:
    return "conv2d" if k == 0 else f"conv2d_{k}"


def tf_layout(
    *, size: int = 19, planes: int = 13, width: int = 64, blocks: int = 6, fc_width: int = 64
) -> dict[str, tuple[int, ...]]:
    """TF variable name -> shape of the reference network (defaults: the v2.0 19x19 flags)."""
    out: dict[str, tuple[int, ...]] = {"conv2d/kernel": (3, 3, planes, width)} | _bn(_bn_name(0), True, width)
    for k in range(1, 2 * blocks + 1):
        out[f"{_conv_name(k)}/kernel"] = (3, 3, width, width)
        out |= _bn(_bn_name(k), True, width)
    policy, value = 2 * blocks + 1, 2 * blocks + 2
    out[f"{_conv_name(policy)}/kernel"] = (1, 1, width, 2)
    out |= _bn(_bn_name(policy), False, 2)
    out |= {"dense/kernel": (2 * size * size, size * size + 1), "dense/bias": (size * size + 1,)}
    out[f"{_conv_name(value)}/kernel"] = (1, 1, width, 1)
    out |= _bn(_bn_name(value), False, 1)
    out |= {"dense_1/kernel": (size * size, fc_width), "dense_1/bias": (fc_width,)}
    out |= {"dense_2/kernel": (fc_width, 1), "dense_2/bias": (1,)}
    return out


def _torch_names(blocks: int) -> dict[str, str]:
    """TF variable name -> our state-dict key (GoNet's modules)."""

    def bn(tf: str, ours: str, affine: bool = True) -> dict[str, str]:
        out = {f"{tf}/moving_mean": f"{ours}.running_mean", f"{tf}/moving_variance": f"{ours}.running_var"}
        if affine:
            out |= {f"{tf}/gamma": f"{ours}.weight", f"{tf}/beta": f"{ours}.bias"}
        return out

    out = {"conv2d/kernel": "stem.0.weight"} | bn(_bn_name(0), "stem.1")
    for i in range(blocks):
        for j in (1, 2):
            k = 2 * i + j
            out[f"{_conv_name(k)}/kernel"] = f"trunk.{i}.conv{j}.weight"
            out |= bn(_bn_name(k), f"trunk.{i}.bn{j}")
    policy, value = 2 * blocks + 1, 2 * blocks + 2
    out[f"{_conv_name(policy)}/kernel"] = "policy_conv.0.weight"
    out |= bn(_bn_name(policy), "policy_conv.1", affine=False)
    out |= {"dense/kernel": "policy_fc.weight", "dense/bias": "policy_fc.bias"}
    out[f"{_conv_name(value)}/kernel"] = "value_conv.0.weight"
    out |= bn(_bn_name(value), "value_conv.1", affine=False)
    out |= {"dense_1/kernel": "value_fc.0.weight", "dense_1/bias": "value_fc.0.bias"}
    out |= {"dense_2/kernel": "value_fc.2.weight", "dense_2/bias": "value_fc.2.bias"}
    return out


def _to_torch_layout(a: np.ndarray) -> np.ndarray:
    if a.ndim == 4:  # HWIO -> OIHW
        return a.transpose(3, 2, 0, 1)
    if a.ndim == 2:  # [in, out] -> [out, in]
        return a.T
    return a


def _to_tf_layout(a: np.ndarray) -> np.ndarray:
    if a.ndim == 4:  # OIHW -> HWIO
        return a.transpose(2, 3, 1, 0)
    if a.ndim == 2:
        return a.T
    return a


def check_names(shapes: dict[str, tuple[int, ...]], layout: dict[str, tuple[int, ...]], where: str) -> None:
    """Every variable of ``layout`` present with its shape and nothing unknown; else DataError."""
    missing = [n for n in layout if n not in shapes]
    if missing:
        raise DataError(
            f"{where} lacks the tensor(s) {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''} of the v2.0 "
            "reference network (6 blocks x 64 filters, 13 planes): convert the reference checkpoint with "
            "`python -m trainperf.workloads.minigo.convert`"
        )
    known = layout.keys() | slot_layout(layout).keys() | {GLOBAL_STEP}
    unknown = sorted(n for n in shapes if n not in known)
    if unknown:
        raise DataError(
            f"{where} holds tensor {unknown[0]!r}, which the v2.0 reference network does not have: a model of "
            "another architecture? convert the v2.0 reference checkpoint with "
            "`python -m trainperf.workloads.minigo.convert`"
        )
    for name, shape in layout.items():
        if tuple(shapes[name]) != shape:
            raise DataError(
                f"{where}: tensor {name} has shape {tuple(shapes[name])}, the v2.0 reference network {shape}"
            )


def slot_layout(layout: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """The momentum slot name -> shape of each trainable variable of ``layout`` (not the moving statistics)."""
    return {f"{n}{MOMENTUM}": s for n, s in layout.items() if not n.endswith(("/moving_mean", "/moving_variance"))}


def check_values(arrays: dict[str, np.ndarray], where: str) -> None:
    """Finite values, non-negative variances; else DataError naming the tensor."""
    for name, a in arrays.items():
        if not np.isfinite(a).all():
            raise DataError(f"{where}: tensor {name} holds NaN or infinite values")
        if name.endswith("/moving_variance") and (a < 0).any():
            raise DataError(f"{where}: tensor {name} holds negative variances")


def read_arrays(path: Path, layout: dict[str, tuple[int, ...]], *, what: str) -> dict[str, np.ndarray]:
    """The tensors of ``layout`` in the safetensors file ``path`` as float32 arrays, names and shapes checked
    from the header before any tensor is read (``what`` names the file in errors)."""
    from safetensors import SafetensorError, safe_open

    where = f"{what} {path}"
    if not path.is_file():
        raise DataError(
            f"{where} is missing: convert the reference checkpoint with `python -m trainperf.workloads.minigo.convert`"
        )
    try:
        with safe_open(str(path), framework="np") as f:
            shapes = {str(k): tuple(f.get_slice(k).get_shape()) for k in f.keys()}
            check_names(shapes, layout, where)
            arrays = {}
            for name in layout:
                a = f.get_tensor(name)
                if a.dtype.kind != "f":
                    raise DataError(f"{where}: tensor {name} holds {a.dtype}, not floating-point weights")
                arrays[name] = np.asarray(a, dtype=np.float32)
    except (SafetensorError, OSError, ValueError, TypeError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise DataError(
            f"{where} cannot be read as a safetensors file ({first}): write it with "
            "`python -m trainperf.workloads.minigo.convert`"
        ) from None
    check_values(arrays, where)
    return arrays


def load_reference_weights(model: torch.nn.Module, path: Path, *, what: str) -> None:
    """Read ``path`` (TF names and layouts, checked) into the reference ``model`` in place."""
    import torch

    blocks = len(model.trunk)
    arrays = read_arrays(path, _layout_of(model), what=what)
    state = model.state_dict()
    for tf_name, ours in _torch_names(blocks).items():
        state[ours] = torch.from_numpy(np.ascontiguousarray(_to_torch_layout(arrays[tf_name])))
    model.load_state_dict(state)


def read_training_state(model: torch.nn.Module, path: Path, *, what: str) -> tuple[int, dict[str, torch.Tensor]] | None:
    """The checkpoint's step and momentum (torch parameter name -> tensor in torch's layout) kept in ``path``
    by the converter; None for a file without them (converted before they were kept). A file with part of
    them, a step that is not a whole number >= 0 or a slot of the wrong shape is a DataError."""
    import torch
    from safetensors import SafetensorError, safe_open

    blocks = len(model.trunk)
    slots = slot_layout(_layout_of(model))
    where = f"{what} {path}"
    try:
        with safe_open(str(path), framework="np") as f:
            names = set(f.keys())
            if GLOBAL_STEP not in names and not names & slots.keys():
                return None
            missing = sorted(n for n in [GLOBAL_STEP, *slots] if n not in names)
            if missing:
                raise DataError(
                    f"{where} holds part of the checkpoint's training state but not {missing[0]}: convert the "
                    "reference checkpoint again with `python -m trainperf.workloads.minigo.convert`"
                )
            step = np.asarray(f.get_tensor(GLOBAL_STEP))
            arrays = {n: np.asarray(f.get_tensor(n), dtype=np.float32) for n in slots}
    except (SafetensorError, OSError, ValueError, TypeError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise DataError(f"{where} cannot be read as a safetensors file ({first})") from None
    if step.size != 1 or step.dtype.kind not in "iu" or int(step.reshape(-1)[0]) < 0:
        raise DataError(f"{where}: {GLOBAL_STEP} is not one whole number >= 0")
    for name, shape in slots.items():
        if arrays[name].shape != shape:
            raise DataError(
                f"{where}: tensor {name} has shape {arrays[name].shape}, the v2.0 reference network {shape}"
            )
    check_values(arrays, where)
    ours = _torch_names(blocks)
    momentum = {
        ours[n[: -len(MOMENTUM)]]: torch.from_numpy(np.ascontiguousarray(_to_torch_layout(a)))
        for n, a in arrays.items()
    }
    return int(step.reshape(-1)[0]), momentum


def _layout_of(model: torch.nn.Module) -> dict[str, tuple[int, ...]]:
    return tf_layout(
        size=model.size,
        planes=model.planes,
        width=model.stem[0].out_channels,
        blocks=len(model.trunk),
        fc_width=model.value_fc[0].out_features,
    )


def reference_arrays(model: torch.nn.Module) -> dict[str, np.ndarray]:
    """The reverse: ``model``'s tensors under TF names and layouts (fixtures and tests write these)."""
    state = model.state_dict()
    return {
        tf: np.ascontiguousarray(_to_tf_layout(state[ours].detach().cpu().numpy().astype(np.float32)))
        for tf, ours in _torch_names(len(model.trunk)).items()
    }


def write_arrays(arrays: dict[str, np.ndarray], path: Path) -> None:
    """Write TF-named arrays as safetensors (via a temporary file, renamed into place)."""
    from safetensors.numpy import save_file

    tmp = path.with_name(path.name + ".partial")
    save_file(
        {k: np.ascontiguousarray(v, dtype=np.int64 if k == GLOBAL_STEP else np.float32) for k, v in arrays.items()},
        str(tmp),
        metadata={"format": REFERENCE_FORMAT},
    )
    tmp.replace(path)
