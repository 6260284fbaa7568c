"""One timed run, in MLPerf's order.

``cache_clear`` -> ``init_start`` -> check the files and build the model (untimed, at most
``spec.max_init_minutes``) -> ``init_stop`` -> ``run_start`` -> read the data, build the optimizer ->
blocks of training and evaluation, counted in the spec's progress unit -> ``run_stop`` with status
``success`` (target reached) or ``aborted`` (budget spent, dry run, or interrupted). The result is
``run_stop - run_start``; both are read after the device has synchronized, as the maximum over ranks.

A reference smoke run (``RunConfig.smoke``) takes this same path on a tiny fixture in the reference's
on-disk format: the real ``prepare`` and ``load_data``, ``SMOKE_STEPS`` optimizer steps on real batches
of the dry run's micro-batch size, and one full evaluation; it ends ``aborted`` with the reason
``smoke run`` (it is a check of the machine and the data path, never a result).

The harness owns the step (:mod:`trainperf.harness.steps`), the clock, every log line and the global
torch state; the workload gives losses and evaluations.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
import resource
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

import trainperf
from trainperf import dist as dist_mod
from trainperf import nodes, seeds
from trainperf.contract import switches as switch_keys
from trainperf.contract.workload import Workload
from trainperf.dist import DistContext
from trainperf.errors import RuleError, RunFailed, RunInterrupted, Terminated, TrainperfError, UsageError
from trainperf.harness import clock, disclosure, node_energy, skew
from trainperf.harness import precision as precision_mod
from trainperf.harness import switches as switches_mod
from trainperf.harness.energy import EnergyMeter
from trainperf.harness.mllog import RunLog, constants, mlperf_division
from trainperf.harness.schedule import Schedule
from trainperf.harness.steps import Stepper
from trainperf.harness.torch_state import torch_state
from trainperf.spec import GENERATIONS, BenchmarkSpec, Recipe, RunConfig

DRY_RUN_STEPS = 3  # a dry run checks the whole path at full size, not convergence
EVAL_DETAILS = "trainperf_eval_details"  # the fields of an evaluation beside the metric, one event per evaluation
SMOKE_STEPS = 2  # a smoke run: real steps on the fixture (the second on moved weights), then one full evaluation
SMOKE_GENERATIONS = 2  # a smoke run in the generations unit: two real generations, then one evaluation
# The abort reason of a run stopped by the spec's wall-clock guard (``max_minutes``): far above any calibrated run,
# it stops a runaway run (a hung loader, a machine many times slower); it is not the budget, which is progress.
RUNAWAY = "runaway guard"


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
    reason: str  # "target", "progress budget", RUNAWAY, "dry run", "interrupted"
    minutes: float
    unit: str  # the spec's progress unit
    progress: float  # in ``unit`` when the run stopped
    quality: float  # the headline field of the last evaluation
    curve: list[tuple[float, float, float]] = field(default_factory=list)  # (minutes, progress, quality)
    init_seconds: float = 0.0
    load_seconds: float = 0.0  # reading the data, on the clock
    harness_overhead: float = 0.0  # fraction of time-to-train spent outside the workload and the step
    peak_rss_mib: float = 0.0
    samples_per_second: float = 0.0  # training samples (optimizer steps x global batch) per second
    energy_joules: float | None = None  # None: not measured (no RAPL or NVML on this machine)
    energy_note: str = "not measured"
    start_ms: float | None = None  # run_start's logged time (ms since the epoch): orders the runs for scoring
    pictures: bytes | None = field(default=None, repr=False)  # a PNG of what the model made (Workload.pictures)

    @property
    def success(self) -> bool:
        return self.status == "success"


class RunObserver:
    """What the harness tells a progress display; the default shows nothing."""

    def run_started(self, spec: BenchmarkSpec, total: float) -> None:
        """``total``: the budget in the spec's unit."""

    def step(self, samples: int, progress: float, loss: float | None) -> None:
        """One optimizer step; ``loss`` is read back only every few steps (else None)."""

    def evaluated(self, progress: float, quality: float) -> None: ...

    def run_stopped(self, outcome: RunOutcome | None) -> None:
        """The run ended (``None``: interrupted)."""


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _peak_rss_mib() -> float:
    """This process's peak resident memory in MiB.

    Linux's ``VmHWM`` first: the peak of this program's own memory. ``ru_maxrss`` survives ``execve``, so a run
    started by a large parent (a test session, a notebook) would report the parent's peak as its own.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0  # kB
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux, the fallback elsewhere


def _drop_caches() -> bool:
    """Drop the OS page cache (needs root); True when it was done."""
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def execute_run(
    workload_cls: type[Workload],
    spec: BenchmarkSpec,
    recipe: Recipe,
    config: RunConfig,
    *,
    log: RunLog,
    submission: Submission,
    data_dir: Path,
    dist: DistContext,
    observer: RunObserver | None = None,
    drop_caches: bool = False,
) -> RunOutcome:
    """Execute one timed run and log it; Ctrl-C logs ``run_stop`` aborted and raises RunInterrupted.

    The workload runs under its declared torch state, restored afterwards, and is always closed.
    """
    if config.dry_run or config.smoke:
        recipe = dry_run_recipe(workload_cls, spec, recipe, dist)
    check_batch(workload_cls, spec, recipe, dist)
    with torch_state(workload_cls.TORCH_STATE):
        workload = workload_cls(spec, recipe, config, data_dir=data_dir, dist=dist)
        try:
            return _Run(workload, log, observer or RunObserver()).execute(submission, drop_caches)
        finally:
            workload.close()


def dry_run_recipe(workload_cls: type[Workload], spec: BenchmarkSpec, recipe: Recipe, dist: DistContext) -> Recipe:
    """A reference dry or smoke run trains the full-size model on small micro-batches (CPU-sized)."""
    local = workload_cls.DRY_RUN_LOCAL_BATCH
    if spec.scale != "reference" or not local:
        return recipe
    batch = local * dist.world_size * recipe.gradient_accumulation_steps
    return dataclasses.replace(recipe, **{workload_cls.BATCH_FIELD: batch})


def check_batch(workload_cls: type[Workload], spec: BenchmarkSpec, recipe: Recipe, dist: DistContext) -> None:
    """The batch divides into ranks and accumulation steps; a single-process workload runs in one process."""
    if workload_cls.SINGLE_PROCESS and dist.world_size > 1:
        raise UsageError(f"{spec.key} runs in one process (it starts its own workers); run it without --nproc")
    batch = getattr(recipe, workload_cls.BATCH_FIELD)
    parts = dist.world_size * recipe.gradient_accumulation_steps
    if batch % parts:
        raise UsageError(
            f"{spec.key}: {workload_cls.BATCH_FIELD} {batch} is not divisible by {dist.world_size} process(es) x "
            f"{recipe.gradient_accumulation_steps} accumulation step(s); choose a process count or "
            "gradient_accumulation_steps that divides it"
        )


class _Run:
    """The state of one run; :meth:`execute` reads top to bottom in MLPerf's order."""

    def __init__(self, workload: Workload, log: RunLog, obs: RunObserver) -> None:
        self.w, self.log, self.obs = workload, log, obs
        self.spec, self.config, self.dist = workload.spec, workload.config, workload.dist
        self.curve: list[tuple[float, float, float]] = []
        self.snapshots: list[tuple[float, Any]] = []  # (progress, Workload.snapshot) at each evaluation
        self.inside = 0.0  # seconds inside the workload and the step (training and evaluation)
        self.quality = math.nan
        self.meter = None
        self.load_seconds = 0.0
        self.stepper: Stepper | None = None
        autocast = precision_mod.resolve(self.config.precision, scale=self.spec.scale, device=workload.device)
        self.precision = precision_mod.Precision(autocast, workload.device.type)
        self.switches = switches_mod.Applied.resolve(
            self.config.switches, type(workload), distributed=self.dist.distributed, device_type=workload.device.type
        )

    def execute(self, submission: Submission, drop_caches: bool) -> RunOutcome:
        w, log, dist = self.w, self.log, self.dist
        log.event(constants.CACHE_CLEAR, value=_drop_caches() if drop_caches else False)
        log.start(constants.INIT_START)
        init_t0 = time.perf_counter()
        self._log_header(submission)
        seed_everything(seeds.derive(self.config.seed, dist.rank))
        if not self.config.dry_run:  # a dry run reads no data
            w.prepare()
        seed_everything(self.config.seed)  # identical initial weights on every rank
        model = w.build_model()
        for name in w.reference_tensor_names(model):
            log.event(constants.WEIGHTS_INITIALIZATION, metadata={"tensor": name})
        model = self.switches.placed(w.parallelize(self.switches.model(model)))  # --channels-last, --compile
        self._check_clock_skew()
        init_seconds = self._end_init(init_t0)
        start_ms = round(clock.now_ms(dist))
        log.start(constants.RUN_START, time_ms=start_ms)
        wall0 = time.perf_counter()
        # From here on the run has started: however it ends, its log ends with run_stop.
        try:
            self.meter = _energy_meter(dist)
            self.load_seconds = self._load(model)
            status, reason, stepper = self._train_until_done(model, wall0)
        except KeyboardInterrupt as e:
            what = "terminated (SIGTERM)" if isinstance(e, Terminated) else "interrupted by the user"
            self._stop_aborted(start_ms, wall0, what, init_seconds)
            self.obs.run_stopped(None)
            err = RunInterrupted(f"{self.spec.key}: run {what}; logged as aborted")
            err.what = what
            raise err from None
        except Exception as e:
            if self.log.failed:
                raise  # the log itself cannot be written (a full disk): there is no log to end
            failure = e
            if self.dist.distributed and dist_mod.is_peer_failure(e):  # logged alike whichever signal came first:
                failure = dist_mod.peer_failure(self.dist, e)  # the broken collective or torchrun's SIGTERM
            reason = f"error: {type(failure).__name__}: {failure}"
            outcome = self._stop_aborted(start_ms, wall0, reason, init_seconds)
            self.obs.run_stopped(outcome)
            code = e.exit_code if isinstance(e, TrainperfError) else 1
            raise RunFailed(f"{self.spec.key}: the run failed ({type(e).__name__}: {e})", outcome, code) from e
        return self._finish(start_ms, wall0, status, reason, stepper, init_seconds, self.load_seconds)

    def _stop_aborted(self, start_ms: int, wall0: float, reason: str, init_seconds: float) -> RunOutcome:
        """End a run that did not finish: ``run_stop`` aborted, with the reason logged before it."""
        if self.meter is not None:
            self.meter.stop()
        stop_ms = round(clock.local_ms())  # no collective: another rank may be gone
        self.log.event("trainperf_abort_reason", reason)
        self.log.end(constants.RUN_STOP, metadata={"status": "aborted"}, time_ms=stop_ms)
        progress = self.stepper.progress if self.stepper is not None else 0.0
        return self._outcome("aborted", reason, start_ms, stop_ms, progress, init_seconds, self.load_seconds)

    def _outcome(
        self,
        status: str,
        reason: str,
        start_ms: int,
        stop_ms: int,
        progress: float,
        init_seconds: float,
        load_seconds: float,
        **measured: Any,
    ) -> RunOutcome:
        """What a run ended with; ``measured``: the figures only a finished run has (throughput, energy, ...)."""
        return RunOutcome(
            benchmark=self.spec.key,
            scale=self.spec.scale,
            seed=self.config.seed,
            status=status,
            reason=reason,
            minutes=(stop_ms - start_ms) / 60000.0,
            unit=self.spec.unit,
            progress=progress,
            quality=self.quality,
            curve=self.curve,
            init_seconds=init_seconds,
            load_seconds=load_seconds,
            peak_rss_mib=_peak_rss_mib(),
            start_ms=start_ms,
            **measured,
        )

    # --- the parts of a run, in order ----------------------------------------------------------------
    def _log_header(self, submission: Submission) -> None:
        log, spec, config = self.log, self.spec, self.config
        log.event(constants.SUBMISSION_BENCHMARK, spec.key)
        log.event(constants.SUBMISSION_ORG, submission.org)
        log.event(constants.SUBMISSION_DIVISION, mlperf_division(config.division, spec.scale))  # mini: "open"
        log.event(constants.SUBMISSION_STATUS, submission.status)
        log.event(constants.SUBMISSION_PLATFORM, submission.platform)
        log.event("trainperf_version", trainperf.__version__)
        log.event("trainperf_code", trainperf.code_hash())  # which code made the run: resume compares it
        log.event("trainperf_scale", spec.scale)
        log.event("trainperf_division", config.division)
        log.event("trainperf_framework", f"PyTorch {torch.__version__}")
        log.event("trainperf_dry_run", config.dry_run)
        log.event("trainperf_smoke", config.smoke)
        log.event("trainperf_world_size", self.dist.world_size)
        job = nodes.slurm_job() if self.dist.is_main else None  # rank 0 writes the log; one sacct per run
        if job is not None:
            log.event("trainperf_slurm_job", job)  # job id, node list, array task: which allocation ran it
        log.event("trainperf_progress_unit", spec.unit)
        log.event("trainperf_overrides", dict(config.overrides))  # hyperparameters changed from the default recipe
        log.event("trainperf_target", spec.target_text)
        log.event("trainperf_seed_source", config.seed_source)
        log.event("trainperf_precision", config.precision)  # what was asked; trainperf_autocast: what ran
        log.event("trainperf_autocast", self.precision.autocast)
        for key, value in config.switches.as_logged().items():  # the optimization switches asked for
            log.event(key, value)
        log.event(constants.SEED, config.seed)

    def _check_clock_skew(self) -> None:
        """Several nodes: log each node's clock offset from rank 0, and refuse the run before run_start when the
        skew can exceed the bound (:mod:`trainperf.harness.skew`). One node reads one clock: nothing to do."""
        if nodes.node_count() <= 1:
            return
        measured = skew.measure(self.dist, nodes.node_rank())
        value, metadata = measured.as_event()
        self.log.event("trainperf_clock_skew_ms", value, metadata=metadata)
        measured.check()

    def _end_init(self, init_t0: float) -> float:
        init_seconds = self.dist.all_reduce([time.perf_counter() - init_t0], op="max")[0]
        self.log.end(constants.INIT_STOP)
        if init_seconds > self.spec.max_init_minutes * 60:
            raise RuleError(
                f"{self.spec.key}: initialization took {init_seconds / 60:.1f} min, over the "
                f"{self.spec.max_init_minutes:g}-minute limit of the rules; prepare the data beforehand "
                "(`trainperf data prepare`) or use faster storage"
            )
        return init_seconds

    def _load(self, model: torch.nn.Module) -> float:
        """On the clock: read the data, build the optimizer, log the sizes and hyperparameters."""
        w, log = self.w, self.log
        t = time.perf_counter()
        if not self.config.dry_run:
            w.load_data()
        load_seconds = time.perf_counter() - t
        self.optimizer, self.scheduler = w.build_optimizer(model)
        self.switches.optimizer(self.optimizer, model)  # --optimizer-impl
        log.event(switch_keys.OPTIMIZER_IMPL_USED, self.switches.optimizer_used)
        log.event(switch_keys.IGNORED, dict(self.switches.ignored))  # switches asked for that could not apply
        hparams = w.hparams()
        missing = [k for k in self.spec.hparam_keys if k not in hparams]
        if missing:
            raise RuleError(f"{self.spec.key}: the workload does not report hyperparameters {missing}")
        log.event(constants.GLOBAL_BATCH_SIZE, w.global_batch_size)
        log.event(constants.GRADIENT_ACCUMULATION_STEPS, w.recipe.gradient_accumulation_steps)
        log.event(constants.TRAIN_SAMPLES, w.train_samples)
        log.event(constants.EVAL_SAMPLES, w.eval_samples)
        for key, value in hparams.items():
            if key != constants.GLOBAL_BATCH_SIZE:
                log.event(key, value)
        for key, value in disclosure.round_keys(self.spec, w, self.precision.autocast).items():
            log.event(key, value)
        self.inside += load_seconds
        return load_seconds

    def _train_until_done(self, model: torch.nn.Module, wall0: float) -> tuple[str, str, Stepper]:
        """Blocks of training, each followed by an evaluation, until the target or a budget."""
        w, spec = self.w, self.spec
        few = DRY_RUN_STEPS if self.config.dry_run else SMOKE_STEPS if self.config.smoke else None
        if self.config.smoke and spec.unit == GENERATIONS:  # self-play makes the data: a few real generations
            schedule = Schedule.smoke_generations(SMOKE_GENERATIONS)
        else:
            schedule = Schedule.for_run(spec, w, dry_run_steps=few)
        stepper = self.stepper = Stepper(model, w, self.optimizer, self.scheduler, self.obs, schedule, self.precision)
        stepper.step_begin = self.switches.step_begin()  # CUDA graph trees: where each step begins
        batches = None if schedule.by_generation else self._batches()
        self.obs.run_started(spec, schedule.points[-1])
        for point in schedule.points:
            done = stepper.progress
            first = schedule.logged_first(done)
            self.log.start(
                constants.BLOCK_START,
                metadata={"first_epoch_num": first, "epoch_count": schedule.logged_count(point - done)},
            )
            t = time.perf_counter()
            if schedule.by_generation:
                while stepper.progress < point:
                    stepper.train_generation(w.generation_batches(model, round(stepper.progress) + 1))
            else:
                stepper.train_until(schedule.steps_at(point), batches, self.log)
            self.inside += time.perf_counter() - t
            self.log.end(constants.BLOCK_STOP, metadata={"first_epoch_num": first})
            value = self._evaluate(model, stepper.progress, wall0)
            if self.config.smoke:  # a tiny fixture's quality means nothing: never a result
                return "aborted", "smoke run", stepper
            if spec.reached(value):
                # The budget is progress (epochs, samples, generations), not minutes: a run that reaches the
                # target within it succeeds however slow the machine, as the report and the calibration count it.
                return "success", "target", stepper
            if self.config.dry_run:
                return "aborted", "dry run", stepper
            if (time.perf_counter() - wall0) / 60 > spec.max_minutes:
                return "aborted", RUNAWAY, stepper  # only a run far slower than any calibrated one: logged as such
        return "aborted", "progress budget", stepper

    def _batches(self) -> Iterator[Any]:
        if self.config.dry_run:
            return self.switches.batches(itertools.repeat(self.w.synthetic_batch()), self.w.device)
        # --channels-last, --pin-memory, --prefetch, --device-prefetch
        return self.switches.batches(iter(self.w.train_batches()), self.w.device)

    def _evaluate(self, model: torch.nn.Module, point: float, wall0: float) -> dict[str, float]:
        spec, log = self.spec, self.log
        num = _logged_number(point + spec.epoch_num_offset)
        where = disclosure.eval_metadata(spec, num, point)
        log.start(constants.EVAL_START, metadata=where)
        t = time.perf_counter()
        raw = self.w.dry_run_evaluate(model) if self.config.dry_run else self.w.evaluate(model)
        value = {k: float(v) for k, v in raw.items()}
        missing = [f for f, _ in spec.fields if f not in value]
        if missing:
            raise RuntimeError(f"{spec.key}: evaluation returned {sorted(value)}, without the field(s) {missing}")
        snap = None if self.config.dry_run else self.w.snapshot(getattr(model, "_orig_mod", model))  # not compile's
        if snap is not None:
            self.snapshots.append((point, snap))
        self.inside += time.perf_counter() - t
        log.end(constants.EVAL_STOP, metadata=where)
        for key in (constants.EVAL_ACCURACY, *spec.eval_logged_also_as):  # the same value under each key asked for
            log.event(key, value=spec.logged_value(value), metadata=where)
        details = {k: v for k, v in value.items() if k not in dict(spec.fields)}
        if details:  # what else the evaluation measured (minigo: games, wins per colour, disagreements)
            log.event(EVAL_DETAILS, value=details, metadata={"epoch_num": num})
        self.quality = spec.headline(value)
        self.curve.append(((time.perf_counter() - wall0) / 60, point, self.quality))
        self.obs.evaluated(point, self.quality)
        return value

    def _finish(
        self,
        start_ms: int,
        wall0: float,
        status: str,
        reason: str,
        stepper: Stepper,
        init_seconds: float,
        load_seconds: float,
    ) -> RunOutcome:
        reading = self.meter.stop() if self.meter is not None else None
        if self.dist.distributed:  # every node's meter, each host once, summed on rank 0
            reading = node_energy.job_reading(self.dist, reading)
        stop_ms = round(clock.now_ms(self.dist))
        total = time.perf_counter() - wall0
        if reading is not None:
            self.log.event(
                "trainperf_energy_joules",
                value=reading.joules,
                metadata={"sources": list(reading.sources), "samples": reading.samples, "note": reading.note},
            )
        if status != "success":  # why it stopped short: the progress budget, the runaway guard, a dry run
            self.log.event("trainperf_abort_reason", reason)
        self.log.end(constants.RUN_STOP, metadata={"status": status}, time_ms=stop_ms)
        samples = stepper.optimizer_steps * self.w.global_batch_size
        outcome = self._outcome(
            status, reason, start_ms, stop_ms, stepper.progress, init_seconds, load_seconds,
            harness_overhead=max(0.0, (total - self.inside) / total) if total > 0 else 0.0,
            samples_per_second=samples / total if total > 0 else 0.0,
            energy_joules=reading.joules if reading is not None else None,
            energy_note=reading.note if reading is not None else "not measured on this rank",
        )  # fmt: skip
        if self.snapshots and self.dist.is_main:  # off the clock: after run_stop
            outcome = dataclasses.replace(outcome, pictures=self.w.pictures(self.snapshots))
        self.snapshots.clear()
        self.obs.run_stopped(outcome)
        return outcome


def _energy_meter(dist: DistContext):
    """Power sampling during the run on each node's first process: its host's CPU packages (RAPL) and GPUs (NVML).

    Rank 0 sums the nodes when the run ends (:mod:`trainperf.harness.node_energy`).
    """
    if not node_energy.meters_here(dist):
        return None
    meter = EnergyMeter()
    meter.start()
    return meter


def _logged_number(x: float) -> Any:
    """Whole numbers as int, fractions as float with six significant digits (a dry run's tiny block stays > 0)."""
    r = float(f"{x:.6g}")
    return int(r) if r == int(r) else r
