"""flux1 through the CLI: the reference dry run that the official 6.1.0 checker fails on the target alone, the reference
smoke run through the real reader of the preprocessed Arrow encodings (real steps and a real 8-timestep evaluation),
the same on the raw route (images and captions through the user's encoders), and a broken data set or an encoder of
the wrong width stopping the run before its clock with the file and field named."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trainperf.results import first_values, parse_run, read_mllog
from trainperf.rules.compliance import check_log, is_target_only_failure

CLOSED_KEYS = (
    "global_batch_size",
    "evaluation_frequency",
    "opt_name",
    "opt_adamw_beta_1",
    "opt_adamw_beta_2",
    "opt_adamw_epsilon",
    "opt_adamw_weight_decay",
    "opt_base_learning_rate",
    "opt_learning_rate_warmup_steps",
    "opt_gradient_clip_norm",
    "gradient_accumulation_steps",
)  # training_6.1.0/closed_flux1.yaml and closed_common.yaml


def trainperf(*args, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "trainperf", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


def test_reference_dry_run_fails_the_6_1_checker_only_on_the_target(tmp_path):
    r = trainperf("run", "flux1", "--scale", "reference", "--dry-run", "--out", tmp_path / "o")
    assert r.returncode == 0, r.stdout + r.stderr
    [log] = list((tmp_path / "o" / "results").rglob("result_0.txt"))
    res = check_log(log)
    assert res.scale == "reference" and res.ruleset == "6.1.0"
    assert is_target_only_failure(res), res.problems
    records = read_mllog(log)
    first = first_values(records)
    assert all(sum(r.get("key") == k for r in records) == 1 for k in CLOSED_KEYS)
    assert first["submission_benchmark"] == "flux1" and first["submission_division"] == "closed"
    assert first["evaluation_frequency"] == 262_144 and first["global_batch_size"] == 1  # CEIL(262144 / 1) x 1
    assert first["trainperf_model_flavour"] == "debug"  # the transformer's code at a toy width on a CPU
    assert first["eval_accuracy"] > 1.0  # an untrained model: its output is 0, the loss 1 + E[x0^2]
    assert parse_run(log).status == "aborted"


def test_reference_smoke_run_reads_the_preprocessed_encodings(tmp_path):
    out = tmp_path / "o"
    r = trainperf("run", "flux1", "--scale", "reference", "--smoke", "--seed", "1", "--out", out)
    assert r.returncode == 0, r.stdout + r.stderr
    where = out / "smoke-data" / "flux1" / "reference"
    assert f"flux1 smoke run: fixture in the reference layout at {where}" in r.stdout
    assert sorted(p.name for p in (where / "coco_preprocessed").iterdir()) == [
        "data-00000-of-00002.arrow", "data-00001-of-00002.arrow", "dataset_info.json", "state.json",
    ]  # fmt: skip
    [log] = list((out / "results").rglob("result_0.txt"))
    records = read_mllog(log)
    first = first_values(records)
    assert first["trainperf_smoke"] is True and first["train_samples"] == 8 and first["eval_samples"] == 16
    # The final layer starts at zero, so the model predicts 0 and the loss is E[(noise - x0)^2] = 1 + E[x0^2]; the
    # fixture's posterior means are N(0, 1) and its variances e^-8..e^-4: E[x0^2] = 0.3611^2 (1 + 0.1159^2 + 0.0045)
    # = 0.1327, and two steps at a warm-up's first rates move it little.
    assert first["eval_accuracy"] == pytest.approx(1.1327, abs=0.01)
    [details] = [r["value"] for r in records if r.get("key") == "trainperf_eval_details"]
    assert sorted(details) == [f"eval_loss_t{k}" for k in range(8)]  # each of the 8 timesteps scored
    assert parse_run(log).status == "aborted"  # never a result


def test_a_broken_data_set_stops_the_run_before_its_clock(tmp_path):
    from trainperf.workloads.flux1.fixture import write_smoke_fixture

    data = tmp_path / "data"
    root = data / "flux1" / "reference"
    write_smoke_fixture(root, train=2, validation=8)
    (root / "coco_preprocessed" / "data-00001-of-00002.arrow").write_bytes(b"\x00" * 64)
    out = tmp_path / "o"
    r = trainperf("run", "flux1", "--scale", "reference", "--data-dir", data, "--out", out, "--set",
                  "model_flavour=debug", "--division", "open")  # fmt: skip
    assert r.returncode == 2 and "data-00001-of-00002.arrow: not an Arrow stream" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert not list(out.rglob("result_0.txt"))


def test_reference_smoke_run_encodes_the_raw_images_with_the_users_encoders(tmp_path):
    import numpy as np
    import torch
    from diffusers import AutoencoderKL

    from trainperf.workloads.flux1 import flow, raw

    out = tmp_path / "o"
    r = trainperf("run", "flux1", "--scale", "reference", "--smoke", "--seed", "1", "--out", out, "--set",
                  "data_route=raw")  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    [log] = list((out / "results").rglob("result_0.txt"))
    records = read_mllog(log)
    first = first_values(records)
    assert first["trainperf_data_route"] == "raw" and first["train_samples"] == 8 and first["eval_samples"] == 16
    [details] = [r["value"] for r in records if r.get("key") == "trainperf_eval_details"]
    assert sorted(details) == [f"eval_loss_t{k}" for k in range(8)]
    # The untrained model predicts 0, so each sample scores 1 + E[x0^2]: x0 drawn from the fixture autoencoder's
    # posterior of that sample's image (diffusers' own split), shifted and scaled as FLUX's; two samples a timestep.
    where = out / "smoke-data" / "flux1" / "reference"
    images, _ = raw.batch(raw.load_shards(where / "coco"), np.arange(16))
    ae = AutoencoderKL.from_pretrained(str(where / "encoders" / "autoencoder"), local_files_only=True)
    with torch.no_grad():
        dist = ae.encode(torch.from_numpy(images).float() / 255 * 2 - 1).latent_dist
    x0_squared = ((dist.mean - flow.AE_SHIFT) * flow.AE_SCALE) ** 2 + flow.AE_SCALE**2 * dist.var
    assert first["eval_accuracy"] == pytest.approx(1 + float(x0_squared.mean()), abs=0.005)


def test_an_encoder_of_the_wrong_width_stops_the_raw_route_before_its_clock(tmp_path):
    import json

    from trainperf.workloads.flux1.raw_fixture import write_raw_fixture

    data = tmp_path / "data"
    root = data / "flux1" / "reference"
    write_raw_fixture(root, train=2, validation=8)  # the raw route alone: data_route=auto reads it
    config = root / "encoders" / "clip" / "config.json"
    config.write_text(json.dumps(json.loads(config.read_text()) | {"hidden_size": 512}))
    out = tmp_path / "o"
    r = trainperf("run", "flux1", "--scale", "reference", "--data-dir", data, "--out", out, "--set",
                  "model_flavour=debug", "--division", "open")  # fmt: skip
    assert r.returncode == 2 and f"{config}: hidden_size 512, the transformer's flavour needs 768" in r.stderr
    assert "Traceback" not in r.stderr
    assert not list(out.rglob("result_0.txt"))
