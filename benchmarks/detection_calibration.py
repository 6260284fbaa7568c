"""Calibrate a mini detection target (ssd or maskrcnn): quality curves over several seeds, and the untrained model.

    python benchmarks/detection_calibration.py ssd --runs 5 --minutes 3.2
    python benchmarks/detection_calibration.py maskrcnn --runs 5 --minutes 3.2

Each seed runs the default recipe through the real harness (``execute_run``, the code `trainperf run`
uses) with the quality target raised out of reach, so that the run trains for the whole ``--minutes``
and logs its full curve (minutes since run_start, epoch, mAP at each evaluation). For a candidate target
the time-to-train of a seed is the time of its first evaluation at or above the target: a run with that
target stops exactly there, having done the same work (training and evaluation are the same up to that
point). The script prints each seed's curve, the seeds that reach each candidate target and their median
time-to-train, then the untrained model's mAP (same seeds, same evaluation code). The figures go in the
benchmark's README.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import tempfile
from pathlib import Path

import torch

from trainperf import registry
from trainperf.cli import default_data_dir
from trainperf.dist import DistContext
from trainperf.harness.mllog import RunLog
from trainperf.harness.runner import Submission, execute_run, seed_everything
from trainperf.results import read_mllog
from trainperf.rules.closed import parse_overrides
from trainperf.spec import RunConfig


def untrained(key: str, seed: int, data_dir: Path) -> dict[str, float]:
    """The evaluation of the model as the harness initializes it for ``seed``, before any step."""
    spec = registry.get_spec(key, "mini")
    w = registry.workload_class(key)(
        spec, registry.default_recipe(key, "mini"), RunConfig(seed=seed), data_dir=data_dir, dist=DistContext()
    )
    w.prepare()
    seed_everything(seed)
    model = w.build_model()
    w.load_data()
    try:
        return dict(w.evaluate(model))
    finally:
        w.close()


def fields(spec, value) -> dict[str, float]:
    """A logged eval_accuracy as the spec's fields (ssd logs a number, maskrcnn {"BBOX": .., "SEGM": ..})."""
    return value if isinstance(value, dict) else {spec.metric: value}


def margins_in_se(spec, se: float, curves: dict[int, list]) -> str:
    """How far each seed's deciding evaluation (the first that reaches the target) and the evaluation before
    it sit from the target, in standard errors of the metric. With several fields the one closest to
    changing the outcome counts: the lowest of a reaching evaluation, the highest of a miss."""

    def margin(value: dict[str, float]) -> float:
        margins = [(value.get(f, math.nan) - t) / se for f, t in spec.fields]
        return min(margins) if spec.reached(value) else max(margins)

    parts, clear = [], 0
    for seed, curve in curves.items():
        k = next((i for i, (_, _, v) in enumerate(curve) if spec.reached(v)), None)
        if k is None:
            parts.append(f"{seed}: -")
            continue
        before = f"{margin(curve[k - 1][2]):+.1f} then " if k > 0 else ""
        parts.append(f"{seed}: {before}{margin(curve[k][2]):+.1f}")
        clear += margin(curve[k][2]) >= 2 and (k == 0 or margin(curve[k - 1][2]) <= -2)
    return (
        f"last miss and deciding evaluation, in SE ({se:g}) from the target: "
        + "; ".join(parts)
        + f"; {clear}/{len(curves)} seeds at least 2 SE clear on both sides"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("benchmark", choices=("ssd", "maskrcnn"))
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--minutes", type=float, default=3.2, help="training budget of each seed (default 3.2)")
    p.add_argument(
        "--targets",
        nargs="*",
        default=None,
        help="candidate targets (default: the spec's); maskrcnn: BBOX:SEGM, e.g. 0.25:0.24",
    )
    p.add_argument("--no-untrained", action="store_true", help="skip the untrained model's evaluation")
    p.add_argument("--eval-every", type=float, default=None, help="epochs between evaluations (default: the spec's)")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change a recipe value, as `trainperf run --set` does (repeatable), to compare recipes",
    )
    p.add_argument("--data-dir", type=Path, default=default_data_dir())
    a = p.parse_args()
    torch.set_num_threads(2)
    spec = registry.get_spec(a.benchmark, "mini")
    unreachable = dataclasses.replace(
        spec,
        target=2.0,
        field_targets=tuple((f, 2.0) for f, _ in spec.field_targets),
        max_minutes=a.minutes,
        eval_interval=a.eval_every or spec.eval_interval,
    )
    overrides = parse_overrides(a.overrides)
    recipe = registry.default_recipe(a.benchmark, "mini").with_overrides(overrides)
    curves = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.runs):
            seed = a.seed + i
            log_path = Path(tmp) / f"seed{seed}.txt"
            log = RunLog(log_path)
            outcome = execute_run(
                registry.workload_class(a.benchmark),
                unreachable,
                recipe,
                RunConfig(seed=seed, overrides=overrides),
                log=log,
                submission=Submission(org="trainperf", platform="calibration", status="research"),
                data_dir=a.data_dir,
                dist=DistContext(),
            )
            log.close()
            start = next(r for r in read_mllog(log_path) if r["key"] == "run_start")["time_ms"]
            curves[seed] = [
                ((r["time_ms"] - start) / 1000.0, r["metadata"]["epoch_num"], fields(spec, r["value"]))
                for r in read_mllog(log_path)
                if r["key"] == "eval_accuracy"
            ]
            print(
                f"seed {seed}: peak RSS {outcome.peak_rss_mib:.0f} MiB; curve (seconds, epoch, {spec.metric}):",
                flush=True,
            )
            for t, e, v in curves[seed]:
                shown = ", ".join(f"{k} {x:.3f}" for k, x in v.items())
                print(f"    {t:6.1f}s  epoch {e:<6g} {shown}", flush=True)
    for text in a.targets or [":".join(f"{t:g}" for _, t in spec.field_targets) or f"{spec.target:g}"]:
        values = [float(x) for x in text.split(":")]
        if spec.field_targets:
            targets = tuple((f, v) for (f, _), v in zip(spec.field_targets, values, strict=True))
            candidate = dataclasses.replace(spec, target=targets[0][1], field_targets=targets)
        else:
            candidate = dataclasses.replace(spec, target=values[0])
        times = [next((t for t, _, v in curve if candidate.reached(v)), math.nan) for curve in curves.values()]
        ok = [t for t in times if not math.isnan(t)]
        med = statistics.median(ok) if ok else math.nan
        print(
            f"target {candidate.target_text}: reached by {len(ok)}/{len(times)} seeds; times "
            + ", ".join("-" if math.isnan(t) else f"{t:.0f}s" for t in times)
            + f"; median {med:.0f} s"
        )
        if spec.metric_se is not None:
            print("  " + margins_in_se(candidate, spec.metric_se, curves))
    if not a.no_untrained:
        values = [untrained(a.benchmark, a.seed + i, a.data_dir) for i in range(a.runs)]
        print("untrained: " + "; ".join(", ".join(f"{k} {x:.3g}" for k, x in v.items()) for v in values))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
