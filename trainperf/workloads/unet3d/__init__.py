"""unet3d: medical image segmentation (MLPerf: 3D U-Net on KiTS19; mini: generated KiTS19-layout phantoms).

reference: the MLPerf v2.0 reference 3D U-Net (31,190,243 parameters) on KiTS19, SGD with Nesterov momentum,
the reference's learning-rate schedule and augmentations, mean Dice of kidney and tumour >= 0.908 by
Gaussian-weighted sliding-window evaluation on the rules' schedule for the batch size. mini: a smaller 3D U-Net of the
same code on generated abdominal phantoms in
the KiTS19 layout, its target calibrated by measurement (README.md beside this file). Pure data: no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from trainperf.contract.closed_rules import AtLeast, OneOf, Tunable
from trainperf.spec import EPOCHS, MINI_RUNAWAY_MINUTES, Benchmark, BenchmarkSpec, EpochsAsSamples, MiniData, Recipe

# The v2.0 hyperparameter keys of closed_unet3d.yaml (global_batch_size, train_samples and eval_samples are
# logged by the harness), and the initial rate of the warm-up.
HPARAM_KEYS = (
    "opt_name",
    "opt_base_learning_rate",
    "opt_initial_learning_rate",
    "opt_learning_rate_warmup_epochs",
    "opt_learning_rate_decay_boundary_epochs",
    "opt_learning_rate_decay_factor",
    "opt_weight_decay",
    "opt_momentum",
    "oversampling",
    "training_input_shape",
    "validation_input_shape",
    "validation_overlap",
)


@dataclass(frozen=True, kw_only=True)
class UNet3DRecipe(Recipe):
    """The reference's flags (runtime/arguments.py): SGD with Nesterov momentum (or Adam), a linear warm-up
    per epoch from ``opt_initial_learning_rate``, step decay at boundary epochs, foreground oversampling."""

    # the optimizers build_optimizer makes
    CHOICES: ClassVar[Mapping[str, tuple[str, ...]]] = {"opt_name": ("sgd", "adam")}

    global_batch_size: int
    opt_name: str = "sgd"
    opt_base_learning_rate: float
    opt_initial_learning_rate: float = 1e-4
    opt_learning_rate_warmup_epochs: int = 0
    opt_learning_rate_decay_boundary_epochs: tuple[int, ...] = ()
    opt_learning_rate_decay_factor: float = 1.0
    opt_weight_decay: float = 0.0
    opt_momentum: float = 0.9
    oversampling: float = 0.4
    training_input_shape: tuple[int, int, int] = (128, 128, 128)
    validation_input_shape: tuple[int, int, int] = (128, 128, 128)
    validation_overlap: float = 0.5


# --- the reference scale's evaluation schedule: MLPerf Training v2.0 rules (training_rules.adoc, "Quality measure"
# and "Benchmark Results"), in epochs of the reference's data loader (168 cases, the last partial batch dropped).
RULES_TRAIN_CASES = 168  # the rules' 168: KiTS19's training cases


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def samples_per_epoch(recipe: Recipe) -> int:
    """The rules' ``samples_per_epoch``: "the last batch is padded", ``CEILING(168/global_batch_size) *
    global_batch_size`` (168 at batch 2, 7 or 56; 192 at batch 32)."""
    batch = recipe.global_batch_size
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"unet3d: global_batch_size {batch!r} must be a whole number >= 1")
    return _ceil_div(RULES_TRAIN_CASES, batch) * batch


def first_eval_epoch(recipe: Recipe) -> float:
    """The first evaluation: ``CEILING(1000*168/samples_per_epoch)`` epochs (1000 at batch 2, 875 at batch 32)."""
    return float(_ceil_div(1000 * RULES_TRAIN_CASES, samples_per_epoch(recipe)))


def eval_every_epochs(recipe: Recipe) -> float:
    """Then every ``CEILING(20*168/samples_per_epoch)`` epochs (20 at batch 2, 18 at batch 32)."""
    return float(_ceil_div(20 * RULES_TRAIN_CASES, samples_per_epoch(recipe)))


def non_converged_epochs(recipe: Recipe) -> float:
    """A run short of the target after ``CEILING(10000*168/samples_in_epoch)`` epochs is not converged
    (10000 at batch 2, 8750 at batch 32)."""
    return float(_ceil_div(10000 * RULES_TRAIN_CASES, samples_per_epoch(recipe)))


def budget_epochs(recipe: Recipe) -> float:
    """The run's budget: the last evaluation of the schedule within the non-converged limit (10000 at batch 2,
    8741 at batch 32, whose next evaluation, 8759, is past the limit of 8750). Stopping there is the rules'
    verdict, and it adds no evaluation off the schedule."""
    first, every, limit = first_eval_epoch(recipe), eval_every_epochs(recipe), non_converged_epochs(recipe)
    return first + (limit - first) // every * every


# The v2.0 reference's run (run_and_time.sh): batch 2, learning rate 0.8, 200 warm-up epochs, no decay.
REFERENCE_RECIPE = UNet3DRecipe(global_batch_size=2, opt_base_learning_rate=0.8, opt_learning_rate_warmup_epochs=200)
# Mini recipe (README.md): the reference's optimizer and schedule shape on 32^3 patches.
MINI_RECIPE = UNet3DRecipe(
    global_batch_size=4,
    opt_name="adam",
    opt_base_learning_rate=0.003,
    opt_learning_rate_decay_boundary_epochs=(16,),
    opt_learning_rate_decay_factor=0.25,
    training_input_shape=(32, 32, 32),
    validation_input_shape=(32, 32, 32),
)

REFERENCE = BenchmarkSpec(
    key="unet3d",
    scale="reference",
    model="3D U-Net (MLPerf v2.0 reference, filters 32-64-128-256-320; 31,190,243 parameters)",
    dataset="KiTS19 (case_<5 digits>/imaging.nii.gz, segmentation.nii.gz, or the reference's *_x.npy/*_y.npy; "
    "168 train / 42 eval cases)",
    metric="mean_dice",
    target=0.908,  # MLPerf Training v2.0 rules, closed_unet3d.yaml: eval_accuracy >= 0.908
    runs_required=40,  # v2.0 "Benchmark results": 40 runs, 4 fastest and 4 slowest dropped
    runs_dropped=4,
    unit=EPOCHS,  # an epoch: 168 // batch steps over the 168 training cases (the last partial batch dropped)
    # The rules' schedule for the recipe's batch size (above); at the reference's batch 2: from epoch 1000 every 20
    # (run_and_time.sh: START_EVAL_AT=1000, EVALUATE_EVERY=20), not converged after 10000 (run_and_time.sh stops
    # at MAX_EPOCHS=4000; the rules' limit is the larger).
    first_eval=first_eval_epoch,
    eval_interval=eval_every_epochs,
    max_progress=budget_epochs,
    max_minutes=24 * 60.0,
    hparam_keys=HPARAM_KEYS,
    target_source="MLPerf Training v2.0 rules (closed_unet3d.yaml); "
    "evaluation schedule from the rules (training_rules.adoc)",
    train_samples=RULES_TRAIN_CASES,
    eval_samples=42,  # KiTS19's evaluation cases in the reference's split
    allreduced_parameters=31_190_243,  # README.md
)

MINI = BenchmarkSpec(
    key="unet3d",
    scale="mini",
    model="MiniUNet3D: the reference 3D U-Net with filters 8-16-32-64 (1 input channel, 3 classes)",
    dataset="generated abdominal CT phantoms in the KiTS19 layout (NIfTI; 48 train / 16 eval cases)",
    metric="mean_dice",
    target=0.78,  # calibrated: README.md (10 calibration seeds; untrained model far below)
    runs_required=10,  # the reference's 40 runs dropping 4 at each end, scaled: 10 runs dropping 1 at each end
    runs_dropped=1,
    unit=EPOCHS,
    first_eval=12.0,
    eval_interval=4.0,
    max_progress=200.0,
    max_minutes=MINI_RUNAWAY_MINUTES,  # a runaway guard only: the budget is max_progress
    hparam_keys=HPARAM_KEYS,
    target_source="measured: README.md beside unet3d/workload.py",
    # benchmarks/metric_error.py unet3d: mean Dice 0.8532 at epoch 16, seed 100001, B = 200 (README.md)
    metric_se=0.019,
    train_samples=48,  # case_00000 - case_00047 (generator.py)
    eval_samples=16,  # case_00048 - case_00063
    allreduced_parameters=937_131,  # README.md
)

_CLOSED = {
    "global_batch_size": Tunable(),
    "opt_base_learning_rate": Tunable(),
    "opt_initial_learning_rate": Tunable(),
    "opt_learning_rate_warmup_epochs": Tunable(),
    "opt_learning_rate_decay_boundary_epochs": Tunable(),
    "opt_learning_rate_decay_factor": Tunable(),
    "opt_momentum": Tunable(),
    "opt_weight_decay": Tunable(),
    "opt_name": OneOf(UNet3DRecipe.CHOICES["opt_name"]),  # the optimizers the workload builds
}
# v2.0 rules, "Appendix: Allowed Closed Division Optimizers": image segmentation (medical) takes SGD with momentum
# (torch.optim.SGD) only, and its hyperparameter table lists the sgd keys only; the mini scale's own rules keep
# its Adam recipe. The table's "unconstrained" warm-up, momentum, weight decay and decay factor take 0 as well
# (no warm-up, plain SGD, no weight decay, a rate of 0 after a boundary); a negative value is none of these.
_CLOSED_REFERENCE = {
    **_CLOSED,
    "opt_name": OneOf(("sgd",)),
    "opt_learning_rate_warmup_epochs": AtLeast(0),
    "opt_learning_rate_decay_factor": AtLeast(0),
    "opt_momentum": AtLeast(0),
    "opt_weight_decay": AtLeast(0),
}

BENCHMARK = Benchmark(
    key="unet3d",
    # v3.1-on logs that count the evaluation schedule in epochs (QCT, xFusion): read in samples for the RCP check
    rcp_epochs_as_samples=EpochsAsSamples(dataset=168, first=1000, every=20, since="3.1.0"),
    title="medical image segmentation",
    # The scaling model's assumption for published results: 8 x 7 = 56 samples a step on one 8-accelerator node.
    published_batch_per_accelerator=7,
    specs={"mini": MINI, "reference": REFERENCE},
    recipes={"mini": MINI_RECIPE, "reference": REFERENCE_RECIPE},
    # Closed division: the optimizer's keys that closed_unet3d.yaml asks to be logged may change (the reference
    # scale's optimizer is SGD); the model, the patch shapes, oversampling and the evaluation's overlap are fixed
    # (the reference's).
    closed_rules={"reference": _CLOSED_REFERENCE, "mini": _CLOSED},
    workload="trainperf.workloads.unet3d.workload:UNet3DWorkload",
    smoke_fixture="trainperf.workloads.unet3d.generator:write_smoke_fixture",
    mini_data=MiniData(
        description="abdominal CT phantoms (kidneys, tumours, noise, bias field, elastic deformation) "
        "as KiTS19 NIfTI cases",
        prepare="trainperf.workloads.unet3d.generator:prepare_mini",
        verify="trainperf.workloads.unet3d.generator:verify_mini",
    ),
)
