"""The optimization stack, measured: training throughput with each switch alone and all together, interleaved.

One process holds every configuration at once (the baseline, each switch alone, all applicable switches
together), each with its own model (the same initial weights), optimizer and iterator over the workload's
real ``train_batches`` (the same batches), and trains them with the harness's own step
(:class:`trainperf.harness.steps.Stepper`: zero_grad, forward, backward, clipping, optimizer and scheduler).
Each configuration first takes ``warmup_steps`` steps (compilation happens there: its time is reported
separately, as it is on the clock of a real run); then every repeat times ``steps`` steps of each
configuration in turn, round-robin, so drift on a noisy machine (another process, heat, frequency) hits all
configurations alike. The order rotates by one configuration each repeat, so no configuration always runs
right after the same other one. A configuration's throughput is the median of its repeats; its speed-up is
that median over the baseline's, and each repeat's ratio to the baseline's measurement in the same repeat
gives the spread.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import math
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import trainperf
from trainperf.contract.switches import DDP_BUCKET_MB, NAMES, OPTIMIZER_IMPL, Switches
from trainperf.harness import switches as sw

BASELINE, ALL = "baseline", "all"
PRECISION = "precision"  # the mixed-precision configuration's "switch": --precision, not one of the switches
FORMAT = "trainperf ablation"  # the JSON's "format"; VERSION its layout
VERSION = 1


@dataclass(frozen=True)
class Configuration:
    name: str  # baseline, compile, channels-last, ..., all
    switches: Switches
    precision: str | None = None  # autocast of the step (fp32, bf16, fp16); None: the baseline's

    def flags(self) -> str:
        """The configuration as command-line flags ("baseline" when nothing is on)."""
        text = self.switches.short()
        if self.precision is None:
            return text
        return f"--precision {self.precision}" + ("" if text == "baseline" else f" {text}")


def single_switch_configurations(prefetch: int) -> list[Configuration]:
    """Each switch alone, as the ablation turns it on (the optimizer's two kernels are two configurations)."""
    return [
        Configuration("compile", Switches(compile=True)),
        Configuration("channels-last", Switches(channels_last=True)),
        Configuration("cuda-graphs", Switches(cuda_graphs=True)),
        Configuration("optimizer foreach", Switches(optimizer_impl="foreach")),
        Configuration("optimizer fused", Switches(optimizer_impl="fused")),
        Configuration("ddp-bucket", Switches(ddp_bucket_mb=1.0)),
        Configuration("pin-memory", Switches(pin_memory=True)),
        Configuration(f"prefetch {prefetch}", Switches(prefetch=prefetch)),
        Configuration("device-prefetch", Switches(device_prefetch=True)),
    ]


def mixed_precision_configuration(
    baseline_autocast: str, device_type: str, bf16_ok: bool
) -> tuple[Configuration | None, str]:
    """The mixed-precision configuration for a baseline that trains in fp32: bf16 autocast (fp16 with the loss
    scaler on a GPU without bf16); or None and why, when the baseline already trains in mixed precision."""
    if baseline_autocast != "fp32":
        return None, (
            f"the baseline already trains in {baseline_autocast} autocast (its --precision); ablate with "
            "--precision fp32 to measure mixed precision against fp32"
        )
    autocast = "bf16" if device_type != "cuda" or bf16_ok else "fp16"
    return Configuration(f"{autocast} autocast", Switches(), precision=autocast), ""


def switch_of(config: Configuration) -> str:
    """The one switch a single-switch configuration turns on (``precision`` for mixed precision)."""
    if config.precision is not None:
        return PRECISION
    on = [n for n in NAMES if getattr(config.switches, n) != getattr(Switches(), n)]
    return on[0] if on else ""


def all_together(alone: list[Configuration]) -> Configuration:
    """Every switch of the configurations that applied, in one, with their mixed precision; fused kernels win
    over foreach ones."""
    merged: dict[str, Any] = {}
    precision = None
    for c in alone:
        precision = c.precision or precision
        for name in NAMES:
            value = getattr(c.switches, name)
            if value == getattr(Switches(), name):
                continue
            if name == OPTIMIZER_IMPL and merged.get(name) == "fused":
                continue
            merged[name] = value
    return Configuration(ALL, Switches(**merged), precision=precision)


def interleaved_order(names: list[str], repeats: int) -> list[tuple[int, str]]:
    """(repeat, configuration) in the order they are timed: every configuration once per repeat, round-robin,
    the starting configuration rotating by one each repeat."""
    order = []
    for r in range(repeats):
        k = r % len(names) if names else 0
        order += [(r, name) for name in names[k:] + names[:k]]
    return order


@dataclass
class Measured:
    """One configuration's measurements (``error`` set when it failed; it is then not timed again)."""

    config: Configuration
    samples_per_second: list[float] = field(default_factory=list)  # one per repeat
    repeat_of: list[int] = field(default_factory=list)  # the repeat each measurement belongs to
    warmup_seconds: float | None = None
    optimizer: str = ""
    autocast: str = ""  # what the step ran: fp32, bf16 or fp16
    error: str = ""

    @property
    def median(self) -> float | None:
        return statistics.median(self.samples_per_second) if self.samples_per_second else None


class _Trainer:
    """One configuration's model, optimizer, batches and step, on the workload shared by all configurations."""

    def __init__(self, workload: Any, config: Configuration, batches: Callable[[], Iterator[Any]], seed: int) -> None:
        # the harness imports torch: this module is torch-free at import (`trainperf --help` loads it)
        from trainperf.harness import precision as precision_mod
        from trainperf.harness.runner import RunObserver, seed_everything
        from trainperf.harness.steps import Stepper

        w = workload
        self.applied = sw.Applied.resolve(
            config.switches, type(w), distributed=w.dist.distributed, device_type=w.device.type
        )
        seed_everything(seed)  # the same initial weights in every configuration
        model = self.applied.placed(w.parallelize(self.applied.model(w.build_model())))
        optimizer, scheduler = w.build_optimizer(model)
        self.applied.optimizer(optimizer, model)
        autocast = precision_mod.resolve(config.precision or w.config.precision, scale=w.spec.scale, device=w.device)
        self.autocast = autocast
        self.stepper = Stepper(
            model, w, optimizer, scheduler, RunObserver(), None, precision_mod.Precision(autocast, w.device.type)
        )
        self.stepper.step_begin = self.applied.step_begin()
        self.batches = self.applied.batches(batches(), w.device)
        self.accumulation = w.recipe.gradient_accumulation_steps
        self.device = w.device
        model.train()

    def steps(self, n: int) -> float:
        """Seconds for ``n`` optimizer steps, the device synchronized before and after."""
        self._sync()
        t = time.perf_counter()
        for _ in range(n):
            self.stepper.step([next(self.batches) for _ in range(self.accumulation)])
        self._sync()
        return time.perf_counter() - t

    def _sync(self) -> None:
        if self.device.type == "cuda":
            import torch  # torch-free at import (`trainperf --help` loads this module): torch when called

            torch.cuda.synchronize(self.device)

    def close(self) -> None:
        close = getattr(self.batches, "close", None)
        if close is not None:
            close()


def _failure(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:300]}"


@dataclass
class Ablation:
    """Everything one ablation measured; :func:`to_json` gives its file."""

    benchmark: str
    scale: str
    data: str  # "mini data (train_batches)", or "synthetic batches"
    global_batch_size: int
    steps: int
    repeats: int
    warmup_steps: int
    measured: list[Measured]
    skipped: dict[str, str]  # configuration -> why it was not measured
    order: list[tuple[int, str]]
    baseline_switches: Switches = field(default_factory=Switches)
    precision: str = "auto"  # the baseline's --precision

    def by_name(self, name: str) -> Measured | None:
        return next((m for m in self.measured if m.config.name == name), None)

    def speedup(self, m: Measured) -> float | None:
        base = self.by_name(BASELINE)
        if base is None or base.median is None or m.median is None or base.median <= 0:
            return None
        return m.median / base.median

    def repeat_ratios(self, m: Measured) -> list[float]:
        """Each repeat's throughput over the baseline's in the same repeat."""
        base = self.by_name(BASELINE)
        if base is None:
            return []
        theirs = dict(zip(base.repeat_of, base.samples_per_second, strict=True))
        return [v / theirs[r] for r, v in zip(m.repeat_of, m.samples_per_second, strict=True) if theirs.get(r)]

    def compile_shared(self, m: Measured) -> bool:
        """Whether an earlier configuration compiled before this one: torch.compile's caches live in the process,
        so this one's compilation may reuse that work (a fresh run would compile it all)."""
        compiled = [x for x in self.measured if x.config.switches.compile or x.config.switches.cuda_graphs]
        return bool(compiled) and m in compiled and compiled[0] is not m

    def compile_seconds(self, m: Measured) -> float | None:
        """The warm-up's time beyond what its steps take once compiled: the compilation (and its first runs)."""
        if not (m.config.switches.compile or m.config.switches.cuda_graphs):
            return None
        if m.warmup_seconds is None or m.median is None or m.median <= 0:
            return None
        steady = self.warmup_steps * self.global_batch_size / m.median
        return max(0.0, m.warmup_seconds - steady)


def run_ablation(
    workload: Any,
    *,
    steps: int,
    repeats: int,
    warmup_steps: int,
    prefetch: int,
    only: tuple[str, ...] = (),
    synthetic: bool = False,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> Ablation:
    """Measure every configuration on ``workload`` (prepared and loaded; one process); ``only``: the switches to
    measure (names as in :mod:`trainperf.harness.switches`, and ``precision``; default every one). The baseline
    trains in the workload's ``config.precision``; when that is fp32, mixed precision is one more configuration."""
    w = workload
    bench = _Bench(w, _batch_source(w, synthetic), seed, progress or (lambda _text: None))
    bench.set_up(Configuration(BASELINE, Switches()))
    alone = bench.set_up_alone(prefetch, only)
    if len(alone) >= 2:
        bench.set_up(all_together(alone))
    order = bench.measure(steps, repeats, warmup_steps)
    return Ablation(
        benchmark=w.spec.key,
        scale=w.spec.scale,
        data="synthetic batches (synthetic_batch)" if synthetic else f"{w.spec.scale} data (train_batches)",
        global_batch_size=w.global_batch_size,
        steps=steps,
        repeats=repeats,
        warmup_steps=warmup_steps,
        measured=list(bench.results.values()),
        skipped=bench.skipped,
        order=order,
        precision=w.config.precision,
    )


def _batch_source(w: Any, synthetic: bool) -> Callable[[], Iterator[Any]]:
    """A fresh iterator of the batches each configuration trains on: the synthetic batch repeated, or the
    workload's own train_batches."""
    if synthetic:
        batch = w.synthetic_batch()
        return lambda: itertools.repeat(batch)
    return lambda: iter(w.train_batches())


class _Bench:
    """The configurations of one ablation side by side: their trainers, measurements and the skipped ones."""

    def __init__(self, w: Any, batches: Callable[[], Iterator[Any]], seed: int, say: Callable[[str], None]) -> None:
        self.w, self.batches, self.seed, self.say = w, batches, seed, say
        self.skipped: dict[str, str] = {}
        self.trainers: dict[str, _Trainer] = {}
        self.results: dict[str, Measured] = {}
        self.reasons = {
            **sw.device_reasons(w.device.type),
            **sw.workload_reasons(type(w), distributed=w.dist.distributed),
        }
        if self.reasons.get(DDP_BUCKET_MB, "").startswith("one process"):
            self.reasons[DDP_BUCKET_MB] += (
                " (ablate runs in one process; compare buckets with `trainperf run --nproc N`)"
            )

    def set_up(self, config: Configuration) -> bool:
        """A trainer for ``config``; False when it failed (the error is its measurement) or its switch could not
        apply here (it is skipped: nothing to measure)."""
        self.say(f"setting up {config.name}")
        m = self.results[config.name] = Measured(config)
        try:
            trainer = _Trainer(self.w, config, self.batches, self.seed)
        except Exception as e:
            m.error = _failure(e)
            return False
        own = switch_of(config)
        if own and own in trainer.applied.ignored:
            self.skipped[config.name] = trainer.applied.ignored[own]
            del self.results[config.name]
            trainer.close()
            return False
        self.trainers[config.name] = trainer
        m.optimizer = trainer.applied.optimizer_used
        m.autocast = trainer.autocast
        return True

    def set_up_alone(self, prefetch: int, only: tuple[str, ...]) -> list[Configuration]:
        """Each switch alone (and mixed precision after an fp32 baseline) that applies; those set up."""
        baseline = self.results[BASELINE]
        mixed, why_not = (None, "") if baseline.error else _mixed(baseline.autocast, self.w.device)
        candidates = single_switch_configurations(prefetch) + ([mixed] if mixed else [])
        if why_not and (not only or PRECISION in only):
            self.skipped["mixed precision"] = why_not
        alone = []
        for config in candidates:
            own = switch_of(config)
            if only and own not in only:
                continue
            if own in self.reasons:
                self.skipped[config.name] = self.reasons[own]
            elif self.set_up(config):
                alone.append(config)
        return alone

    def measure(self, steps: int, repeats: int, warmup_steps: int) -> list[tuple[int, str]]:
        """The warm-up of each configuration, then the interleaved repeats; the order they ran in."""
        names = [name for name in self.results if name in self.trainers]
        for name in names:  # the warm-up: compilation happens here
            self.say(f"warming up {name} ({warmup_steps} steps)")
            _timed(self.results[name], self.trainers, lambda t: t.steps(warmup_steps), warmup=True)
        order = interleaved_order([n for n in names if not self.results[n].error], repeats)
        for r, name in order:
            m = self.results[name]
            if m.error:
                continue
            self.say(f"repeat {r + 1}/{repeats}: {name}")
            seconds = _timed(m, self.trainers, lambda t: t.steps(steps))
            if seconds is not None:
                m.samples_per_second.append(steps * self.w.global_batch_size / seconds)
                m.repeat_of.append(r)
        for t in self.trainers.values():
            t.close()
        return order


def _mixed(baseline_autocast: str, device: Any) -> tuple[Configuration | None, str]:
    bf16_ok = True
    if device.type == "cuda":
        import torch  # torch-free at import (`trainperf --help` loads this module): torch when called

        bf16_ok = torch.cuda.is_bf16_supported()
    return mixed_precision_configuration(baseline_autocast, device.type, bf16_ok)


def _timed(m: Measured, trainers: dict[str, _Trainer], fn: Callable[[_Trainer], float], warmup: bool = False):
    """``fn`` on the configuration's trainer; a failure marks the configuration failed and frees it."""
    try:
        seconds = fn(trainers[m.config.name])
    except Exception as e:
        m.error = _failure(e)
        trainers.pop(m.config.name).close()
        return None
    if not math.isfinite(seconds) or seconds <= 0:
        m.error = f"a timing of {seconds!r} s"
        return None
    if warmup:
        m.warmup_seconds = seconds
    return seconds


def to_json(a: Ablation, *, device: str, command: str, threads: int) -> dict[str, Any]:
    """The ablation's file: settings, every configuration with its repeats, the skipped ones, the order."""
    import torch  # torch-free at import (`trainperf --help` loads this module): torch when called

    configs = []
    for m in a.measured:
        configs.append(
            {
                "name": m.config.name,
                "flags": m.config.flags(),
                "switches": dataclasses.asdict(m.config.switches),
                "autocast": m.autocast,
                "status": "failed" if m.error else "measured",
                "error": m.error,
                "samples_per_second": [round(v, 4) for v in m.samples_per_second],
                "repeat": list(m.repeat_of),
                "median_samples_per_second": None if m.median is None else round(m.median, 4),
                "speedup": None if (s := a.speedup(m)) is None else round(s, 4),
                "speedup_per_repeat": [round(v, 4) for v in a.repeat_ratios(m)],
                "warmup_seconds": None if m.warmup_seconds is None else round(m.warmup_seconds, 3),
                "compile_seconds": None if (c := a.compile_seconds(m)) is None else round(c, 3),
                "compile_shared": a.compile_shared(m),
                "optimizer": m.optimizer,
            }
        )
    return {
        "format": FORMAT,
        "version": VERSION,
        "benchmark": a.benchmark,
        "scale": a.scale,
        "data": a.data,
        "device": device,
        "threads": threads,
        "torch": torch.__version__,
        "trainperf": trainperf.__version__,
        "trainperf_code": trainperf.code_hash(),
        "created": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": command,
        "global_batch_size": a.global_batch_size,
        "steps": a.steps,
        "repeats": a.repeats,
        "warmup_steps": a.warmup_steps,
        "precision": a.precision,
        "configurations": configs,
        "skipped": [{"name": k, "reason": v} for k, v in a.skipped.items()],
        "order": [[r, name] for r, name in a.order],
    }
