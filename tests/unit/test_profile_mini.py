"""benchmarks/profile_mini.py: the step's parts, the evaluation by package and a log's evaluation share."""

from __future__ import annotations

import json

import pytest
import torch
from helpers import FAKE_SPEC, FakeRecipe, FakeWorkload

from benchmarks import profile_mini
from trainperf.dist import DistContext
from trainperf.results import TOKEN
from trainperf.spec import RunConfig


def fake(tmp_path):
    w = FakeWorkload(FAKE_SPEC, FakeRecipe(), RunConfig(seed=3), data_dir=tmp_path, dist=DistContext())
    w.prepare()
    return w


def test_each_step_is_split_into_data_forward_backward_and_optimizer(tmp_path):
    w = fake(tmp_path)
    model = w.build_model()
    before = model.weight.detach().clone()
    optimizer, scheduler = w.build_optimizer(model)
    times = profile_mini.profile_steps(w, model, optimizer, scheduler, iter(w.train_batches()), 4)
    assert list(times) == ["data", "forward", "backward", "optimizer"]
    assert all(len(ts) == 4 and all(t >= 0 for t in ts) for ts in times.values())
    assert w._steps == 4 and not torch.equal(model.weight, before)  # the steps trained the model


def test_the_evaluation_is_timed_and_its_time_split_by_package(tmp_path):
    w = fake(tmp_path)
    wall, by_package, top, quality = profile_mini.evaluation_by_package(w, w.build_model())
    assert quality == {"top1": 0.5} and wall >= 0
    assert sum(by_package.values()) <= wall + 0.05
    assert all(isinstance(name, str) and s >= 0 for name, s in top)


@pytest.mark.parametrize(
    ("filename", "name", "package"),
    [
        ("/v/lib/python3.12/site-packages/pycocotools/cocoeval.py", "evaluateImg", "pycocotools"),
        ("/v/lib/python3.12/site-packages/torch/nn/modules/conv.py", "forward", "torch"),
        ("/repo/trainperf/workloads/common/detection/base.py", "detections", "trainperf"),
        ("~", "<built-in method torch.conv2d>", "torch"),
        ("~", "<built-in method pycocotools._mask.encode>", "pycocotools"),
        ("~", "<method 'append' of 'list' objects>", "python built-ins"),
    ],
)
def test_functions_are_grouped_by_their_package(filename, name, package):
    assert profile_mini._package(filename, name) == package


def test_the_evaluations_share_of_a_run_comes_from_its_log(tmp_path):
    events = [
        ("run_start", 1000),
        ("eval_start", 5000),
        ("eval_stop", 7000),
        ("eval_start", 9000),
        ("eval_stop", 10000),
    ]
    events.append(("run_stop", 11000))
    path = tmp_path / "result_0.txt"
    path.write_text("".join(f"{TOKEN}{json.dumps({'key': k, 'time_ms': t, 'value': None})}\n" for k, t in events))
    assert profile_mini.log_shares(path) == (
        "run 10.0 s: 2 evaluations 3.0 s (30 %; each 2.0, 1.0 s), training and loading 7.0 s (70 %)"
    )
