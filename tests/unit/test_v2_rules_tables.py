"""The reference specs of resnet, ssd, rnnt, bert and minigo against the tables of the MLPerf Training v2.0 rules
(mlcommons/training_policies @ fc06c0a, training_rules.adoc: "Closed Division" targets, "Quality measure"
evaluation frequency, "Benchmark Results" run counts). The v1.0 text had SSD at "Every 5 epochs" and 23.0% mAP;
v2.0's SSD (RetinaNet) is "Every 1 epoch" and 34.0% mAP."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trainperf import registry

# key: (target, higher is better, runs, first evaluation points in the spec's unit at the default recipe)
V2_TABLES = {
    "resnet": (0.759, True, 5, [4.0, 8.0, 12.0]),  # 75.90% top-1; every 4 epochs (offset 0 here); 5 runs
    "ssd": (0.340, True, 5, [1.0, 2.0, 3.0]),  # 34.0% mAP; every 1 epoch; 5 runs
    "rnnt": (0.058, False, 10, [1.0, 2.0, 3.0]),  # 0.058 WER; every 1 epoch; 10 runs
    # 0.720 masked-LM accuracy; FLOOR(0.05 * (230.23 * 256 + 3,000,000), 25,000) = FLOOR(152,946.9, 25,000)
    # = 150,000 samples, skipping 0; 10 runs
    "bert": (0.720, True, 10, [150_000.0, 300_000.0, 450_000.0]),
    "minigo": (0.50, True, 10, [1.0, 2.0, 3.0]),  # 50% win rate; every 1 epoch (a generation); 10 runs
}


@pytest.mark.parametrize("key", sorted(V2_TABLES))
def test_reference_spec_follows_the_v2_rules_tables(key):
    target, higher_is_better, runs, first_points = V2_TABLES[key]
    spec = registry.get_spec(key, "reference")
    assert (spec.target, spec.higher_is_better) == (target, higher_is_better)
    assert (spec.runs_required, spec.runs_dropped) == (runs, 1)  # olympic: the fastest and slowest dropped
    points = spec.eval_points(registry.default_recipe(key, "reference"))
    assert points[: len(first_points)] == pytest.approx(first_points)


@pytest.mark.parametrize(
    ("batch", "interval"),
    [
        # FLOOR(0.05 * (230.23 * 4096 + 3,000,000), 25,000) = FLOOR(197,151.1, 25,000)
        (4096, 175_000.0),
        # FLOOR(0.05 * (230.23 * 8192 + 3,000,000), 25,000) = FLOOR(244,302.2, 25,000)
        (8192, 225_000.0),
        # FLOOR(0.05 * (230.23 * 2 + 3,000,000), 25,000) = FLOOR(150,023.0, 25,000): the dry run's batch
        (2, 150_000.0),
    ],
)
def test_bert_evaluation_interval_is_the_v2_formula(batch, interval):
    spec = registry.get_spec("bert", "reference")
    recipe = replace(registry.default_recipe("bert", "reference"), global_batch_size=batch)
    assert spec.interval(recipe) == interval
    assert spec.eval_points(recipe)[:2] == [interval, 2 * interval]


def test_bert_default_recipe_is_the_reference_s_run_at_the_smallest_rcp_batch():
    """The RCP check judges a default run: its batch is one of the v2.0 RCP batches (none is below 256), and its
    hyperparameters are that RCP's, a run of the reference code (mlperf-logging rcps_bert.json, bert_ref_256)."""
    import json
    from pathlib import Path

    import mlperf_logging

    table = Path(mlperf_logging.__file__).parent / "rcp_checker" / "training_2.0.0" / "rcps_bert.json"
    records = json.loads(table.read_text(encoding="utf-8"))
    recipe = registry.default_recipe("bert", "reference")
    assert recipe.global_batch_size == min(rec["BS"] for rec in records.values()) == 256
    [rcp] = [rec for rec in records.values() if rec["BS"] == recipe.global_batch_size]
    ours = recipe.as_dict() | {"num_warmup_steps": recipe.opt_learning_rate_warmup_steps}
    assert {key: ours[key] for key in rcp["Hyperparams"]} == rcp["Hyperparams"]
