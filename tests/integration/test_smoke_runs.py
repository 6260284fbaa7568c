"""Reference smoke runs (`trainperf run BENCH --scale reference --smoke`): a tiny fixture in the reference's
on-disk format, the real loader, a few real training steps of the full-size model and a full evaluation.

Each is what a user checking a new machine runs, and each catches what dry runs on synthetic batches
cannot: ssd's fixture holds boxes of the highest OpenImages category id (263), which a head without a
column for it cannot train on; resnet's holds greyscale and CMYK JPEGs among the RGB ones.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from trainperf.results import first_values, parse_run, read_mllog


def trainperf(*args, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "trainperf", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


def _smoke(key, out):
    r = trainperf("run", key, "--scale", "reference", "--smoke", "--seed", "1", "--out", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{key} smoke run: fixture in the reference layout at {out / 'smoke-data' / key / 'reference'}" in r.stdout
    assert "not a result" in r.stdout
    [log] = list((out / "results").rglob("result_0.txt"))
    first = first_values(read_mllog(log))
    assert first["trainperf_smoke"] is True and first["trainperf_dry_run"] is False
    assert parse_run(log).status == "aborted"  # never a result
    assert json.loads((out / "trainperf.json").read_text())["kind"] == "smoke run"
    return first


@pytest.mark.parametrize("key", ["resnet", "ssd", "dlrm"])
def test_reference_smoke_run_reads_the_real_format_trains_evaluates_and_fails_ruleset_2_only_on_the_target(
    tmp_path, key
):
    from trainperf.rules.compliance import check_log, is_target_only_failure

    out = tmp_path / "o"
    first = _smoke(key, out)
    # the fixture, read by the real loader: its sizes, not the real data set's
    sizes = {"resnet": (24, 16), "ssd": (4, 2), "dlrm": (23 * 64, 150)}[key]
    assert (first["train_samples"], first["eval_samples"]) == sizes
    accuracy = first["eval_accuracy"]
    assert 0.0 <= accuracy <= 1.0  # a real evaluation over the whole fixture (a dry run logs 0 without one)
    # the log is a v2.0 reference log in every field but the quality it reached
    [log] = list((out / "results").rglob("result_0.txt"))
    res = check_log(log)
    assert res.scale == "reference" and res.ruleset == "2.0.0"
    assert is_target_only_failure(res), res.problems
    if key == "ssd":  # every tensor of the v2.0 model is logged (the checker's weights_initialization rule)
        assert log.read_text().count('"weights_initialization"') == 89
    # a timed run never resumes from a smoke run's folder, nor reads its fixture
    r = trainperf("run", key, "--scale", "reference", "--out", out)
    assert r.returncode == 2 and "holds smoke run results" in r.stderr and "Traceback" not in r.stderr


def test_maskrcnn_smoke_run_loads_r50_pkl_trains_evaluates_and_fails_ruleset_2_only_on_the_target(tmp_path):
    # The fixture: COCO 2017 with all 80 categories and crowds, and an R-50.pkl in the reference's C2 layout
    # (stand-in values), which the closed-division run loads through the restricted reader.
    from trainperf.rules.compliance import check_log, is_target_only_failure

    out = tmp_path / "o"
    first = _smoke("maskrcnn", out)
    assert (out / "smoke-data" / "maskrcnn" / "reference" / "R-50.pkl").is_file()
    assert (first["train_samples"], first["eval_samples"]) == (4, 2)
    assert first["submission_division"] == "closed" and first["trainperf_division"] == "closed"
    assert first["opt_learning_rate_decay_steps"] == [480000, 640000]  # the rule's steps at 2 images per step
    accuracy = first["eval_accuracy"]
    assert set(accuracy) == {"BBOX", "SEGM"} and all(0.0 <= v <= 1.0 for v in accuracy.values())
    [log] = list((out / "results").rglob("result_0.txt"))
    assert log.read_text().count('"weights_initialization"') == 21
    res = check_log(log)
    assert res.scale == "reference" and res.ruleset == "2.0.0"
    assert is_target_only_failure(res), res.problems


def test_minigo_smoke_run_self_plays_two_generations_from_the_bootstrap_and_plays_the_target(tmp_path):
    # The fixture: the v2.0 network's bootstrap and target models in the file trainperf reads (TF names
    # and layouts in safetensors, as the converter writes them) and a few bootstrap games (bootstrap.py's file);
    # a first generation trained on the bootstrap games, then real self-play with the v2.0 search and real
    # training steps, then real evaluation games against the target model.
    from trainperf.rules.compliance import TARGET_PROBLEM, check_log

    out = tmp_path / "o"
    first = _smoke("minigo", out)
    folder = out / "smoke-data" / "minigo" / "reference"
    assert (folder / "bootstrap.safetensors").is_file() and (folder / "target.safetensors").is_file()
    assert (first["train_samples"], first["eval_samples"]) == (2, 2)  # 2 games a generation, 2 evaluation games
    [log] = list((out / "results").rglob("result_0.txt"))
    records = read_mllog(log)
    [evaluation] = [r for r in records if r["key"] == "eval_accuracy"]
    assert evaluation["metadata"]["epoch_num"] == 2  # after two generations
    [details] = [r["value"] for r in records if r["key"] == "trainperf_eval_details"]
    assert details["games"] == 2 and details["black_games"] == 1  # each colour once
    res = check_log(log)
    assert res.scale == "reference" and res.ruleset == "2.0.0" and not res.passed
    # A smoke run plays 2 games a generation, not the rules' 8192: besides the target (which two games
    # may meet by chance), the log fails exactly the two games-per-generation checks, honestly logged.
    games_checks = [p for p in res.problems if "selfplay_games_per_generation" in p]
    assert len(games_checks) == 2 and all("8192" in p for p in games_checks)
    assert all(p.startswith(TARGET_PROBLEM) for p in res.problems if p not in games_checks), res.problems
