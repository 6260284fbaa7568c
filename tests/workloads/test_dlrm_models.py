"""The dlrm models: the full reference model on the meta device, MLPerf's tensor names, one step, and a
reference smoke run on tiny fixtures in both on-disk formats through the real loader."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score
from stepping import dry_workload, one_step
from test_contract import official_tensor_names

from trainperf import registry
from trainperf.dist import DistContext
from trainperf.harness.runner import RunObserver
from trainperf.harness.schedule import Schedule
from trainperf.harness.steps import Stepper
from trainperf.spec import RunConfig
from trainperf.workloads.dlrm import data
from trainperf.workloads.dlrm.model import DLRM, layer_names
from trainperf.workloads.dlrm.workload import FLAVOURS, REFERENCE_DAYS, lr_policy


def test_full_reference_model_on_the_meta_device():
    model = DLRM(FLAVOURS["reference"].model, device="meta")
    n = sum(p.numel() for p in model.parameters())
    assert model.embeddings.weight.shape == (187_767_399, 128)
    assert n == 187_767_399 * 128 + 171_392 + 2_197_505  # tables + bottom MLP + top MLP: 24.04 G parameters
    assert [m.in_features for m in model.top_mlp if isinstance(m, torch.nn.Linear)] == [479, 1024, 1024, 512, 256]
    out = model(torch.zeros(4, 13, device="meta"), torch.zeros(4, 26, dtype=torch.long, device="meta"))
    assert out.shape == (4,)


def test_tensor_names_match_the_v2_closed_rule_file():
    model = DLRM(dataclasses.replace(FLAVOURS["reference"].model, table_sizes=(3,) * 26), device="meta")
    assert sorted(set(layer_names(model).values())) == sorted(official_tensor_names("dlrm"))


def test_mini_model_one_step(tmp_path):
    one_step(dry_workload("dlrm", "mini", tmp_path))


def _policy(warmup: int, start: int, steps: int):
    recipe = dataclasses.replace(
        registry.default_recipe("dlrm", "reference"),
        opt_learning_rate_warmup_steps=warmup,
        lr_decay_start_steps=start,
        sgd_opt_learning_rate_decay_steps=steps,
    )
    return lr_policy(recipe)


def test_lr_policy_is_the_reference_s():
    # facebookresearch/dlrm @ 6d75c84 dlrm_s_pytorch.py:99-133, its rate at each of the first optimizer steps
    # (worked out from its code: its step count is 1 at the first step; between warm-up and decay, and after the
    # decay, it holds the last rate it set)
    f = _policy(4, 6, 4)
    assert [f(k) for k in range(12)] == [0.25, 0.5, 0.75, 0.75, 0.75, 1.0, 0.5625, 0.25, 0.0625, 0.0625, 0.0625, 0.0625]
    f = _policy(4, 4, 0)  # no decay: the base rate after the warm-up
    assert [f(k) for k in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    f = _policy(0, 0, 4)  # a decay from the start: its first rate has already decayed one step
    assert [f(k) for k in range(5)] == [0.5625, 0.25, 0.0625, 0.0625, 0.0625]
    f = _policy(0, 0, 10_000)  # held at the decay's last, (1/n)^2 = 1e-8, which the reference lifts to 1e-7
    assert f(9_999) == f(20_000) == pytest.approx(1e-7)
    f = _policy(0, 3, 4)  # the reference has no rate to hold here (AttributeError): the base rate
    assert [f(k) for k in range(5)] == [1.0, 1.0, 1.0, 0.5625, 0.25]


def test_a_decay_before_the_warm_up_ends_is_refused_as_the_reference_refuses_it():
    from trainperf.errors import UsageError

    with pytest.raises(UsageError, match=r"lr_decay_start_steps=5 is before the end of the warm-up.*at least 10"):
        registry.default_recipe("dlrm", "reference").with_overrides(
            {"opt_learning_rate_warmup_steps": 10, "lr_decay_start_steps": 5}
        )


def _fixture_samples(rng: np.random.Generator, n: int, sizes: list[int]):
    raw = rng.integers(-2, 300, (n, data.NUM_DENSE))
    rows = np.stack([rng.integers(0, s, n) for s in sizes], axis=1)
    labels = (rng.random(n) < 1 / (1 + np.exp(-(rows[:, 0] % 2 * 2.0 - 1.0)))).astype(np.int64)
    return labels, raw, rows


@pytest.mark.parametrize("form", ["tsv", "binary"])
def test_reference_smoke_run_on_a_tiny_fixture(tmp_path, form):
    sizes = [11] * data.NUM_SPARSE
    root = tmp_path / "dlrm" / "reference"
    root.mkdir(parents=True)
    rng = np.random.default_rng(0)
    if form == "tsv":
        for k in range(REFERENCE_DAYS):
            labels, raw, rows = _fixture_samples(rng, 64 if k < REFERENCE_DAYS - 1 else 300, sizes)
            lines = [
                "\t".join([str(y), *[str(v) for v in r], *[f"{int(c) + 11 * 1000:08x}" for c in c_]])
                for y, r, c_ in zip(labels, raw, rows, strict=True)
            ]
            (root / f"day_{k}").write_text("\n".join(lines) + "\n")
    else:
        for name, n in (("terabyte_processed_train.bin", 1500), ("terabyte_processed_test.bin", 150)):
            labels, raw, rows = _fixture_samples(rng, n, sizes)
            log = data.ClickLog(labels.astype(np.float32), np.log1p(np.maximum(raw, 0)).astype(np.float32), rows)
            data.write_binary(root / name, log, np.maximum(raw, 0))
    spec = registry.get_spec("dlrm", "reference")
    # SGD at the reference's rate 1.0 can diverge in 12 steps on these few random samples (the order decides)
    recipe = dataclasses.replace(
        registry.default_recipe("dlrm", "reference"), global_batch_size=128, opt_base_learning_rate=0.1
    )
    cls = registry.workload_class("dlrm")
    w = cls(spec, recipe, RunConfig(seed=1), data_dir=tmp_path, dist=DistContext())
    w.model_config = dataclasses.replace(w.model_config, table_sizes=tuple(sizes))  # the full tables need 96 GB
    w.prepare()
    assert w.format == form
    w.load_data()
    assert w.train_samples == (23 * 64 if form == "tsv" else 1500) and w.eval_samples == 150
    torch.manual_seed(0)
    model = w.parallelize(w.build_model())
    opt, sched = w.build_optimizer(model)
    stepper = Stepper(model, w, opt, sched, RunObserver(), Schedule.for_run(spec, w))
    batches = w.train_batches()
    for _ in range(12):  # more than one epoch of either fixture: its batches are drawn again
        stepper.step([next(batches)])
    auc = w.evaluate(model)["auc"]
    # the whole evaluation set, scored once each, as scikit-learn scores it directly
    ev = data.binary_records(w.eval_records, slice(None), root / "x", sizes)
    model.eval()
    with torch.no_grad():
        scores = model(torch.from_numpy(ev.dense), torch.from_numpy(ev.sparse)).double().numpy()
    assert auc == pytest.approx(roc_auc_score(ev.labels, scores), abs=1e-12)
    assert len(ev) == 150 and 0.0 < auc < 1.0


def test_reference_dry_run_fails_ruleset_2_only_on_the_target(tmp_path):
    import subprocess
    import sys

    from trainperf.rules.compliance import check_log, is_target_only_failure

    out = tmp_path / "o"
    r = subprocess.run(
        [sys.executable, "-m", "trainperf", "run", "dlrm", "--scale", "reference", "--dry-run", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    [log] = list((out / "results").rglob("result_0.txt"))
    res = check_log(log)
    assert res.scale == "reference" and res.ruleset == "2.0.0"
    assert is_target_only_failure(res), res.problems
    assert log.read_text().count('"weights_initialization"') == 9
