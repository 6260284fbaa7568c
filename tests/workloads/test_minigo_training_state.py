"""minigo's bootstrap checkpoint keeps its training state through the conversion: the Estimator's global_step and
MomentumOptimizer's slots, which the reference restores from the checkpoint it copies into its work_dir
(ml_perf/init_from_checkpoint.py:44, dual_net.py:684), so its piecewise learning rate goes on from that step."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
import torch

from trainperf.dist import DistContext
from trainperf.errors import DataError
from trainperf.spec import RunConfig
from trainperf.workloads.minigo import REFERENCE, REFERENCE_RECIPE
from trainperf.workloads.minigo.model import reference_gonet
from trainperf.workloads.minigo.tfweights import (
    read_training_state,
    reference_arrays,
    slot_layout,
    tf_layout,
    write_arrays,
)
from trainperf.workloads.minigo.workload import MiniGoWorkload

STEP = 5000


def _checkpoint() -> dict[str, np.ndarray]:
    """A bootstrap checkpoint as the reference's Estimator writes it: weights, every momentum slot, the step."""
    arrays = reference_arrays(reference_gonet())
    rng = np.random.default_rng(0)
    slots = {n: rng.standard_normal(s).astype(np.float32) for n, s in slot_layout(tf_layout()).items()}
    return arrays | slots | {"global_step": np.int64(STEP)}


def _convert(ckpt, out, monkeypatch) -> None:
    from trainperf.workloads.minigo import convert

    class Reader:
        def get_variable_to_shape_map(self):
            return {k: list(np.shape(v)) for k, v in ckpt.items()}

        def get_tensor(self, name):
            return ckpt[name]

    fake_tf = types.SimpleNamespace(train=types.SimpleNamespace(load_checkpoint=lambda prefix: Reader()))
    monkeypatch.setitem(sys.modules, "tensorflow", fake_tf)
    assert convert.main(["work_dir/model.ckpt-5000", str(out)]) == 0


def test_the_converter_keeps_the_step_and_the_momentum_slots(tmp_path, monkeypatch):
    ckpt = _checkpoint()
    out = tmp_path / "bootstrap.safetensors"
    _convert(ckpt, out, monkeypatch)
    step, momentum = read_training_state(reference_gonet(), out, what="bootstrap")
    assert step == STEP
    net = reference_gonet()
    assert sorted(momentum) == sorted(n for n, _ in net.named_parameters())  # a slot for every parameter
    slot = ckpt["conv2d/kernel/Momentum"]  # HWIO in TF, OIHW here
    assert torch.equal(momentum["stem.0.weight"], torch.from_numpy(slot.transpose(3, 2, 0, 1).copy()))
    assert torch.equal(momentum["policy_fc.weight"], torch.from_numpy(ckpt["dense/kernel/Momentum"].T.copy()))


def test_a_file_without_the_state_reads_as_none_and_a_partial_one_is_refused(tmp_path):
    net = reference_gonet()
    old = tmp_path / "old.safetensors"
    write_arrays(reference_arrays(net), old)
    assert read_training_state(net, old, what="bootstrap") is None
    partial = tmp_path / "partial.safetensors"
    write_arrays(reference_arrays(net) | {"global_step": np.int64(3)}, partial)
    with pytest.raises(DataError, match="part of the checkpoint's training state but not"):
        read_training_state(net, partial, what="bootstrap")


def test_the_run_goes_on_from_the_checkpoint_s_step_and_momentum(tmp_path):
    out = tmp_path / "bootstrap.safetensors"
    write_arrays(_checkpoint(), out)  # as the converter writes it (the test above)
    w = MiniGoWorkload(REFERENCE, REFERENCE_RECIPE, RunConfig(seed=1), data_dir=tmp_path, dist=DistContext())
    w.bootstrap_state = read_training_state(reference_gonet(), out, what="bootstrap")
    model = reference_gonet()
    opt, sched = w.build_optimizer(model)
    bounds, rates = REFERENCE_RECIPE.lr_boundaries, REFERENCE_RECIPE.lr_rates
    expected = rates[sum(STEP >= b for b in bounds)]
    assert opt.param_groups[0]["lr"] == pytest.approx(expected)  # not lr_rates[0]: the schedule goes on
    _, momentum = w.bootstrap_state
    for name, p in model.named_parameters():
        assert torch.equal(opt.state[p]["momentum_buffer"], momentum[name])
