"""The one contract between trainperf's harness and its workloads: the facts.

A :class:`Benchmark` is pure data, registered in ``trainperf/workloads/<key>/__init__.py``: its
:class:`BenchmarkSpec` at each scale (what MLPerf's rules fix: metric, target, runs, progress unit,
evaluation schedule, budget), its default :class:`Recipe` at each scale, its closed-division rules, how
its mini data is prepared, the tiny real-format fixture of its reference smoke run, and where its workload
lives (imported lazily, so that reading the facts never imports torch). :class:`RunConfig` is what the user
chose for one run.

The :class:`~trainperf.contract.workload.Workload` a benchmark implements (data, model, optimizer, the loss of
a batch, the quality of a model) is in ``trainperf/contract/workload.py``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from trainperf.contract.switches import Switches
from trainperf.seeds import SOURCE_FIXED

SCALES: tuple[str, ...] = ("mini", "reference")
MLPERF_RULESET = "2.0.0"
MAX_INIT_MINUTES = 30.0  # v2.0 rules: untimed initialization may take at most 30 minutes (closed)
# A mini run's budget is progress (``max_progress``), so that a slower machine reaches the same targets later; its
# ``max_minutes`` only stops a runaway run (a hung loader, a machine many times slower): 30 minutes is about 15x the
# slowest calibrated mini run (minigo, 126 s) and 3x the whole mini suite on the 2-core CI machine.
MINI_RUNAWAY_MINUTES = 30.0

# Progress units. MLPerf's logs count epochs for most benchmarks, samples where the reference does
# (its ``epoch_num`` metadata then holds a sample count), and generations for reinforcement learning.
EPOCHS, SAMPLES, GENERATIONS = "epochs", "samples", "generations"
UNITS: tuple[str, ...] = (EPOCHS, SAMPLES, GENERATIONS)


# --- recipes ------------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Recipe:
    """Hyperparameters of one benchmark at one scale; each benchmark subclasses it with its own fields.

    The two fields here belong to the harness's step: micro-batches summed into one optimizer step, and
    the global gradient-norm clip (0: none).
    """

    # Text fields with a fixed set of values the workload implements (a field named opt_name that is not listed
    # here takes its default only: the workload builds that one optimizer, and logging another would be false).
    CHOICES: ClassVar[Mapping[str, tuple[str, ...]]] = {}

    gradient_accumulation_steps: int = 1
    clip_grad_norm: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def with_overrides(self, overrides: Mapping[str, Any]) -> Recipe:
        """A copy with ``--set`` values applied; unknown keys and values of the wrong kind are refused."""
        from trainperf.errors import UsageError

        defaults = self.as_dict()
        changed = {}
        for key, value in overrides.items():
            if key not in defaults:
                raise UsageError(
                    f"--set {key}: this recipe has no hyperparameter {key!r}; "
                    f"its keys are {', '.join(sorted(defaults))}"
                )
            changed[key] = _coerce(key, value, defaults[key])
        new = dataclasses.replace(self, **changed)
        if new.gradient_accumulation_steps < 1:
            raise UsageError("--set gradient_accumulation_steps: must be a whole number >= 1")
        for key, value in changed.items():
            _check_range(key, value, defaults[key], type(self).CHOICES.get(key))
        return new


MAX_BATCH = 2**24  # samples a step (16.8 M): far above the batch of any MLPerf recipe


def _check_range(key: str, value: Any, default: Any, choices: tuple[str, ...] | None) -> None:
    """The constraints a value's MLLOG key names, checked before anything runs or is written: batch sizes are
    whole numbers from 1 to MAX_BATCH, learning rates, weight decays, epochs and step counts are not negative,
    and a choice (an optimizer's name) is one the workload implements."""
    from trainperf.errors import UsageError

    def refuse(what: str) -> UsageError:
        return UsageError(f"--set {key}={json.dumps(value)}: {what}; the default recipe has {json.dumps(default)}")

    if key.endswith("batch_size") and isinstance(value, int) and not 1 <= value <= MAX_BATCH:
        raise refuse(f"a batch size is a whole number from 1 to {MAX_BATCH:,}")
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    words = ("learning_rate", "weight_decay", "epochs", "steps", "momentum", "clip_grad_norm")
    if numeric and value < 0 and any(w in key for w in words):
        raise refuse("it cannot be negative")
    if key == "opt_name" or choices is not None:
        allowed = choices or (default,)
        if value not in allowed:
            raise refuse(f"this workload implements {', '.join(map(repr, allowed))} only")


def _coerce(key: str, value: Any, default: Any) -> Any:
    """``value`` in the kind of ``default`` (an int where a float belongs is fine; text is not)."""
    from trainperf.errors import UsageError

    def bad() -> UsageError:
        return UsageError(f"--set {key}={json.dumps(value)}: expected a value like the default {json.dumps(default)}")

    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise bad()
        return value
    if isinstance(default, int | float) and not isinstance(default, bool):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad()
        if not math.isfinite(value):
            raise bad()
        if isinstance(default, int) and not isinstance(value, int):
            if value != int(value):
                raise bad()
            value = int(value)
        return float(value) if isinstance(default, float) else value
    if isinstance(default, tuple | list):
        if not isinstance(value, list | tuple):
            raise bad()
        return type(default)(value)
    if isinstance(default, dict):
        if not isinstance(value, dict):
            raise bad()
        return value
    if isinstance(default, str) and not isinstance(value, str):
        raise bad()
    return value


# --- specs --------------------------------------------------------------------------------------------
# A figure of the evaluation schedule computed from the recipe: MLPerf BERT's evaluation interval (samples, from the
# batch size), unet3d's first evaluation, interval and non-converged limit (epochs, from the batch size).
RecipeFn = Callable[[Recipe], float]


@dataclass(frozen=True, kw_only=True)
class BenchmarkSpec:
    """Frozen facts of one benchmark at one scale.

    ``target`` is the quality the run must reach; ``higher_is_better`` says whether the metric must be
    at least (accuracy, mAP, AUC) or at most (WER) the target. Progress is counted in ``unit``: the first
    evaluation comes after ``first_eval`` units (default: one interval), then one every
    ``eval_interval`` units, until ``max_progress`` units. Each of the three is a number or a function of
    the recipe (a schedule the rules state in terms of the batch size); read them through :meth:`first`,
    :meth:`interval`, :meth:`budget` and :meth:`eval_points`, which take the run's recipe.
    """

    key: str
    scale: str
    model: str
    dataset: str
    metric: str
    target: float
    higher_is_better: bool = True
    # The metric is a fraction from 0 to 1 (accuracy, mAP, AUC, Dice, WER); False: a loss or log-perplexity, any
    # number from 0 up.
    metric_is_fraction: bool = True
    # A metric with several fields (such as {"BBOX": .., "SEGM": ..}): every field must reach its own
    # target. The first field is the headline figure of curves and charts, and ``target`` is its target.
    field_targets: tuple[tuple[str, float], ...] = ()
    runs_required: int
    runs_dropped: int = 1  # dropped at each end by olympic scoring
    unit: str = EPOCHS
    eval_interval: float | RecipeFn
    first_eval: float | RecipeFn | None = None
    max_progress: float | RecipeFn  # the budget, in ``unit``: a run that reaches the target within it succeeds
    max_minutes: float  # a wall-clock guard: a run still short of its target after it stops ("runaway guard")
    max_init_minutes: float = MAX_INIT_MINUTES
    hparam_keys: tuple[str, ...] = ()
    target_source: str = ""  # where the target comes from (rule text or measurement)
    # Bootstrap standard error over evaluation samples of the headline metric, measured at the target by
    # benchmarks/metric_error.py (the workload's README says how); None: not measured.
    metric_se: float | None = None
    # Keys an official rule file asks for beside eval_accuracy, each logged with the same value and metadata at every
    # evaluation (a round's open file naming the metric otherwise).
    eval_logged_also_as: tuple[str, ...] = ()
    # Added to the epoch_num of every evaluation, as MLPerf asks the benchmark to report epochs for its RCPs
    # (training_rules.adoc, "To extract submission convergence points": DLRM "1 + Epoch / 20.0 (1.05, 1.1,
    # 1.15...)"); progress itself is counted from 0.
    epoch_num_offset: float = 0.0
    available: bool = True  # False: the workload does not run at this scale yet (`trainperf list` says so)
    # Non-empty: only a dry run works at this scale yet, and this says why (`trainperf list` marks it not
    # available; a timed or smoke run is refused with this reason before anything runs).
    dry_run_only: str = ""
    # The data set's sizes before it is read (logged by a dry run, which reads none; a real run logs what it read):
    # training and evaluation samples as the reference counts them; 0: counted only when the data is read.
    train_samples: int = 0
    eval_samples: int = 0
    # Parameters whose gradients are all-reduced each step (the scaling model's gradient size; a sharded
    # embedding table is exchanged otherwise, so it is left out); None: not stated.
    allreduced_parameters: int | None = None

    def __post_init__(self) -> None:
        if self.scale not in SCALES:
            raise ValueError(f"{self.key}: unknown scale {self.scale!r}")
        if self.unit not in UNITS:
            raise ValueError(f"{self.key}: unknown progress unit {self.unit!r}; one of {UNITS}")
        if self.runs_required <= 2 * self.runs_dropped:
            raise ValueError(f"{self.key}: olympic scoring needs more runs than it drops")
        # Figures that are functions of the recipe are checked when a run's schedule is computed (eval_points).
        budget = self.max_progress if isinstance(self.max_progress, int | float) else math.inf
        if isinstance(self.max_progress, int | float) and not self.max_progress > 0:
            raise ValueError(f"{self.key}: the progress budget must be positive")
        if isinstance(self.eval_interval, int | float) and not 0 < self.eval_interval <= budget:
            raise ValueError(f"{self.key}: the evaluation interval must be positive and within the budget")
        if isinstance(self.first_eval, int | float) and not 0 < self.first_eval <= budget:
            raise ValueError(f"{self.key}: the first evaluation must be positive and within the budget")
        if self.field_targets and self.field_targets[0][1] != self.target:
            raise ValueError(f"{self.key}: the target of a multi-field metric is its first field's target")
        if self.metric_se is not None and not (math.isfinite(self.metric_se) and self.metric_se > 0):
            raise ValueError(f"{self.key}: the metric's standard error must be a positive number or None")
        if self.train_samples < 0 or self.eval_samples < 0:
            raise ValueError(f"{self.key}: the data set's sizes cannot be negative")
        if self.allreduced_parameters is not None and self.allreduced_parameters <= 0:
            raise ValueError(f"{self.key}: the all-reduced parameter count must be positive or None")

    # --- quality --------------------------------------------------------------------------------------
    @property
    def fields(self) -> tuple[tuple[str, float], ...]:
        """(field, target) pairs that evaluation returns; a one-field metric's field is its name."""
        return self.field_targets or ((self.metric, self.target),)

    def _meets(self, value: float, target: float) -> bool:
        if math.isnan(value):
            return False
        return value >= target if self.higher_is_better else value <= target

    def _as_mapping(self, value: Mapping[str, float] | float) -> Mapping[str, float]:
        """An evaluation, or a logged ``eval_accuracy`` value (a number stands for the metric's one field)."""
        if isinstance(value, Mapping):
            return value
        return {self.metric: float(value)} if isinstance(value, int | float) else {}

    def reached(self, value: Mapping[str, float] | float) -> bool:
        """Whether every field of an evaluation (or a logged value) meets its target."""
        mapping = self._as_mapping(value)
        return all(self._meets(float(mapping.get(f, math.nan)), t) for f, t in self.fields)

    def headline(self, value: Mapping[str, float] | float) -> float:
        """The one number that curves and charts show: the first field."""
        return float(self._as_mapping(value).get(self.fields[0][0], math.nan))

    def logged_value(self, value: Mapping[str, float]) -> float | dict[str, float]:
        """What ``eval_accuracy`` carries: a number, or an object for a multi-field metric (as MLPerf logs it)."""
        if self.field_targets:
            return {f: float(value[f]) for f, _ in self.field_targets}
        return float(value[self.metric])

    @property
    def target_text(self) -> str:
        op = ">=" if self.higher_is_better else "<="
        if self.field_targets:
            return " and ".join(f"{name} {self.metric} {op} {t:g}" for name, t in self.field_targets)
        return f"{self.metric} {op} {self.target:g}"

    @property
    def metric_se_text(self) -> str:
        """The measured standard error of the headline metric ("—" when not measured); a multi-field
        metric names the field it belongs to."""
        if self.metric_se is None:
            return "—"
        return f"{self.metric_se:.2g}" + (f" ({self.fields[0][0]})" if self.field_targets else "")

    # --- the evaluation schedule -----------------------------------------------------------------------
    def _figure(self, what: str, value: float | RecipeFn, recipe: Recipe) -> float:
        got = value(recipe) if callable(value) else value
        if isinstance(got, bool) or not isinstance(got, int | float) or not (math.isfinite(got) and got > 0):
            raise ValueError(f"{self.key}: the {what} came out as {got!r}; it must be positive")
        return float(got)

    def interval(self, recipe: Recipe) -> float:
        """Progress between two evaluations for this recipe."""
        return self._figure("evaluation interval", self.eval_interval, recipe)

    def first(self, recipe: Recipe) -> float:
        """Progress at the first evaluation for this recipe (one interval when ``first_eval`` is None)."""
        if self.first_eval is None:
            return self.interval(recipe)
        return self._figure("first evaluation", self.first_eval, recipe)

    def budget(self, recipe: Recipe) -> float:
        """Progress after which a run short of its target stops, not converged, for this recipe."""
        return self._figure("progress budget", self.max_progress, recipe)

    def eval_points(self, recipe: Recipe) -> list[float]:
        """Progress (in ``unit``) at which the run evaluates; the last is the budget."""
        step, first, budget = self.interval(recipe), self.first(recipe), self.budget(recipe)
        if first > budget + 1e-9:
            raise ValueError(f"{self.key}: the first evaluation ({first:g}) comes after the budget ({budget:g})")
        points, k = [], 0
        while first + k * step < budget - 1e-9:
            points.append(first + k * step)
            k += 1
        return [*points, budget]


# --- the benchmark: pure data -------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class MiniData:
    """How a benchmark's mini data is built and checked; functions named ``"module:function"``.

    ``prepare(data_dir) -> list[Path]`` writes the files (idempotent); ``verify(data_dir) -> list[str]``
    lists problems. ``needs`` names benchmarks whose mini data must be prepared first (two benchmarks
    that share a dataset register the same ``MiniData``).
    """

    description: str
    prepare: str
    verify: str
    fix: str = ""  # what to do when verify finds a problem; "" -> run `trainperf data prepare <key>`
    needs: tuple[str, ...] = ()


@dataclass(frozen=True)
class EpochsAsSamples:
    """See :attr:`Benchmark.rcp_epochs_as_samples`."""

    dataset: int
    first: int
    every: int
    since: str


@dataclass(frozen=True, kw_only=True)
class Benchmark:
    """One benchmark: its facts at every scale, and where its workload lives. No torch here."""

    key: str
    title: str  # what it trains, in a few words ("image classification")
    specs: Mapping[str, BenchmarkSpec]
    recipes: Mapping[str, Recipe] = field(default_factory=dict)
    closed_rules: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # scale -> key -> Rule
    workload: str | None = None  # "trainperf.workloads.<key>.workload:<Class>"; None: not available yet
    mini_data: MiniData | None = None
    # A reference smoke run's fixture: ``"module:function"`` writing a tiny data set in the reference's own
    # on-disk layout under ``<root>/<key>/reference`` (``write(root) -> str``, a one-line description);
    # None: no smoke run yet.
    smoke_fixture: str | None = None
    mlperf_rcps: bool = True  # MLPerf publishes reference convergence points for it
    # The reference evaluates its models after training, off the clock (minigo's eval_models.py plays every
    # generation's model once run_stop is logged): eval_accuracy lines after run_stop belong to such a log,
    # and its result is still the time from run_start to run_stop.
    evaluates_after_run_stop: bool = False
    # The published results (trainperf history): other names of this key, and the round from which the
    # key's task changed under the same name, with what changed (speed-ups restart their baseline there).
    history_aliases: tuple[str, ...] = ()
    history_redefined: tuple[str, str] | None = None
    # The scaling model (trainperf/scaling): non-empty says why it does not cover this benchmark (its work is
    # not steps over a data set, or MLPerf publishes no RCP for it); and a typical per-accelerator batch of the
    # single-node (8-accelerator) closed submissions, for published results, which do not record batch sizes
    # (an assumption, stated in trainperf/scaling/README.md).
    not_scalable: str = ""
    published_batch_per_accelerator: int | None = None
    # The values of opt_name the official v2.0 closed rules accept for it: their rule file then opens
    # training_2.0.0/closed_<key>_<opt_name>.yaml, which exists for these only; (): the rules do not branch on it.
    closed_opt_names: tuple[str, ...] = ()
    # The official rcp_checker's flag that reads samples to converge from train_samples rather than epoch_num
    # ("" : none); review runs it again with the flag when the first check fails.
    rcp_train_samples_flag: str = ""
    # Published logs that count the rules' evaluation schedule in epochs where the rules ask for samples: from
    # ruleset ``since`` on, a result set whose every run evaluates at epochs CEILING(first * dataset / per_epoch), then
    # every CEILING(every * dataset / per_epoch), per_epoch the batch-rounded data set, is read in samples for the RCP
    # check (None: never). Facts of unet3d's v3.1-on rules (KiTS19: 168 cases; first 1000, every 20).
    rcp_epochs_as_samples: EpochsAsSamples | None = None

    def __post_init__(self) -> None:
        for scale, spec in self.specs.items():
            if spec.key != self.key or spec.scale != scale:
                raise ValueError(f"{self.key}: spec {spec.key}/{spec.scale} is registered under {self.key}/{scale}")
        if self.workload is not None:
            missing = [s for s, spec in self.specs.items() if spec.available and s not in self.recipes]
            if missing:
                raise ValueError(f"{self.key}: no recipe for scale(s) {missing}")

    @property
    def rcp_file(self) -> str:
        """The name of its RCP table: MLPerf's (mlperf-logging rcp_checker/training_2.0.0/) and trainperf's mini."""
        return f"rcps_{self.key}.json"

    def available_at(self, scale: str) -> bool:
        return self.workload is not None and scale in self.specs and self.specs[scale].available


# --- one run ------------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """What the user chose for one run (everything else comes from the spec and the recipe)."""

    seed: int
    seed_source: str = SOURCE_FIXED  # or seeds.SOURCE_SYSTEM: drawn from the system's randomness
    dry_run: bool = False
    smoke: bool = False  # a reference smoke run: real loader on a tiny real-format fixture, a few steps, one evaluation
    precision: str = "auto"  # autocast of the training step: auto, fp32, bf16, fp16 (trainperf/harness/precision.py)
    division: str = "open"
    overrides: dict[str, Any] = field(default_factory=dict)
    switches: Switches = field(default_factory=Switches)  # the optimization switches (trainperf/harness/switches.py)
