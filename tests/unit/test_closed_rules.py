"""Closed-division hyperparameter rules: checked before a run, each violation names rule, value and allowed values."""

from __future__ import annotations

import re

import pytest

from trainperf import registry
from trainperf.contract.closed_rules import OneOf, PowerOfTwoTimes, Tunable
from trainperf.errors import RuleError, UsageError
from trainperf.rules.closed import check_overrides, parse_overrides


def check(scale, division, **overrides):
    bench = registry.benchmark("resnet")
    check_overrides("resnet", scale, division, bench.recipes[scale].as_dict(), bench.closed_rules[scale], overrides)


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("lars_opt_end_learning_rate", 0.001, "fixed at 0.0001"),
        ("lars_opt_learning_rate_decay_poly_power", 1, "fixed at 2"),
        ("lars_epsilon", 1e-8, "fixed at 0.0"),
        ("lars_opt_weight_decay", 3e-5, "0.0001 * 2^N"),
        ("label_smoothing", 0.2, "one of 0.0, 0.1"),
        ("opt_name", "sgd", "fixed at 'lars'"),
    ],
)
def test_reference_closed_violations(key, value, allowed):
    with pytest.raises(RuleError) as e:
        check("reference", "closed", **{key: value})
    msg = str(e.value)
    assert f"rule 'resnet/reference/{key}'" in msg and repr(value) in msg and allowed in msg


def test_reference_closed_allows_the_tunable_values():
    check(
        "reference",
        "closed",
        lars_opt_weight_decay=2e-4,
        lars_opt_base_learning_rate=8.0,
        global_batch_size=1024,
        lars_opt_learning_rate_warmup_epochs=3,
        train_epochs=40,
        label_smoothing=0.0,
    )


@pytest.mark.parametrize(("key", "value"), [("opt_weight_decay", 0.1), ("label_smoothing", 0.0), ("opt_name", "sgd")])
def test_mini_closed_violations(key, value):
    with pytest.raises(RuleError, match=f"rule 'resnet/mini/{key}'"):
        check("mini", "closed", **{key: value})


def test_mini_closed_tunables_and_open_anything():
    check("mini", "closed", opt_base_learning_rate=0.003, global_batch_size=256)
    check("mini", "open", opt_weight_decay=0.1, label_smoothing=0.0)


def test_unknown_key_lists_the_recipe_keys():
    with pytest.raises(UsageError, match="no hyperparameter 'lr'.*opt_base_learning_rate"):
        check("mini", "open", lr=0.1)


def test_tunable_numbers_must_be_positive():
    with pytest.raises(RuleError, match="any positive number"):
        check("mini", "closed", opt_base_learning_rate=-1.0)


def test_rule_primitives():
    assert PowerOfTwoTimes(1e-4).allows(5e-5, None) and not PowerOfTwoTimes(1e-4).allows(3e-5, None)
    assert OneOf((1, 2)).allows(2, 1) and not OneOf((1, 2)).allows(3, 1)
    assert Tunable().allows(256, 128) and not Tunable().allows(2.5, 128)


def test_parse_overrides_reads_json_values_never_code():
    assert parse_overrides(["a=0.5", "b=true", "c=lars", "d=__import__('os')"]) == {
        "a": 0.5,
        "b": True,
        "c": "lars",
        "d": "__import__('os')",
    }
    with pytest.raises(UsageError, match="expected KEY=VALUE"):
        parse_overrides(["novalue"])


def test_set_accepts_json_lists_and_objects_where_the_default_is_one():
    assert parse_overrides(["b=[10, 20]", 'o={"x": 1}']) == {"b": [10, 20], "o": {"x": 1}}
    assert Tunable().allows([10, 20], (5, 6)) and not Tunable().allows(["a"], (5, 6))
    with pytest.raises(UsageError, match="finite"):
        parse_overrides(["a=NaN"])


def test_recipe_overrides_are_checked_against_the_default():
    recipe = registry.default_recipe("resnet", "mini")
    assert recipe.with_overrides({"opt_base_learning_rate": 1}).opt_base_learning_rate == 1.0
    assert recipe.with_overrides({"global_batch_size": 64.0}).global_batch_size == 64
    for bad in ({"opt_base_learning_rate": "fast"}, {"global_batch_size": 1.5}, {"label_smoothing": [0.1]}):
        with pytest.raises(UsageError, match="expected a value like the default"):
            recipe.with_overrides(bad)
    with pytest.raises(UsageError, match="no hyperparameter 'lr'"):
        recipe.with_overrides({"lr": 0.1})


# --- rules that the v2.0 training_rules.adoc adds ----------------------------------------------------------
def test_lars_momentum_is_fixed_at_0_9_below_batch_32k():
    with pytest.raises(RuleError) as e:
        check("reference", "closed", lars_opt_momentum=0.95)
    msg = str(e.value)
    assert "rule 'resnet/reference/lars_opt_momentum'" in msg and "0.95" in msg and "global_batch_size=3264" in msg
    with pytest.raises(RuleError, match="lars_opt_momentum"):  # the batch changes, the momentum stays off 0.9
        check("reference", "closed", global_batch_size=16384, lars_opt_momentum=0.93)
    check("reference", "closed", global_batch_size=65536, lars_opt_momentum=0.95)  # from 32k on: any
    check("reference", "closed", global_batch_size=1024)  # the default momentum 0.9 is fine at any batch
    check("reference", "open", lars_opt_momentum=0.95)


def ssd_check(division, **overrides):
    bench = registry.benchmark("ssd")
    rules = bench.closed_rules["reference"]
    check_overrides("ssd", "reference", division, bench.recipes["reference"].as_dict(), rules, overrides)


def test_ssd_warmup_epochs_are_a_whole_number_at_least_0():
    ssd_check("closed", opt_learning_rate_warmup_epochs=0)
    ssd_check("closed", opt_learning_rate_warmup_epochs=3)
    for bad in (1.5, -1):
        with pytest.raises(RuleError, match="rule 'ssd/reference/opt_learning_rate_warmup_epochs'.*whole number >= 0"):
            ssd_check("closed", opt_learning_rate_warmup_epochs=bad)
    assert (
        registry.default_recipe("ssd", "reference").opt_learning_rate_warmup_epochs == 1
    )  # an int, as the reference's


def maskrcnn_check(division, **overrides):
    bench = registry.benchmark("maskrcnn")
    rules = bench.closed_rules["reference"]
    check_overrides("maskrcnn", "reference", division, bench.recipes["reference"].as_dict(), rules, overrides)


def test_maskrcnn_decay_steps_follow_the_batch_by_the_v2_rule():
    from trainperf.workloads.maskrcnn import DECAY_STEPS_RULE

    # (60000, 80000) * (1 + K/10) * 16 / global_batch_size, K an integer; derived with K = 0 by default
    assert registry.default_recipe("maskrcnn", "reference").opt_learning_rate_decay_steps == ()
    assert DECAY_STEPS_RULE.steps(16) == (60000, 80000) and DECAY_STEPS_RULE.steps(64) == (15000, 20000)
    assert DECAY_STEPS_RULE.steps(2) == (480000, 640000)  # the reference's run_and_time.sh at 2 images per step
    maskrcnn_check("closed", global_batch_size=64)  # the derived steps follow
    maskrcnn_check("closed", global_batch_size=64, opt_learning_rate_decay_steps=[16500, 22000])  # K = 1
    maskrcnn_check("closed", global_batch_size=64, opt_learning_rate_decay_steps=[60000, 80000])  # K = 30
    maskrcnn_check("closed", opt_learning_rate_decay_steps=[54000, 72000])  # K = -1 at the default batch 16
    for steps in ([20000, 26667], [20000, 26666]):  # 26666.7: either whole step
        maskrcnn_check("closed", global_batch_size=48, opt_learning_rate_decay_steps=steps)
    for batch, steps in ((64, [15000, 25000]), (16, [60000, 80000, 90000]), (16, [61000, 81333])):
        with pytest.raises(RuleError) as e:
            maskrcnn_check("closed", global_batch_size=batch, opt_learning_rate_decay_steps=steps)
        msg = str(e.value)
        assert "rule 'maskrcnn/reference/opt_learning_rate_decay_steps'" in msg and f"global_batch_size={batch}" in msg
        assert "(60000, 80000) * (1 + K/10) * 16 / global_batch_size" in msg and "K=0: [" in msg
    # steps allowed at one batch (K = -1 at 16) but not at another: checked against the batch given with them
    with pytest.raises(RuleError, match="opt_learning_rate_decay_steps=\\[54000, 72000\\] with global_batch_size=24"):
        maskrcnn_check("closed", global_batch_size=24, opt_learning_rate_decay_steps=[54000, 72000])
    maskrcnn_check("open", global_batch_size=64, opt_learning_rate_decay_steps=[15000, 25000])


def test_maskrcnn_rate_is_0_02_times_k_and_below_16_images_also_0_02_over_k():
    # training_rules.adoc (v2.0): "0.02 * K for any integer K. For global_batch_size < 16, 0.02 / K for any
    # integer K is also allowed"; closed_maskrcnn.yaml: is_integer(v / 0.02) or (gbs < 16 and is_integer(0.02 / v))
    maskrcnn_check("closed", global_batch_size=2, opt_base_learning_rate=0.0025)  # run_and_time.sh: 0.02 / 8
    maskrcnn_check("closed", global_batch_size=8, opt_base_learning_rate=0.01)  # 0.02 / 2
    maskrcnn_check("closed", global_batch_size=15, opt_base_learning_rate=0.0066666667)  # 0.02 / 3, to 1e-5
    maskrcnn_check("closed", global_batch_size=2, opt_base_learning_rate=0.04)  # 0.02 * 2 at any batch
    maskrcnn_check("closed", opt_base_learning_rate=0.14)  # 0.14 / 0.02 = 7.000000000000001: K = 7
    maskrcnn_check("closed", global_batch_size=256, opt_base_learning_rate=0.32)
    maskrcnn_check("closed", global_batch_size=2)  # the default 0.02 = 0.02 * 1 stays allowed
    refused = (
        (16, 0.01),  # 0.02 / K only below 16 images per step
        (32, 0.0025),
        (2, 0.003),  # 0.02 / 0.003 = 6.67 and 0.003 / 0.02 = 0.15: neither whole
        (2, 0.03),  # 1.5 and 0.67
        (2, 0.0067),  # 0.02 / 3 to four places: 2.985, off by more than the checker's 1e-5
        (2, 0.0),  # K = 0 and K < 0 do not train
        (2, -0.02),
        (2, 5000.001),  # 0.02 / 5000.001 is within 1e-5 of 0, but no integer K >= 1 gives it
    )
    for batch, rate in refused:
        with pytest.raises(RuleError) as e:
            maskrcnn_check("closed", global_batch_size=batch, opt_base_learning_rate=rate)
        msg = str(e.value)
        assert "rule 'maskrcnn/reference/opt_base_learning_rate'" in msg and f"global_batch_size={batch}" in msg
        assert "0.02 * K for an integer K >= 1" in msg and "0.02 / K" in msg
    with pytest.raises(RuleError, match="opt_base_learning_rate=0.0025 with global_batch_size=16"):
        maskrcnn_check("closed", opt_base_learning_rate=0.0025)  # the recipe's batch, 16, is not below 16
    maskrcnn_check("open", opt_base_learning_rate=0.003)


def test_maskrcnn_warmup_steps_from_0_and_any_positive_warmup_factor():
    # closed_maskrcnn.yaml: warmup_steps >= 0, warmup_factor > 0 (training_rules.adoc: both unconstrained)
    for steps in (0, 1, 1000):
        maskrcnn_check("closed", opt_learning_rate_warmup_steps=steps)
    for bad in (-1, 2.5):
        with pytest.raises(
            RuleError, match="rule 'maskrcnn/reference/opt_learning_rate_warmup_steps'.*whole number >= 0"
        ):
            maskrcnn_check("closed", opt_learning_rate_warmup_steps=bad)
    for factor in (0.001, 1.0, 2.0):
        maskrcnn_check("closed", opt_learning_rate_warmup_factor=factor)
    for bad in (0.0, -0.5):
        with pytest.raises(RuleError, match="rule 'maskrcnn/reference/opt_learning_rate_warmup_factor'"):
            maskrcnn_check("closed", opt_learning_rate_warmup_factor=bad)


def test_maskrcnn_keeps_1000_candidates_per_image_and_the_fixed_keys():
    # training_rules.adoc: num_image_candidates "1000 or 1000 * batches per chip", counted over a chip's batch
    # (the reference's FPN_POST_NMS_TOP_N_TRAIN); trainperf counts per image, where that is 1000
    maskrcnn_check("closed", num_image_candidates=1000)
    fixed = {
        "num_image_candidates": 2000,
        "opt_learning_rate_decay_factor": 0.2,  # "fixed to reference (0.1)"
        "min_image_size": 640,  # "fixed to reference"
        "max_image_size": 1024,
        "opt_momentum": 0.95,  # not in the table: fixed
        "opt_weight_decay": 5e-5,
        "opt_name": "adamw",
    }
    for key, value in fixed.items():
        with pytest.raises(RuleError, match=f"rule 'maskrcnn/reference/{key}'.*fixed at"):
            maskrcnn_check("closed", **{key: value})
    maskrcnn_check("open", num_image_candidates=2000)


def test_maskrcnn_closed_division_takes_the_msra_backbone_only():
    maskrcnn_check("closed", backbone_checkpoint="/weights/R-50.pkl")  # any path to it
    with pytest.raises(RuleError, match=r"rule 'maskrcnn/reference/backbone_init'.*fixed at 'R-50.pkl'"):
        maskrcnn_check("closed", backbone_init="random")
    maskrcnn_check("open", backbone_init="random")
    for key in ("opt_bias_learning_rate_factor", "opt_weight_decay_bias"):
        with pytest.raises(RuleError, match=f"rule 'maskrcnn/reference/{key}'"):
            maskrcnn_check("closed", **{key: 1.0 if "factor" in key else 1e-4})


@pytest.mark.parametrize(
    ("key", "scale", "override", "words"),
    [
        ("resnet", "mini", {"global_batch_size": -128}, "a batch size is a whole number from 1 to"),
        ("resnet", "mini", {"global_batch_size": 10**15}, "a batch size is a whole number from 1 to"),
        ("dlrm", "mini", {"global_batch_size": 0}, "a batch size is a whole number from 1 to"),
        ("resnet", "mini", {"opt_name": "sgd"}, "implements 'adamw' only"),
        ("unet3d", "mini", {"opt_name": "rmsprop"}, "implements 'sgd', 'adam' only"),
        ("rnnt", "mini", {"opt_base_learning_rate": -0.01}, "cannot be negative"),
        ("bert", "mini", {"opt_lamb_weight_decay_rate": -1.0}, "cannot be negative"),
    ],
)
def test_set_values_out_of_the_recipes_range_are_refused_before_the_run(key, scale, override, words):
    with pytest.raises(UsageError, match=re.escape(words)):
        registry.default_recipe(key, scale).with_overrides(override)


def test_set_values_in_range_and_each_implemented_choice_are_accepted():
    assert registry.default_recipe("unet3d", "mini").with_overrides({"opt_name": "sgd"}).opt_name == "sgd"
    assert registry.default_recipe("dlrm", "mini").with_overrides({"opt_name": "sgd"}).opt_name == "sgd"
    assert registry.default_recipe("resnet", "mini").with_overrides({"global_batch_size": 64}).global_batch_size == 64


def test_unet3d_closed_reference_takes_sgd_only():
    """v2.0 rules, "Allowed Closed Division Optimizers": image segmentation (medical) is SGD with momentum; the mini
    scale's closed rules keep its Adam recipe and the reference's SGD."""
    bench = registry.benchmark("unet3d")

    def unet3d_check(scale, division, **overrides):
        defaults = bench.recipes[scale].as_dict()
        check_overrides("unet3d", scale, division, defaults, bench.closed_rules[scale], overrides)

    with pytest.raises(RuleError, match=r"rule 'unet3d/reference/opt_name'.*one of 'sgd'"):
        unet3d_check("reference", "closed", opt_name="adam")
    unet3d_check("reference", "closed", opt_name="sgd", global_batch_size=32, opt_base_learning_rate=4.0)
    unet3d_check("reference", "open", opt_name="adam")
    unet3d_check("mini", "closed", opt_name="sgd")


def _reference_check(key, division="closed", **overrides):
    bench = registry.benchmark(key)
    rules = bench.closed_rules["reference"]
    check_overrides(key, "reference", division, bench.recipes["reference"].as_dict(), rules, overrides)


def test_resnet_warmup_epochs_are_an_arbitrary_constant():
    """v2.0 hyperparameter table: lars_opt_learning_rate_warmup_epochs "arbitrary constant" (the reference's
    --warmup_epochs is a float flag): no warm-up and a fraction of an epoch are closed values."""
    for value in (0, 2.5, 5):
        _reference_check("resnet", lars_opt_learning_rate_warmup_epochs=value)
    assert registry.default_recipe("resnet", "reference").with_overrides(
        {"lars_opt_learning_rate_warmup_epochs": 2.5}
    ).lars_opt_learning_rate_warmup_epochs == pytest.approx(2.5)
    with pytest.raises(RuleError, match="rule 'resnet/reference/lars_opt_learning_rate_warmup_epochs'.*number >= 0"):
        _reference_check("resnet", lars_opt_learning_rate_warmup_epochs=-1.0)


def test_ssd_warmup_factor_is_unconstrained_from_0():
    """v2.0 hyperparameter table: ssd opt_learning_rate_warmup_factor "unconstrained"."""
    _reference_check("ssd", opt_learning_rate_warmup_factor=0.0)
    _reference_check("ssd", opt_learning_rate_warmup_factor=0.5)
    with pytest.raises(RuleError, match="rule 'ssd/reference/opt_learning_rate_warmup_factor'.*number >= 0"):
        _reference_check("ssd", opt_learning_rate_warmup_factor=-0.1)


@pytest.mark.parametrize(
    "key",
    ["opt_learning_rate_warmup_epochs", "opt_momentum", "opt_weight_decay", "opt_learning_rate_decay_factor"],
)
def test_unet3d_unconstrained_keys_take_0(key):
    """v2.0 hyperparameter table: unet3d's warm-up, momentum, weight decay and decay factor are "unconstrained"."""
    _reference_check("unet3d", **{key: 0})
    with pytest.raises(RuleError, match=f"rule 'unet3d/reference/{key}'.*>= 0"):
        _reference_check("unet3d", **{key: -1})


def test_unet3d_momentum_0_builds_plain_sgd(tmp_path):
    """Momentum 0, a closed value, trains: torch refuses Nesterov without momentum, where its update is SGD's."""
    import torch

    from trainperf.dist import DistContext
    from trainperf.spec import RunConfig

    spec = registry.get_spec("unet3d", "reference")
    recipe = registry.default_recipe("unet3d", "reference").with_overrides({"opt_momentum": 0.0})
    w = registry.workload_class("unet3d")(spec, recipe, RunConfig(seed=1), data_dir=tmp_path, dist=DistContext())
    opt, _ = w.build_optimizer(torch.nn.Linear(2, 2))
    assert isinstance(opt, torch.optim.SGD) and opt.defaults["nesterov"] is False
    assert opt.defaults["momentum"] == 0.0
