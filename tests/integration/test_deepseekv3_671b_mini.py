"""deepseekv3_671b's mini on llama31_8b's real mini files, continued from the starting checkpoint that `trainperf data
prepare deepseekv3_671b` trains: real training steps through the harness's stepper and a real evaluation of the 512
validation sequences, with the experts' load beside it; and a data folder without the checkpoint refused before the
clock, naming the command that makes it. That the mini reaches its target is shown by its calibration (README.md
beside deepseekv3_671b/workload.py), not rerun here."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from trainperf import registry
from trainperf.dist import DistContext
from trainperf.harness.runner import RunObserver, seed_everything
from trainperf.harness.schedule import Schedule
from trainperf.harness.steps import Stepper
from trainperf.spec import RunConfig
from trainperf.workloads.deepseekv3_671b import MINI, mini_start

STEPS = 12


@pytest.fixture(scope="module")
def start(data_dir):
    mini_start.prepare_start(data_dir)  # idempotent: trained once per data folder (about a minute)
    return json.loads((mini_start.start_dir(data_dir) / mini_start.MANIFEST).read_text())


@pytest.mark.slow
def test_a_few_real_steps_from_the_starting_checkpoint_lower_the_validation_log_perplexity(data_dir, start):
    w = registry.workload_class("deepseekv3_671b")(
        MINI,
        registry.default_recipe("deepseekv3_671b", "mini"),
        RunConfig(seed=100001),
        data_dir=data_dir,
        dist=DistContext(),
    )
    try:
        w.prepare()
        w.load_data()
        seed_everything(100001)
        model = w.parallelize(w.build_model())
        before = w.evaluate(model)["log_perplexity"]
        opt, sched = w.build_optimizer(model)
        stepper = Stepper(model, w, opt, sched, RunObserver(), Schedule.for_run(MINI, w))
        batches = w.train_batches()
        for _ in range(STEPS):
            stepper.step([next(batches)])
        result = w.evaluate(model)
    finally:
        w.close()
    # the run starts where the checkpoint's manifest says it stands (its weights as written, read back), and far
    # below the untrained model's
    assert before == pytest.approx(start["log_perplexity"], abs=1e-3)
    assert before < start["training_curve"][0][1] - 1.0
    assert result["log_perplexity"] < before, (before, result)  # 12 steps of the warm-up and the peak rate
    assert MINI.target < start["log_perplexity"] - 0.3  # a run that does nothing never passes
    # every routed token counted: the most loaded of 8 experts (top-2) gets at most 4x the mean, at least the mean
    assert 1.0 <= result["expert_load_mean_max"] <= result["expert_load_max"] <= 8 / 2
    biases = [b for n, b in model.named_buffers() if n.endswith("router.expert_bias")]
    assert len(biases) == 3 and all(b.abs().max() > 0 for b in biases)  # the 3 MoE blocks' biases, moving
    assert w.hparams()["moe_aux_loss_coeff"] == 0.01 and w.hparams()["trainperf_moe_experts"] == 8
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_a_data_folder_without_the_starting_checkpoint_is_refused_naming_the_command(data_dir, tmp_path):
    (tmp_path / "llama31_8b").symlink_to(data_dir / "llama31_8b")  # the mini files, but no checkpoint
    r = subprocess.run(
        [sys.executable, "-m", "trainperf", "run", "deepseekv3_671b", "--scale", "mini", "--seed", "1"]
        + ["--data-dir", str(tmp_path), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "starting checkpoint" in r.stderr and "trainperf data prepare deepseekv3_671b" in r.stderr, r.stderr
