"""unet3d's evaluation schedule at the reference scale: the MLPerf v2.0 rules' formulas of the batch size.

training_rules.adoc (v2.0), "Quality measure": evaluation starts at CEILING(1000*168/samples_per_epoch) epochs,
then every CEILING(20*168/samples_per_epoch) epochs, with samples_per_epoch = CEILING(168/global_batch_size) *
global_batch_size; "Benchmark Results": a run is not converged after CEILING(10000*168/samples_in_epoch) epochs.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import json

import pytest

from trainperf import registry
from trainperf.dist import DistContext
from trainperf.harness.schedule import Schedule
from trainperf.spec import RunConfig
from trainperf.workloads import unet3d


def recipe_at(batch: int, scale: str = "reference"):
    return dataclasses.replace(registry.default_recipe("unet3d", scale), global_batch_size=batch)


@pytest.mark.parametrize(
    "batch, per_epoch, first, every, limit, budget",
    [
        # 168 / 2 = 84 batches: 168 samples; 1000*168/168 = 1000, 20*168/168 = 20, 10000; the grid meets 10000
        (2, 168, 1000, 20, 10000, 10000),
        # 7 and 12 divide 168 (24 and 14 batches): the same as batch 2
        (7, 168, 1000, 20, 10000, 10000),
        (12, 168, 1000, 20, 10000, 10000),
        # 168 / 5 = 33.6 -> 34 batches, 170 samples; 168000/170 = 988.2 -> 989; 3360/170 = 19.8 -> 20;
        # 1680000/170 = 9882.4 -> 9883; the last evaluation within it: 989 + 444 * 20 = 9869
        (5, 170, 989, 20, 9883, 9869),
        # 168 / 32 = 5.25 -> 6 batches, 192 samples; 168000/192 = 875; 3360/192 = 17.5 -> 18; 1680000/192 = 8750;
        # the last evaluation within it: 875 + 437 * 18 = 8741 (the next, 8759, is past the limit)
        (32, 192, 875, 18, 8750, 8741),
        # 168 / 80 = 2.1 -> 3 batches, 240 samples; 700, 14, 7000 exactly
        (80, 240, 700, 14, 7000, 7000),
    ],
)
def test_the_rules_schedule_by_batch_size(batch, per_epoch, first, every, limit, budget):
    r = recipe_at(batch)
    assert unet3d.samples_per_epoch(r) == per_epoch
    assert unet3d.non_converged_epochs(r) == limit
    spec = registry.get_spec("unet3d", "reference")
    assert (spec.first(r), spec.interval(r), spec.budget(r)) == (first, every, budget)


def test_evaluation_points_at_batch_2_and_32():
    spec = registry.get_spec("unet3d", "reference")
    at2 = spec.eval_points(recipe_at(2))
    assert at2[:3] == [1000, 1020, 1040] and at2[-2:] == [9980, 10000] and len(at2) == 451  # 1000 + 450 * 20
    at32 = spec.eval_points(recipe_at(32))
    assert at32[:3] == [875, 893, 911] and at32[-2:] == [8723, 8741] and len(at32) == 438  # 875 + 437 * 18
    assert all(b - a == 18 for a, b in zip(at32, at32[1:], strict=False))  # no evaluation off the grid


def test_every_v2_reference_convergence_point_lies_on_the_schedule():
    """The v2.0 RCPs (mlperf_logging's rcps_unet3d.json) list the epoch at which each reference run converged: every
    one is an evaluation of this schedule at its batch size (batch 32: 875 + 18k, batch 80: 700 + 14k), and batch 2's
    4040 lies past run_and_time.sh's 4000 epochs, within the rules' 10000."""
    path = importlib.resources.files("mlperf_logging") / "rcp_checker" / "training_2.0.0" / "rcps_unet3d.json"
    rcps = json.loads(path.read_text())
    spec = registry.get_spec("unet3d", "reference")
    assert sorted(rcp["BS"] for rcp in rcps.values()) == [2, 32, 56, 80, 84]
    for name, rcp in rcps.items():
        points = set(spec.eval_points(recipe_at(rcp["BS"])))
        off = [e for e in rcp["Epochs to converge"] if e not in points]
        assert not off, f"{name}: {off[:5]}"
    assert max(rcps["unet3d_ref_2_fp32"]["Epochs to converge"]) == 4040


def test_the_harness_evaluates_at_those_epochs_of_the_reference_s_epoch(tmp_path):
    """An epoch is 168 // batch optimizer steps (the reference's DataLoader drops the last partial batch): at batch 32,
    5 steps, so the evaluations come after 875 * 5, 893 * 5, ... steps, and the run stops at epoch 8741."""
    spec = registry.get_spec("unet3d", "reference")
    w = registry.workload_class("unet3d")(spec, recipe_at(32), RunConfig(seed=1), data_dir=tmp_path, dist=DistContext())
    schedule = Schedule.for_run(spec, w)
    assert schedule.steps_per_epoch == 5
    assert [schedule.steps_at(p) for p in schedule.points[:2]] == [4375, 4465]
    assert schedule.points[-1] == 8741 and schedule.steps_at(schedule.points[-1]) == 43705


def test_the_mini_schedule_stays_calibrated():
    spec = registry.get_spec("unet3d", "mini")
    for batch in (4, 32):
        points = spec.eval_points(recipe_at(batch, "mini"))
        assert points[:2] == [12, 16] and points[-1] == 200 and len(points) == 48  # 12 + 4k up to 200
