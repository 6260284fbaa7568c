"""Where a mini run's time goes: data, forward, backward, optimizer, evaluation; and the top operators.

    python benchmarks/profile_mini.py maskrcnn --steps 30
    python benchmarks/profile_mini.py ssd --log /tmp/ssd-run/results/.../result_0.txt

Any benchmark with a mini scale, through the workload contract alone (``trainperf.contract.workload.Workload``),
under the workload's own torch settings: ``prepare``, ``build_model``, ``parallelize``, then the timed part of a
run, ``load_data`` and ``build_optimizer``, then ``--steps`` optimizer steps, each split into the time to
get its batch from ``train_batches`` (the data pipeline), the forward pass (``loss``), the backward pass
and the optimizer with its scheduler (as the harness's ``Stepper`` does them, fp32, no accumulation), and
one ``evaluate`` of the model after those steps, its time split by the package whose code spent it
(cProfile's own time per function, grouped by the file's package: torch, pycocotools, numpy, trainperf,
...). ``--profile-steps`` more steps run under ``torch.profiler`` and its top operators by own CPU time
are printed. ``--channels-last``, ``--flush-denormal`` and ``--threads`` measure those levers (the
same seed gives the same batches, so runs with and without one compare step for step).

A model a few steps old may not detect or predict what a trained one does, and evaluation can cost more
or less with what it finds; ``--log`` reads a real run's MLLOG file instead for the evaluation's share of
the whole run (``eval_start`` to ``eval_stop`` of each evaluation against ``run_start`` to ``run_stop``).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
from pathlib import Path

import torch

from trainperf import registry, seeds
from trainperf.dist import DistContext
from trainperf.harness.runner import seed_everything
from trainperf.harness.torch_state import torch_state
from trainperf.paths import default_data_dir
from trainperf.results import read_mllog
from trainperf.spec import EPOCHS, SAMPLES, RunConfig


def _ms(seconds: list[float]) -> str:
    return f"{1000 * statistics.median(seconds):7.1f} ms"


def _package(filename: str, name: str) -> str:
    """The package a profiled function belongs to; a built-in one (cProfile's file ``~``) by its name."""
    if filename == "~":
        for package in ("torch", "torchvision", "pycocotools", "numpy"):
            if package in name or (package == "pycocotools" and "_mask" in name):
                return package
        return "python built-ins"
    parts = Path(filename).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            return parts[parts.index(marker) + 1].split(".")[0].split("-")[0]
    if "trainperf" in parts:
        return "trainperf"
    return "python stdlib"


def profile_steps(w, model, optimizer, scheduler, batches, steps: int) -> dict[str, list[float]]:
    """Wall-clock of each part of ``steps`` optimizer steps (the harness's fp32 step, no accumulation)."""
    times: dict[str, list[float]] = {"data": [], "forward": [], "backward": [], "optimizer": []}
    model.train()
    for _ in range(steps):
        t0 = time.perf_counter()
        batch = next(batches)
        t1 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = w.loss(model, batch)
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        t4 = time.perf_counter()
        for part, dt in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            times[part].append(dt)
    return times


def evaluation_by_package(w, model) -> tuple[float, dict[str, float], list[tuple[str, float]], dict]:
    """One ``evaluate``: its wall-clock, cProfile's own time per package, the functions with the most
    cumulative time (below ``evaluate`` itself), and what it returned."""
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    quality = w.evaluate(model)
    prof.disable()
    wall = time.perf_counter() - t0
    by_package: dict[str, float] = {}
    cumulative: list[tuple[str, float]] = []
    for (filename, line, name), (_, _, tottime, cumtime, _) in pstats.Stats(prof).stats.items():  # type: ignore[attr-defined]
        package = _package(filename, name)
        by_package[package] = by_package.get(package, 0.0) + tottime
        where = name if filename == "~" else f"{name} ({'/'.join(Path(filename).parts[-2:])}:{line})"
        cumulative.append((where, cumtime))
    top = sorted(cumulative, key=lambda kv: -kv[1])[1:16]
    return wall, by_package, top, dict(quality)


def log_shares(path: Path) -> str:
    """The evaluations' share of a real run, from its MLLOG file."""
    records = read_mllog(path)
    t = {
        k: [r["time_ms"] for r in records if r["key"] == k]
        for k in ("run_start", "run_stop", "eval_start", "eval_stop")
    }
    if not t["run_start"] or not t["run_stop"]:
        return f"{path}: no run_start/run_stop"
    total = (t["run_stop"][-1] - t["run_start"][0]) / 1000
    evals = [(b - a) / 1000 for a, b in zip(t["eval_start"], t["eval_stop"], strict=False)]
    return (
        f"run {total:.1f} s: {len(evals)} evaluations {sum(evals):.1f} s ({100 * sum(evals) / total:.0f} %; each "
        + ", ".join(f"{e:.1f}" for e in evals)
        + f" s), training and loading {total - sum(evals):.1f} s ({100 * (total - sum(evals)) / total:.0f} %)"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("benchmark", help="benchmark key (mini scale)")
    p.add_argument("--steps", type=int, default=30, help="timed optimizer steps (default 30; 3 more warm up)")
    p.add_argument("--profile-steps", type=int, default=5, help="steps under torch.profiler (default 5)")
    p.add_argument("--seed", type=int, default=seeds.CALIBRATION_SEEDS[0])
    p.add_argument("--no-eval", action="store_true", help="skip the evaluation")
    p.add_argument(
        "--train-before-eval",
        type=int,
        default=0,
        metavar="STEPS",
        help="untimed optimizer steps before the evaluation, so that it sees a model that detects (default 0)",
    )
    p.add_argument("--log", type=Path, help="a real run's result_N.txt: the evaluations' share of that run")
    p.add_argument("--channels-last", action="store_true", help="lever: the model's tensors in channels-last layout")
    p.add_argument("--flush-denormal", action="store_true", help="lever: denormal floats flushed to zero")
    p.add_argument("--threads", type=int, help="lever: intra-op threads (default: the workload's, or torch's)")
    p.add_argument("--data-dir", type=Path, default=default_data_dir())
    a = p.parse_args()
    if a.log:
        print(log_shares(a.log))
    key = a.benchmark
    spec, recipe, cls = (
        registry.get_spec(key, "mini"),
        registry.default_recipe(key, "mini"),
        registry.workload_class(key),
    )
    with torch_state(cls.TORCH_STATE):
        w = cls(spec, recipe, RunConfig(seed=a.seed), data_dir=a.data_dir, dist=DistContext())
        try:
            w.prepare()
            if a.flush_denormal:
                torch.set_flush_denormal(True)
            if a.threads:
                torch.set_num_threads(a.threads)
            seed_everything(a.seed)
            model = w.build_model()
            if a.channels_last:
                model = model.to(memory_format=torch.channels_last)
            model = w.parallelize(model)
            t0 = time.perf_counter()
            w.load_data()
            optimizer, scheduler = w.build_optimizer(model)
            load = time.perf_counter() - t0
            levers = [n for n, on in (("channels-last", a.channels_last), ("flush-denormal", a.flush_denormal)) if on]
            print(
                f"{key} mini: {torch.get_num_threads()} threads{''.join(', ' + n for n in levers)}, "
                f"batch {w.global_batch_size}, "
                f"{w.steps_per_epoch} steps per epoch; load_data + build_optimizer {load:.2f} s"
            )
            batches = iter(w.train_batches())
            profile_steps(w, model, optimizer, scheduler, batches, 3)  # warm-up
            times = profile_steps(w, model, optimizer, scheduler, batches, a.steps)
            step = [sum(parts) for parts in zip(*times.values(), strict=True)]
            print(
                f"step (median of {a.steps}): {_ms(step)}, "
                f"{w.global_batch_size / statistics.median(step):.1f} samples/s"
            )
            for part, ts in times.items():
                print(f"  {part:10s} {_ms(ts)}  {100 * sum(ts) / sum(step):5.1f} %")
            if a.profile_steps:
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                    profile_steps(w, model, optimizer, scheduler, batches, a.profile_steps)
                print(f"torch.profiler over {a.profile_steps} steps, top operators by own CPU time:")
                print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15, max_name_column_width=40))
            if not a.no_eval:
                profile_steps(w, model, optimizer, scheduler, batches, a.train_before_eval)
                trained = 3 + a.steps + a.profile_steps + a.train_before_eval
                wall, by_package, top, quality = evaluation_by_package(w, model)
                print(f"one evaluation ({w.eval_samples} samples, after {trained} steps): {wall:.1f} s, {quality}")
                total = sum(by_package.values())
                print("  own time by package:")
                for package, s in sorted(by_package.items(), key=lambda kv: -kv[1])[:8]:
                    print(f"    {package:20s} {s:6.2f} s  {100 * s / total:5.1f} %")
                print("  top functions by cumulative time:")
                for name, s in top:
                    print(f"    {s:6.2f} s  {name}")
                interval = spec.interval(w.recipe)
                steps = {EPOCHS: interval * w.steps_per_epoch, SAMPLES: interval / w.global_batch_size}.get(spec.unit)
                if steps is not None:  # generations (minigo): a generation is self-play, not optimizer steps
                    train = statistics.median(step) * steps
                    print(
                        f"an interval of {interval:g} {spec.unit} ({steps:g} steps): training ~{train:.1f} s "
                        f"(median step x steps), evaluation {wall:.1f} s ({100 * wall / (wall + train):.0f} %)"
                    )
        finally:
            w.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
