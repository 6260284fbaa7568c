"""gpt_oss_20b's mini on llama31_8b's real mini files: real training steps through the harness's stepper and a real
evaluation of the 512 validation sequences, with the experts' load beside it. That the mini reaches its target is
shown by its calibration (README.md beside gpt_oss_20b/workload.py), not rerun here."""

from __future__ import annotations

import math

import pytest
import torch

from trainperf import registry
from trainperf.dist import DistContext
from trainperf.harness.runner import RunObserver, seed_everything
from trainperf.harness.schedule import Schedule
from trainperf.harness.steps import Stepper
from trainperf.spec import RunConfig
from trainperf.workloads.gpt_oss_20b import MINI
from trainperf.workloads.llama31_8b import mini

STEPS = 12


@pytest.mark.slow
def test_a_few_real_steps_lower_the_validation_log_perplexity(data_dir):
    cls = registry.workload_class("gpt_oss_20b")
    w = cls(
        MINI,
        registry.default_recipe("gpt_oss_20b", "mini"),
        RunConfig(seed=100001),
        data_dir=data_dir,
        dist=DistContext(),
    )
    try:
        w.prepare()
        w.load_data()
        seed_everything(100001)
        model = w.parallelize(w.build_model())
        opt, sched = w.build_optimizer(model)
        stepper = Stepper(model, w, opt, sched, RunObserver(), Schedule.for_run(MINI, w))
        batches = w.train_batches()
        for _ in range(STEPS):
            stepper.step([next(batches)])
        result = w.evaluate(model)
    finally:
        w.close()
    uniform = math.log(mini.VOCAB_SIZE)  # 8.318: a model that learnt nothing scores about this (8.35 untrained)
    assert result["log_perplexity"] < uniform - 0.5, result  # the unigram statistics are learnt in a few steps
    # every routed token counted: the most loaded of 8 experts (top-2) gets at most 4x the mean, at least the mean
    assert 1.0 <= result["expert_load_mean_max"] <= result["expert_load_max"] <= 8 / 2
    assert w.hparams()["trainperf_moe_experts"] == 8 and w.args.window(0) == 32 and w.args.window(1) is None
    assert all(torch.isfinite(p).all() for p in model.parameters())
