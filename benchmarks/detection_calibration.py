"""Calibrate a mini detection target (ssd or maskrcnn): quality curves over several seeds, and the untrained model.

    python benchmarks/detection_calibration.py ssd --runs 10 --stop-at-target
    python benchmarks/detection_calibration.py maskrcnn --runs 10 --minutes 3.2 --targets 0.25:0.24 0.27:0.26

Each seed runs the default recipe through the real harness (``execute_run``, the code `trainperf run`
uses) with the quality target raised out of reach, so that the run trains for the whole ``--minutes``
and logs its full curve (minutes since run_start, epoch, mAP at each evaluation). For a candidate target
the time-to-train of a seed is the time of its first evaluation at or above the target: a run with that
target stops exactly there, having done the same work (training and evaluation are the same up to that
point). With ``--stop-at-target`` the runs use the spec's own target instead and stop there (cheaper:
the curves end at the deciding evaluation). The budget is the spec's progress (``max_progress`` epochs), as a
run counts it: a target reached within it counts however long it took. The script prints each seed's curve, the seeds
that reach each candidate
target and their median time-to-train, how far each seed's deciding evaluations (the last below the
target, the first at or above it) sit from the target in standard errors of the metric (the spec's
``metric_se``, where measured), then the untrained model's mAP (same seeds, same evaluation code).

Seeds come from trainperf's calibration range (``trainperf.seeds.CALIBRATION_SEEDS``, 100001 and up),
which no default run can draw, so a scored suite never replays a calibration run. The figures go in the
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

from trainperf import registry, seeds
from trainperf.dist import DistContext
from trainperf.harness.mllog import RunLog
from trainperf.harness.runner import Submission, execute_run, seed_everything
from trainperf.paths import default_data_dir
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


def deciding(spec, curve) -> str:
    """The last evaluation below the target and the first at or above it, in standard errors from the target."""
    se = getattr(spec, "metric_se", None)
    first = next((i for i, (_, _, v) in enumerate(curve) if spec.reached(v)), None)
    picks = [curve[-1]] if first is None else curve[max(0, first - 1) : first + 1]
    shown = []
    for t, _, v in picks:
        head = spec.headline(v)
        gap = f" ({(head - spec.target) / se:+.1f} SE)" if se else ""
        shown.append(f"{head:.4f} at {t:.0f}s{gap}")
    return " -> ".join(shown) + ("" if first is not None else " (never reached)")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("benchmark", choices=("ssd", "maskrcnn"))
    p.add_argument("--runs", type=int, default=10, help="calibration seeds (default 10)")
    p.add_argument(
        "--seed", type=int, default=seeds.CALIBRATION_SEEDS[0], help="first calibration seed (default 100001)"
    )
    p.add_argument("--stop-at-target", action="store_true", help="stop each run at the spec's target")
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
    if a.seed not in seeds.CALIBRATION_SEEDS or a.seed + a.runs - 1 not in seeds.CALIBRATION_SEEDS:
        p.error(f"calibration seeds come from {seeds.CALIBRATION_SEEDS.start}..{seeds.CALIBRATION_SEEDS.stop - 1}")
    torch.set_num_threads(2)
    spec = registry.get_spec(a.benchmark, "mini")
    unreachable = (
        spec
        if a.stop_at_target
        else dataclasses.replace(
            spec,
            target=2.0,
            field_targets=tuple((f, 2.0) for f, _ in spec.field_targets),
            max_minutes=max(a.minutes, spec.max_minutes),
            eval_interval=a.eval_every or spec.eval_interval,
        )
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
        # the budget is progress: an evaluation within max_progress epochs counts, at whatever minute it came
        times = [
            next((t for t, e, v in curve if candidate.reached(v) and e <= spec.max_progress), math.nan)
            for curve in curves.values()
        ]
        ok = [t for t in times if not math.isnan(t)]
        med = statistics.median(ok) if ok else math.nan
        print(
            f"target {candidate.target_text}: reached by {len(ok)}/{len(times)} seeds; times "
            + ", ".join("-" if math.isnan(t) else f"{t:.0f}s" for t in times)
            + f"; median {med:.0f} s"
        )
        for seed, curve in curves.items():
            print(f"    seed {seed}: deciding evaluations " + deciding(candidate, curve))
    if not a.no_untrained:
        values = [untrained(a.benchmark, a.seed + i, a.data_dir) for i in range(a.runs)]
        print("untrained: " + "; ".join(", ".join(f"{k} {x:.3g}" for k, x in v.items()) for v in values))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
