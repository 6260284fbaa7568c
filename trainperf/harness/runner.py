"""One timed run, in MLPerf's order.

``cache_clear`` -> ``init_start`` -> build everything (untimed, at most ``spec.max_init_minutes``) ->
``init_stop`` -> ``run_start`` (before any training sample is touched) -> blocks of training and
evaluation -> ``run_stop`` with status ``success`` (target reached) or ``aborted`` (budget spent, dry
run, or interrupted). The result is ``run_stop - run_start``; both are read after the device has
synchronized, as the maximum over ranks.
"""

from __future__ import annotations

import math
import random
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

import trainperf
from trainperf.errors import RuleError, RunInterrupted
from trainperf.harness import clock
from trainperf.harness.dist import DistContext
from trainperf.harness.mllog import RunLog, constants
from trainperf.spec import BenchmarkSpec, RunConfig, Workload

DRY_RUN_STEPS = 3  # a dry run checks the whole path at full size, not convergence


@dataclass(frozen=True, kw_only=True)
class Submission:
    """Who and what a run is logged as (MLLOG ``submission_*`` keys)."""

    org: str
    platform: str  # the system name
    status: str  # MLLOG submission_status: onprem, cloud, preview, research


@dataclass(kw_only=True)
class RunOutcome:
    benchmark: str
    scale: str
    seed: int
    status: str  # "success" or "aborted"
    reason: str  # "target", "epoch budget", "time budget", "dry run", "interrupted"
    minutes: float
    epochs: float
    quality: float
    curve: list[tuple[float, float, float]] = field(default_factory=list)  # (minutes, epoch, quality)
    init_seconds: float = 0.0
    harness_overhead: float = 0.0  # fraction of time-to-train spent outside the workload
    peak_rss_mib: float = 0.0
    samples_per_second: float = 0.0
    energy_joules: float | None = None  # None: not measured (no RAPL or NVML on this machine)
    energy_note: str = "not measured"

    @property
    def success(self) -> bool:
        return self.status == "success"


class RunObserver:
    """What the harness tells a progress display; the default shows nothing."""

    def run_started(self, spec: BenchmarkSpec, total_steps: int, steps_per_epoch: int) -> None: ...
    def step(self, samples: int, loss: float) -> None: ...
    def evaluated(self, epoch: float, quality: float) -> None: ...
    def run_stopped(self, outcome: RunOutcome | None) -> None:
        """The run ended (``None``: interrupted)."""


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def _drop_caches() -> bool:
    """Drop the OS page cache (needs root); True when it was done."""
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def execute_run(
    workload_cls: Callable[..., Workload],
    spec: BenchmarkSpec,
    config: RunConfig,
    *,
    log: RunLog,
    submission: Submission,
    data_dir: Path,
    dist: DistContext,
    observer: RunObserver | None = None,
    drop_caches: bool = False,
) -> RunOutcome:
    """Execute one timed run and log it; Ctrl-C logs ``run_stop`` aborted and raises RunInterrupted."""
    obs = observer or RunObserver()
    cleared = _drop_caches() if drop_caches else False
    log.event(constants.CACHE_CLEAR, value=cleared)
    log.start(constants.INIT_START)
    init_t0 = time.perf_counter()
    log.event(constants.SUBMISSION_BENCHMARK, spec.key)
    log.event(constants.SUBMISSION_ORG, submission.org)
    log.event(constants.SUBMISSION_DIVISION, _mlperf_division(spec, config))
    log.event(constants.SUBMISSION_STATUS, submission.status)
    log.event(constants.SUBMISSION_PLATFORM, submission.platform)
    log.event("trainperf_version", trainperf.__version__)
    log.event("trainperf_scale", spec.scale)
    log.event("trainperf_division", config.division)
    log.event("trainperf_framework", f"PyTorch {torch.__version__}")
    log.event("trainperf_dry_run", config.dry_run)
    log.event("trainperf_world_size", dist.world_size)
    log.event("trainperf_overrides", dict(config.overrides))  # hyperparameters changed from the default recipe
    log.event(constants.SEED, config.seed)

    seed_everything(config.seed + dist.rank)
    workload = workload_cls(spec, config, data_dir=data_dir, dist=dist)
    workload.prepare()
    seed_everything(config.seed)  # identical initial weights on every rank
    model = workload.build_model().to(dist.device)
    for name in getattr(workload, "initialized_tensors", lambda m: [])(model):
        log.event(constants.WEIGHTS_INITIALIZATION, metadata={"tensor": name})
    if dist.distributed:
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[dist.local_rank] if dist.device.type == "cuda" else None
        )
    optimizer, scheduler = workload.build_optimizer(model)
    hparams = workload.hparams()
    missing = [k for k in spec.hparam_keys if k not in hparams]
    if missing:
        raise RuleError(f"{spec.key}: the workload does not report hyperparameters {missing}")
    log.event(constants.GLOBAL_BATCH_SIZE, workload.global_batch_size)
    log.event(constants.GRADIENT_ACCUMULATION_STEPS, 1)
    log.event(constants.TRAIN_SAMPLES, workload.train_samples)
    log.event(constants.EVAL_SAMPLES, workload.eval_samples)
    for key, value in hparams.items():
        if key not in (constants.GLOBAL_BATCH_SIZE,):
            log.event(key, value)
    init_seconds = dist.all_reduce([time.perf_counter() - init_t0], op="max")[0]
    if init_seconds > spec.max_init_minutes * 60:
        log.end(constants.INIT_STOP)
        raise RuleError(
            f"{spec.key}: initialization took {init_seconds / 60:.1f} min, over the "
            f"{spec.max_init_minutes:g}-minute limit of the rules; prepare the data beforehand "
            "(`trainperf data prepare`) or use faster storage"
        )
    log.end(constants.INIT_STOP)

    steps_per_epoch = workload.steps_per_epoch
    block_steps = DRY_RUN_STEPS if config.dry_run else max(1, round(spec.eval_every_epochs * steps_per_epoch))
    max_steps = DRY_RUN_STEPS if config.dry_run else math.ceil(spec.max_epochs * steps_per_epoch)
    inside = 0.0  # seconds spent inside the workload (training and evaluation)
    curve: list[tuple[float, float, float]] = []
    steps = 0
    quality = math.nan
    status, reason = "aborted", "epoch budget"
    run_started = False
    meter = None

    def progress(samples: int, loss: float) -> None:
        obs.step(samples, loss)

    try:
        start_ms = round(clock.now_ms(dist))
        log.start(constants.RUN_START, time_ms=start_ms)
        run_started = True
        meter = _energy_meter(dist)
        wall0 = time.perf_counter()
        obs.run_started(spec, max_steps, steps_per_epoch)
        while steps < max_steps:
            block_end = min(steps + block_steps, max_steps)
            first_epoch = steps / steps_per_epoch
            log.start(
                constants.BLOCK_START,
                metadata={
                    "first_epoch_num": _epoch_num(1 + first_epoch),
                    "epoch_count": _epoch_num((block_end - steps) / steps_per_epoch),
                },
            )
            while steps < block_end:  # pieces that end at epoch boundaries or at the block's end
                epoch_index = steps // steps_per_epoch
                piece_end = min((epoch_index + 1) * steps_per_epoch, block_end)
                if steps % steps_per_epoch == 0:
                    log.start(constants.EPOCH_START, metadata={"epoch_num": epoch_index + 1})
                t = time.perf_counter()
                workload.train_steps(model, optimizer, scheduler, piece_end - steps, progress)
                inside += time.perf_counter() - t
                steps = piece_end
                if steps % steps_per_epoch == 0:
                    log.end(constants.EPOCH_STOP, metadata={"epoch_num": epoch_index + 1})
            epoch = steps / steps_per_epoch
            log.end(constants.BLOCK_STOP, metadata={"first_epoch_num": _epoch_num(1 + first_epoch)})
            log.start(constants.EVAL_START, metadata={"epoch_num": _epoch_num(epoch)})
            t = time.perf_counter()
            value = workload.evaluate(model)  # a float, or a dict for a multi-field metric (maskrcnn)
            value = {k: float(v) for k, v in value.items()} if isinstance(value, dict) else float(value)
            quality = spec.headline(value)
            inside += time.perf_counter() - t
            log.end(constants.EVAL_STOP, metadata={"epoch_num": _epoch_num(epoch)})
            log.event(constants.EVAL_ACCURACY, value=value, metadata={"epoch_num": _epoch_num(epoch)})
            elapsed_min = (time.perf_counter() - wall0) / 60
            curve.append((elapsed_min, epoch, quality))
            obs.evaluated(epoch, quality)
            if spec.reached(value):
                status, reason = "success", "target"
                break
            if config.dry_run:
                reason = "dry run"
                break
            if elapsed_min >= spec.max_minutes:
                reason = "time budget"
                break
    except KeyboardInterrupt:
        obs.run_stopped(None)
        if meter is not None:
            meter.stop()
        if run_started:
            log.end(constants.RUN_STOP, metadata={"status": "aborted"}, time_ms=round(clock.local_ms()))
        raise RunInterrupted(f"{spec.key}: run interrupted by the user; logged as aborted, not counted") from None
    reading = meter.stop() if meter is not None else None
    stop_ms = round(clock.now_ms(dist))
    total = time.perf_counter() - wall0
    if reading is not None:
        log.event(
            "trainperf_energy_joules",
            value=reading.joules,
            metadata={"sources": list(reading.sources), "samples": reading.samples, "note": reading.note},
        )
    log.end(constants.RUN_STOP, metadata={"status": status}, time_ms=stop_ms)
    samples = steps * workload.global_batch_size
    outcome = RunOutcome(
        benchmark=spec.key,
        scale=spec.scale,
        seed=config.seed,
        status=status,
        reason=reason,
        minutes=(stop_ms - start_ms) / 60000.0,
        epochs=steps / steps_per_epoch,
        quality=quality,
        curve=curve,
        init_seconds=init_seconds,
        harness_overhead=max(0.0, (total - inside) / total) if total > 0 else 0.0,
        peak_rss_mib=_peak_rss_mib(),
        samples_per_second=samples / total if total > 0 else 0.0,
        energy_joules=reading.joules if reading is not None else None,
        energy_note=reading.note if reading is not None else "not measured on this rank",
    )
    obs.run_stopped(outcome)
    return outcome


def _energy_meter(dist: DistContext):
    """Power sampling during the run on rank 0: its node's CPU packages (RAPL) and GPUs (NVML).

    Other nodes of a multi-node run are not metered yet; a single node is metered whole.
    """
    if not dist.is_main:
        return None
    from trainperf.harness.energy import EnergyMeter

    meter = EnergyMeter()
    meter.start()
    return meter


def _mlperf_division(spec: BenchmarkSpec, config: RunConfig) -> str:
    # Mini runs are logged as MLPerf division "open": the v2.0 closed rule files enforce the reference
    # targets. trainperf's own division is logged separately as ``trainperf_division``.
    return config.division if spec.scale == "reference" else "open"


def _epoch_num(epochs: float) -> Any:
    """Whole epochs as int, fractions as float with six significant digits (a dry run's tiny block stays > 0)."""
    r = float(f"{epochs:.6g}")
    return int(r) if r == int(r) else r
