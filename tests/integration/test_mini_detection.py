"""ssd's and maskrcnn's minis: real steps on the real prepared scenes (COCO json, the real loader) through the
harness's stepper and a real COCO evaluation of the 500 validation scenes, and a calibration seed's log of each
run to its target judged by the official compliance checker with the mini rules. That the minis reach their
targets is shown by their calibrations (the READMEs beside ssd/workload.py and maskrcnn/workload.py), not rerun
here."""

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

from trainperf import registry
from trainperf.results import first_values, parse_run, read_mllog

# calibration seeds that reached the target clearly (the workloads' READMEs): the logs' seeds, and the steps' too
SEEDS = {"ssd": 100005, "maskrcnn": 100006}
STEPS = {"ssd": 60, "maskrcnn": 100}  # an eighth of an epoch of each recipe (16 and 8 scenes a step)


@pytest.mark.slow
@pytest.mark.parametrize("key", ["ssd", "maskrcnn"])
def test_a_few_real_steps_on_the_mini_scenes_start_finding_objects(data_dir, key):
    """The untrained models score mAP 0.0000 (below 5e-5) on every calibration seed (the READMEs: not evaluated again
    here, 3-7 s); an eighth of an epoch on the real scenes puts the first right detections (and masks) on the
    validation scenes, and every later ten steps' mean loss stays below 0.85 of the first ten's."""
    cmd = few_steps_command(key, SEEDS[key], STEPS[key], data_dir, before=False)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    got = json.loads(r.stdout)
    spec = registry.get_spec(key, "mini")
    assert (got["train_samples"], got["eval_samples"]) == (8000, 500)
    assert set(got["after"]) == {f for f, _ in spec.fields}
    assert all(got["after"][f] > 0.002 for f, _ in spec.fields), got["after"]  # 40x the untrained figure
    first, *later = got["losses"]  # the mean loss of steps 1-10, 11-20, ...
    assert max(later) < 0.85 * first, got["losses"]
    assert got["peak_rss_mib"] < 4096  # the mini runs' memory goal: 4 GiB (a full run: 1.0 and 1.5-1.7 GiB)


@pytest.mark.parametrize("key", ["ssd", "maskrcnn"])
def test_a_calibration_seeds_log_stops_at_the_target_and_passes_the_checker(tmp_path, key):
    """The log of `trainperf run <key> --seed <SEEDS[key]>` (source paths made relative)."""
    log, spec = mini_log(key), registry.get_spec(key, "mini")
    assert_a_success_stopped_at_the_first_evaluation_reaching_the_target(log, spec)
    assert parse_run(log).seed == SEEDS[key]
    first = first_values(read_mllog(log))
    assert (first["train_samples"], first["eval_samples"]) == (8000, 500) and first["opt_name"] == "adamw"
    assert_the_checker_passes(log)
    assert_the_target_decides(log, spec, tmp_path)
