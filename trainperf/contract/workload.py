"""The workload half of the contract: the :class:`Workload` a benchmark implements, and the global torch settings
(:class:`TorchState`) it runs under. Its facts (the spec, the recipe, the run's config) are in ``trainperf/spec.py``.

A :class:`Workload` builds the data, model and optimizer for a spec and gives the loss of one batch and
the quality of a model. The harness owns the clock, the MLLOG lines, the stopping rule, the step
(zero_grad, backward, gradient accumulation, clipping, optimizer and scheduler) and the global torch
state: a workload never reads the clock and never writes a log line.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from trainperf.spec import BenchmarkSpec, Recipe, RunConfig

if TYPE_CHECKING:  # torch is imported lazily so that `trainperf list` and `--help` never import it
    import torch

    from trainperf.dist import DistContext


@dataclass(frozen=True, kw_only=True)
class TorchState:
    """Global torch settings a workload runs under; the harness applies them and restores the defaults."""

    flush_denormal: bool = False  # denormal floats flushed to zero (small BERTs are 3-4x faster on CPUs)
    num_threads: int | None = None  # intra-op threads; None: torch's default for this machine


class Workload(abc.ABC):
    """Builds data, model and optimizer for a spec; gives the loss of a batch and the quality of a model.

    The harness calls, in order: ``prepare`` (untimed: files exist and match their manifest; no sample
    is read), ``build_model``, ``parallelize``, then starts the clock, ``load_data`` (parsing and loading,
    timed), ``build_optimizer``, and repeatedly ``loss`` on batches from ``train_batches`` (or, for the
    generations unit, from ``generation_batches``) and ``evaluate``; ``close`` always, at the end.
    """

    TORCH_STATE: ClassVar[TorchState] = TorchState()
    SINGLE_PROCESS: ClassVar[bool] = False  # True: runs in one process only (it may start workers of its own)
    BATCH_FIELD: ClassVar[str] = "global_batch_size"  # the recipe field holding samples per optimizer step
    DRY_RUN_LOCAL_BATCH: ClassVar[int | None] = None  # a reference dry or smoke run's micro-batch per rank (CPU-sized)
    # Optimization switches that do not apply to this workload, each with the reason (logged when one is asked
    # for and left off); names as in trainperf/harness/switches.py (compile, channels_last, ...).
    SWITCHES_NOT_APPLICABLE: ClassVar[Mapping[str, str]] = {}

    def __init__(
        self,
        spec: BenchmarkSpec,
        recipe: Recipe,
        config: RunConfig,
        *,
        data_dir: Path,
        dist: DistContext,
    ) -> None:
        self.spec = spec
        self.recipe: Any = recipe  # the benchmark's Recipe subclass, overrides applied
        self.config = config
        self.data_dir = data_dir
        self.dist = dist
        self.device = dist.device

    @property
    def dry_run(self) -> bool:
        return self.config.dry_run

    @property
    def smoke(self) -> bool:
        """A reference smoke run: the real data path on a tiny fixture (``data_dir`` holds the fixture)."""
        return self.config.smoke

    # --- set-up --------------------------------------------------------------------------------------
    @abc.abstractmethod
    def prepare(self) -> None:
        """Untimed: check that the files exist and match their manifest (never read a training sample)."""

    def load_data(self) -> None:
        """Timed (right after ``run_start``): read, parse and filter the data; sizes are known after it."""
        return None

    @abc.abstractmethod
    def build_model(self) -> torch.nn.Module:
        """The architecture, initialized; placement and wrapping are :meth:`parallelize`'s."""

    def parallelize(self, model: torch.nn.Module) -> torch.nn.Module:
        """Place the model for the process group: DDP when distributed (a workload with sharded tables overrides)."""
        import torch

        model = model.to(self.device)
        if not self.dist.distributed:
            return model
        ids = [self.dist.local_rank] if self.device.type == "cuda" else None
        bucket = self.config.switches.ddp_bucket_mb  # --ddp-bucket-mb; None: DDP's default
        kwargs = {} if bucket is None else {"bucket_cap_mb": bucket}
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids, **kwargs)

    @abc.abstractmethod
    def build_optimizer(self, model: torch.nn.Module) -> tuple[Any, Any]:
        """(optimizer, per-step LR scheduler or None), as the recipe and the closed rules fix them."""

    def clip_gradients(self, model: torch.nn.Module, max_norm: float) -> torch.Tensor:
        """Called by the harness's step where the recipe clips: scale the gradients so that the whole model's norm is
        at most ``max_norm``; returns the norm before clipping. torch's ``clip_grad_norm_`` unless the model keeps
        parameters of its own on each rank beside FSDP's or DDP's (expert parallelism)."""
        import torch

        return torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)

    def reference_tensor_names(self, model: torch.nn.Module) -> list[str]:
        """MLPerf's names of the initialized tensors (``weights_initialization`` lines); [] if none needed."""
        return []

    def parallelism(self) -> dict[str, int]:
        """How the model is split beyond data parallelism (logged where the round requires it): 1 each, unless
        the workload splits its tensors, layers, sequences or experts over ranks."""
        return {"tensor_parallelism": 1, "pipeline_parallelism": 1, "context_parallelism": 1, "expert_parallelism": 1}

    def hparams(self) -> dict[str, Any]:
        """MLLOG hyperparameter keys and values; must cover ``spec.hparam_keys``."""
        values = self.recipe.as_dict()
        return {k: values[k] for k in self.spec.hparam_keys if k in values}

    # --- sizes ---------------------------------------------------------------------------------------
    @property
    def global_batch_size(self) -> int:
        """Samples per optimizer step over all ranks (micro-batches of accumulation included)."""
        return getattr(self.recipe, self.BATCH_FIELD)

    @property
    def local_batch_size(self) -> int:
        """Samples of one micro-batch on this rank."""
        return self.global_batch_size // (self.dist.world_size * self.recipe.gradient_accumulation_steps)

    @property
    @abc.abstractmethod
    def train_samples(self) -> int: ...

    @property
    @abc.abstractmethod
    def eval_samples(self) -> int: ...

    @property
    def steps_per_epoch(self) -> int:
        """Optimizer steps in one epoch (the last partial batch is dropped)."""
        return max(1, self.train_samples // self.global_batch_size)

    # --- training ------------------------------------------------------------------------------------
    @abc.abstractmethod
    def train_batches(self) -> Iterator[Any]:
        """One endless iterator of this rank's micro-batches for the whole run, seeded by (seed, rank, epoch)."""

    def generation_batches(self, model: torch.nn.Module, generation: int) -> Iterable[Any]:
        """The generations unit's hook: produce a generation's data with ``model`` (self-play), then its batches."""
        raise NotImplementedError(f"{self.spec.key}: the {self.spec.unit} unit trains from train_batches()")

    @abc.abstractmethod
    def loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        """The scalar loss of one micro-batch; the harness does backward, accumulation and the step."""

    @abc.abstractmethod
    def synthetic_batch(self) -> Any:
        """A fake micro-batch of the real shape, for dry runs and tests."""

    # --- evaluation ----------------------------------------------------------------------------------
    @abc.abstractmethod
    def evaluate(self, model: torch.nn.Module) -> Mapping[str, float]:
        """Every field of ``spec.fields`` on the whole evaluation set: each rank evaluates its
        ``dist.shard`` exactly once and the result is reduced with the ``dist`` verbs. Further fields
        (numbers) are logged beside ``eval_accuracy`` in one ``trainperf_eval_details`` event."""

    def dry_run_evaluate(self, model: torch.nn.Module) -> Mapping[str, float]:
        """A dry run's evaluation: one forward pass on a synthetic batch; nothing is measured (all 0)."""
        import torch

        model.eval()
        with torch.no_grad():
            self.loss(model, self.synthetic_batch())
        model.train()
        return {f: 0.0 for f, _ in self.spec.fields}

    # --- pictures ------------------------------------------------------------------------------------
    def snapshot(self, model: torch.nn.Module) -> Any | None:
        """After each evaluation, on the clock: what :meth:`pictures` needs of the model at that point (a cheap
        copy of its weights), or None (the default: this workload draws nothing)."""
        return None

    def pictures(self, snapshots: list[tuple[float, Any]]) -> bytes | None:
        """After ``run_stop``, off the clock: one PNG of what the model made at each evaluation (``snapshots``:
        (progress, :meth:`snapshot`'s value) in order), which the harness stores beside the result and the report
        shows; None: nothing to show."""
        return None

    def close(self) -> None:
        """Release what the workload holds (worker processes, files). Always called; idempotent."""
        return None
