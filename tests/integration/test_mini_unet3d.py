"""unet3d's mini: real steps on the real prepared cases (NIfTI in the KiTS19 layout, the reference's preprocessing
and patches) through the harness's stepper and a real sliding-window evaluation, and a calibration seed's log of a
run to the target judged by the official compliance checker with the mini rules. That the mini reaches its target
is shown by its calibration (README.md beside unet3d/workload.py), not rerun here."""

from __future__ import annotations

import json
import subprocess

import pytest
from mini_logs import (
    assert_a_success_stopped_at_the_first_evaluation_reaching_the_target,
    assert_the_checker_passes,
    assert_the_target_decides,
    mini_log,
)
from mini_steps import few_steps_command

from trainperf.results import first_values, parse_run, read_mllog
from trainperf.workloads.unet3d import MINI

SEED = 100001  # a calibration seed that reached the target (README.md of unet3d), so CI does not depend on a drawn seed
STEPS = 36  # three epochs of the 48 training cases at 4 a step
LOG = mini_log("unet3d")


@pytest.mark.slow
def test_a_few_real_steps_on_the_mini_cases_find_the_kidneys(data_dir):
    """The untrained model scores mean Dice 0.006-0.061 over the calibration seeds (README.md "Calibration");
    three epochs on the real patches find most of the kidney voxels of the 16 evaluation cases."""
    r = subprocess.run(few_steps_command("unet3d", SEED, STEPS, data_dir), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    got = json.loads(r.stdout)
    before, after = got["before"], got["after"]
    assert (got["train_samples"], got["eval_samples"]) == (48, 16)
    assert before["mean_dice"] < 0.1, before
    assert after["mean_dice"] > 0.2 and after["dice_kidney"] > 0.3, after
    assert got["peak_rss_mib"] < 3 * 1024  # the mini goal: peak memory at most 3 GiB (a full run: 1.2 GiB)


def test_a_calibration_seeds_log_stops_at_the_target_and_passes_the_checker(tmp_path):
    """Seed 100001's log of `trainperf run unet3d` (source paths made relative)."""
    assert_a_success_stopped_at_the_first_evaluation_reaching_the_target(LOG, MINI)
    assert parse_run(LOG).seed == SEED
    first = first_values(read_mllog(LOG))
    assert (first["train_samples"], first["eval_samples"]) == (48, 16)
    assert first["training_input_shape"] == [32, 32, 32] and first["opt_name"] == "adam"
    assert_the_checker_passes(LOG)
    assert_the_target_decides(LOG, MINI, tmp_path)
