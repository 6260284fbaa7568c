"""One optimizer step of each resnet model on fake data, and the reference model's facts."""

from __future__ import annotations

import re
from pathlib import Path

import mlperf_logging
import torch
from stepping import dry_workload, one_step

from trainperf.workloads.resnet.model import MiniResNet, reference_resnet50
from trainperf.workloads.resnet.workload import mxnet_tensor_name


def test_mini_model_one_step(tmp_path):
    one_step(dry_workload("resnet", "mini", tmp_path))


def test_reference_parameter_count_is_resnet50_v15():
    n = sum(p.numel() for p in reference_resnet50().parameters())
    assert n == 25_557_032  # 25.56 M


def test_mini_model_output_shape():
    assert MiniResNet()(torch.zeros(2, 1, 28, 28)).shape == (2, 10)


def test_tensor_names_match_the_v2_closed_rule_file():
    rule = Path(mlperf_logging.__file__).parent / "compliance_checker" / "training_2.0.0" / "closed_resnet.yaml"
    end_block = rule.read_text().split("- END:")[1].split("- KEY:")[0]
    expected = sorted(re.findall(r'"([a-z0-9_]+)"', end_block))
    assert len(expected) == 161
    names = sorted(mxnet_tensor_name(n) for n, _ in reference_resnet50().named_parameters())
    assert names == expected


def test_top1_is_the_mean_of_the_per_image_hits(data_dir):
    from trainperf import registry
    from trainperf.dist import DistContext
    from trainperf.spec import RunConfig

    spec, recipe = registry.get_spec("resnet", "mini"), registry.default_recipe("resnet", "mini")
    w = registry.workload_class("resnet")(spec, recipe, RunConfig(seed=1), data_dir=data_dir, dist=DistContext())
    w.load_data()
    torch.manual_seed(0)
    model = w.build_model()
    hits = w.top1_hits(model)
    assert hits.dtype == torch.bool and len(hits) == w.eval_samples == 10_000
    assert w.evaluate(model) == {"top1": int(hits.sum()) / len(hits)}
