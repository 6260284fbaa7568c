"""flux1's mini on the real prepared files (the glyph images and their encodings that `trainperf data prepare flux1`
writes in the reference's Arrow layout): a short real run through the CLI (real steps, a real evaluation over the 8
timesteps, the pictures its model draws, the report that shows them), a changed file refused before the clock, and
a calibration log that `trainperf check` accepts by the 6.1 rules. That the mini reaches its target is shown by its
calibration (README.md beside flux1/workload.py), not rerun here."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trainperf.results import first_values, parse_run, read_mllog
from trainperf.rules.compliance import check_log
from trainperf.workloads.flux1 import MINI, glyphs, mini, pictures

SEED = 100001
SHORT_STEPS = 100  # one evaluation interval (3,200 samples at batch 32)
# Seed 100001's log of `benchmarks/calibrate.py flux1` (`trainperf run flux1 --seed 100001`; its source paths made
# relative).
MINI_LOG = Path(__file__).with_name("flux1_mini_log.txt")


def trainperf(*args, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "trainperf", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.slow
def test_a_short_mini_run_learns_draws_and_the_report_shows_its_pictures(tmp_path, data_dir):
    """One evaluation interval of real training from scratch: the validation loss falls far below the untrained
    model's (printed in the manifest), the run draws its pictures after run_stop, and the report embeds them."""
    out = tmp_path / "out"
    r = trainperf("run", "flux1", "--seed", SEED, "--set", f"max_steps={SHORT_STEPS}", "--out", out,
                  "--data-dir", data_dir)  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr  # the shortened budget ends it before the target: no score
    [log] = list((out / "results").rglob("result_0.txt"))
    run = parse_run(log)
    assert run.status == "aborted" and "progress budget" in (out / "summary.json").read_text()
    untrained = mini.read_manifest(data_dir)["untrained_loss"]
    [(_, samples, loss)] = run.curve
    assert samples == SHORT_STEPS * 32 and loss < untrained - 1.0, (loss, untrained)  # about 1.93 -> 0.45
    records = read_mllog(log)
    details = [x["value"] for x in records if x.get("key") == "trainperf_eval_details"]
    assert sorted(details[0]) == [f"eval_loss_t{k}" for k in range(8)]  # each timestep's mean, logged beside it
    first = first_values(records)
    assert (first["train_samples"], first["eval_samples"]) == (MINI.train_samples, MINI.eval_samples)
    assert first["evaluation_frequency"] == 3200 and first["trainperf_model_flavour"] == "mini"
    [png] = list((out / "pictures").rglob("result_0.png"))
    from PIL import Image

    img = Image.open(io.BytesIO(png.read_bytes()))
    cell = glyphs.SIZE * pictures.ZOOM
    assert img.size == (pictures.LABEL_W + cell * len(pictures.CAPTIONS), pictures.HEADER_H + cell)  # one row
    summary = json.loads((out / "summary.json").read_text())["benchmarks"][0]
    assert summary["runs"][0]["pictures"] == str(png)
    rep = trainperf("report", out, "-o", tmp_path / "r.html")
    assert rep.returncode == 0, rep.stdout + rep.stderr
    text = (tmp_path / "r.html").read_text()
    assert "What the models drew" in text and "1 run(s) drew one" in text


def test_a_changed_glyph_file_is_refused_before_the_clock(data_dir, tmp_path):
    mini.prepare_mini(data_dir)
    shutil.copytree(mini.mini_dir(data_dir), mini.mini_dir(tmp_path))
    shard = mini.mini_dir(tmp_path) / mini.TRAIN / "data-00001-of-00004.arrow"
    raw = bytearray(shard.read_bytes())
    raw[-100] ^= 1
    shard.write_bytes(bytes(raw))
    r = trainperf("run", "flux1", "--seed", SEED, "--out", tmp_path / "o", "--data-dir", tmp_path)
    assert r.returncode != 0
    assert "data-00001-of-00004.arrow" in r.stderr and "trainperf data prepare flux1" in r.stderr, r.stderr
    assert not list((tmp_path / "o").rglob("result_*.txt"))


def test_a_mini_run_log_passes_the_checker_by_the_6_1_rules_and_the_target_decides(tmp_path):
    run = parse_run(MINI_LOG)
    assert run.status == "success"
    assert run.curve[-1][2] <= MINI.target and all(q > MINI.target for _, _, q in run.curve[:-1])
    records = read_mllog(MINI_LOG)
    first = first_values(records)
    assert first["submission_benchmark"] == "flux1" and first["trainperf_scale"] == "mini"
    assert (first["global_batch_size"], first["opt_adamw_weight_decay"]) == (32, 0.1)
    assert (first["train_samples"], first["eval_samples"]) == (MINI.train_samples, MINI.eval_samples)
    # open_flux1.yaml's averaged_validation_loss beside every eval_accuracy, the same value and samples_count
    evals = [(r["value"], r["metadata"]["samples_count"]) for r in records if r.get("key") == "eval_accuracy"]
    assert evals == [(r["value"], r["metadata"]["samples_count"]) for r in records
                     if r.get("key") == "averaged_validation_loss"]  # fmt: skip
    res = check_log(MINI_LOG)
    assert res.passed and res.ruleset == "6.1.0" and res.scale == "mini", res.problems
    checked = trainperf("check", MINI_LOG, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    last = [r for r in records if r.get("key") == "eval_accuracy"][-1]
    text = MINI_LOG.read_text()
    old = f'"key": "eval_accuracy", "value": {last["value"]!r}'
    assert text.count(old) == 1
    worse = tmp_path / "result_0.txt"
    worse.write_text(text.replace(old, f'"key": "eval_accuracy", "value": {MINI.target + 0.05!r}'))
    res = check_log(worse)
    assert not res.passed and any(str(MINI.target) in p for p in res.problems), res.problems
