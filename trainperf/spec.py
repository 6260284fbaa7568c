"""The one contract between trainperf's harness and its workloads.

A :class:`BenchmarkSpec` holds the frozen facts of one benchmark at one scale (what MLPerf's rules fix:
metric, target, runs, budget). A :class:`Workload` builds the data, model, optimizer and metric for a
spec. The harness owns the clock, the MLLOG lines and the stopping rule: a workload never reads the
clock and never writes a log line itself.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported lazily so that `trainperf --help` stays fast
    import torch

    from trainperf.harness.dist import DistContext

BENCHMARKS: tuple[str, ...] = ("resnet", "ssd", "maskrcnn", "unet3d", "rnnt", "bert", "dlrm", "minigo")
SCALES: tuple[str, ...] = ("mini", "reference")

# MLPerf Training v2.0 rules, section "Benchmark results": five runs for most benchmarks, ten for the
# noisier ones, forty for unet3d; olympic scoring drops the fastest and slowest (four each for unet3d).
MLPERF_RULESET = "2.0.0"
MAX_INIT_MINUTES = 30.0  # v2.0 rules: untimed initialization may take at most 30 minutes (closed)


@dataclass(frozen=True, kw_only=True)
class BenchmarkSpec:
    """Frozen facts of one benchmark at one scale.

    ``target`` is the quality the run must reach; ``higher_is_better`` says whether the metric must be
    at least (accuracy, mAP, AUC) or at most (WER) the target.
    """

    key: str
    scale: str
    model: str
    dataset: str
    metric: str
    target: float
    higher_is_better: bool = True
    runs_required: int
    runs_dropped: int = 1  # dropped at each end by olympic scoring
    eval_every_epochs: float
    max_epochs: float
    max_minutes: float
    max_init_minutes: float = MAX_INIT_MINUTES
    hparam_keys: tuple[str, ...] = ()
    target_source: str = ""  # where the target comes from (rule text or measurement)
    # A metric with several fields (maskrcnn's {"BBOX": .., "SEGM": ..}): every field must reach its own
    # target. The first field is the headline figure of curves and charts, and ``target`` is its target.
    field_targets: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        if self.key not in BENCHMARKS:
            raise ValueError(f"unknown benchmark {self.key!r}")
        if self.scale not in SCALES:
            raise ValueError(f"unknown scale {self.scale!r}")
        if self.runs_required <= 2 * self.runs_dropped:
            raise ValueError("olympic scoring needs more runs than it drops")
        if self.eval_every_epochs <= 0 or self.max_epochs < self.eval_every_epochs:
            raise ValueError("eval cadence must be positive and within the epoch budget")
        if self.field_targets and self.field_targets[0][1] != self.target:
            raise ValueError("the target of a multi-field metric is its first field's target")

    def _meets(self, value: float, target: float) -> bool:
        if math.isnan(value):
            return False
        return value >= target if self.higher_is_better else value <= target

    def reached(self, value: float | dict[str, float]) -> bool:
        """Whether a quality figure (or, for a multi-field metric, every field of it) meets the target."""
        if self.field_targets:
            if not isinstance(value, dict):
                return False
            return all(self._meets(float(value.get(f, math.nan)), t) for f, t in self.field_targets)
        return self._meets(float(value), self.target)

    def headline(self, value: float | dict[str, float]) -> float:
        """The one number that curves and charts show: the value, or a multi-field metric's first field."""
        if isinstance(value, dict):
            name = self.field_targets[0][0] if self.field_targets else next(iter(value), None)
            return float(value.get(name, math.nan))
        return float(value)

    @property
    def target_text(self) -> str:
        op = ">=" if self.higher_is_better else "<="
        if self.field_targets:
            return " and ".join(f"{name} {self.metric} {op} {t:g}" for name, t in self.field_targets)
        return f"{self.metric} {op} {self.target:g}"


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """What the user chose for one run (everything else comes from the spec and the workload)."""

    seed: int
    dry_run: bool = False
    division: str = "open"
    overrides: dict[str, Any] = field(default_factory=dict)


ProgressFn = Callable[[int, float], None]  # (samples just processed, loss) -> None


class Workload(abc.ABC):
    """Builds data, model, optimizer and metric for a spec; trains and evaluates when asked.

    Subclasses define ``SPECS`` (scale -> spec) and the abstract methods. The default training block is
    a number of optimizer steps drawn from an endless stream of epochs; a workload whose block is not
    an epoch over a dataset (minigo's self-play generations) overrides :meth:`train_steps`.
    """

    SPECS: dict[str, BenchmarkSpec] = {}
    CLOSED_RULES: dict[str, dict[str, Any]] = {}  # scale -> recipe key -> rule (trainperf.rules.closed)

    @classmethod
    def default_recipe(cls, scale: str) -> dict[str, Any]:
        """The default hyperparameters at a scale (the keys ``--set`` may change)."""
        return {}

    def __init__(
        self,
        spec: BenchmarkSpec,
        config: RunConfig,
        *,
        data_dir: Path,
        dist: DistContext,
    ) -> None:
        self.spec = spec
        self.config = config
        self.data_dir = data_dir
        self.dist = dist
        self.device = dist.device
        self._stream: Iterator[Any] | None = None

    # --- what every workload provides -------------------------------------------------------------
    @abc.abstractmethod
    def prepare(self) -> None:
        """Untimed initialization: open and validate the dataset (never touch training samples)."""

    @abc.abstractmethod
    def build_model(self) -> torch.nn.Module: ...

    @abc.abstractmethod
    def build_optimizer(self, model: torch.nn.Module) -> tuple[Any, Any]:
        """(optimizer, per-step LR scheduler or None)."""

    @abc.abstractmethod
    def train_loader(self, epoch: int) -> Iterable[Any]:
        """Batches of one training epoch, this rank's shard, shuffled by (seed, epoch)."""

    @abc.abstractmethod
    def train_step(self, model: torch.nn.Module, batch: Any, optimizer: Any) -> torch.Tensor:
        """One optimizer step; returns the loss."""

    @abc.abstractmethod
    def evaluate(self, model: torch.nn.Module) -> float:
        """The quality metric on the whole evaluation set (reduced over ranks)."""

    @abc.abstractmethod
    def hparams(self) -> dict[str, Any]:
        """MLLOG hyperparameter keys and values; must cover ``spec.hparam_keys``."""

    @abc.abstractmethod
    def synthetic_batch(self) -> Any:
        """A fake batch of the real shape, for smoke tests and dry runs."""

    @property
    @abc.abstractmethod
    def global_batch_size(self) -> int: ...

    @property
    @abc.abstractmethod
    def steps_per_epoch(self) -> int: ...

    @property
    @abc.abstractmethod
    def train_samples(self) -> int: ...

    @property
    @abc.abstractmethod
    def eval_samples(self) -> int: ...

    # --- the default training block ---------------------------------------------------------------
    def _batches(self) -> Iterator[Any]:
        epoch = 0
        while True:
            yield from self.train_loader(epoch)
            epoch += 1

    def train_steps(
        self, model: torch.nn.Module, optimizer: Any, scheduler: Any, steps: int, progress: ProgressFn
    ) -> float:
        """Run ``steps`` optimizer steps continuing the epoch stream; returns the mean loss."""
        if self._stream is None:
            self._stream = self._batches()
        model.train()
        total = 0.0
        for _ in range(steps):
            batch = next(self._stream)
            loss = self.train_step(model, batch, optimizer)
            if scheduler is not None:
                scheduler.step()
            value = float(loss.detach())
            total += value
            progress(self.global_batch_size, value)
        return total / max(steps, 1)
