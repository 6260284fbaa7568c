"""The standard error of a mini benchmark's metric: train to the target, then bootstrap the evaluation set.

    python benchmarks/metric_error.py resnet
    python benchmarks/metric_error.py ssd --resamples 200
    python benchmarks/metric_error.py maskrcnn --seed 100002
    python benchmarks/metric_error.py unet3d
    python benchmarks/metric_error.py dlrm --resamples 1000
    python benchmarks/metric_error.py rnnt
    python benchmarks/metric_error.py llama31_8b
    python benchmarks/metric_error.py gpt_oss_20b
    python benchmarks/metric_error.py deepseekv3_671b
    python benchmarks/metric_error.py llama2_70b_lora
    python benchmarks/metric_error.py flux1

One run of the default mini recipe goes through the real harness (``execute_run``, the code `trainperf run`
uses) with the spec's own target, so it stops at the first evaluation that reaches the target: the deciding
evaluation, of a model near the target. That evaluation's per-image outcomes are kept (resnet: whether the
top-1 class is right; ssd and maskrcnn: the detections; unet3d: each case's kidney and tumour Dice; dlrm:
each sample's score and label), and the evaluation images (unet3d: cases; dlrm: samples) are resampled with
replacement B times. Each resample is scored with the workload's own metric code: top-1 is the mean of the
hits; mean Dice the mean of the two classes' means over the cases; AUC scikit-learn's ``roc_auc_score`` of
the resampled samples; mAP is pycocotools' COCOeval on the resampled image set, where an image drawn twice
counts twice
(``trainperf.workloads.common.detection.evaluation.ResampledMap``; ``--check`` compares its first resamples
with a full COCOeval of the resampled data set, fresh image and annotation ids included). The standard
deviation of the B values is the standard error (SE) of the metric over evaluation images: how far the
figure could move on another evaluation set of the same size and kind. The script prints it beside the
metric, a 95 % percentile interval and the distance to the target in SE. The figures go in the benchmark's
README ("Standard error of the metric") and its mini spec (``metric_se``).

The run and the resampling use one calibration seed (``trainperf.seeds.CALIBRATION_SEEDS``, default the
first), never a seed a default run could draw.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from trainperf import registry, seeds
from trainperf.dist import DistContext
from trainperf.harness.mllog import RunLog
from trainperf.harness.runner import RunOutcome, Submission, execute_run
from trainperf.paths import default_data_dir
from trainperf.spec import RunConfig
from trainperf.workloads.common.detection.evaluation import ResampledMap, coco_map, resampled

# The workload method that gives one evaluation's per-image outcomes, which its ``evaluate`` reduces.
PER_IMAGE = {
    "resnet": "top1_hits",
    "ssd": "detections",
    "maskrcnn": "detections",
    "unet3d": "case_scores",
    "dlrm": "scores_and_labels",
    "bert": "masked_lm_hits",
    "rnnt": "utterance_errors",
    "llama31_8b": "sequence_losses",
    "gpt_oss_20b": "sequence_losses",  # llama31_8b's evaluation, on the mixture-of-experts decoder
    "deepseekv3_671b": "sequence_losses",  # the same, on its decoder continued from the starting checkpoint
    "llama2_70b_lora": "summary_losses",  # each validation page's loss on its summary
    "flux1": "sample_losses",  # each validation image's loss at its own timestep
}
Metric = Callable[[np.ndarray], dict[str, float]]  # evaluation-image indices (with repeats) -> fields


def recording(workload_cls: type, hook: str) -> type:
    """The workload class, keeping itself and the per-image outcomes of its latest evaluation."""

    def record(self, model: torch.nn.Module) -> Any:
        outcomes = getattr(workload_cls, hook)(self, model)
        type(self).latest = (self, outcomes)
        return outcomes

    return type(f"Recording{workload_cls.__name__}", (workload_cls,), {hook: record, "latest": None})


def train_to_target(key: str, seed: int, data_dir: Path, minutes: float | None) -> tuple[RunOutcome, Any, Any]:
    """One run of the default mini recipe to the spec's target: (outcome, workload, per-image outcomes of
    the deciding evaluation). ``minutes`` replaces the time budget (None: the spec's)."""
    spec = registry.get_spec(key, "mini")
    if minutes is not None:
        spec = dataclasses.replace(spec, max_minutes=minutes)
    cls = recording(registry.workload_class(key), PER_IMAGE[key])
    with tempfile.TemporaryDirectory() as tmp:
        log = RunLog(Path(tmp) / "result.txt")
        try:
            outcome = execute_run(
                cls,
                spec,
                registry.default_recipe(key, "mini"),
                RunConfig(seed=seed),
                log=log,
                submission=Submission(org="trainperf", platform="metric-error", status="research"),
                data_dir=data_dir,
                dist=DistContext(),
            )
        finally:
            log.close()
    if not outcome.success:
        raise SystemExit(
            f"{key} seed {seed}: the run did not reach {spec.target_text} ({outcome.reason}); try another seed"
        )
    workload, outcomes = cls.latest
    return outcome, workload, outcomes


def top1_metric(hits: torch.Tensor) -> tuple[int, Metric]:
    correct = hits.numpy().astype(np.float64)
    return len(correct), lambda draw: {"top1": float(correct[draw].mean())}


def mlm_metric(hits: tuple[np.ndarray, np.ndarray]) -> tuple[int, Metric]:
    """bert: examples are resampled; accuracy is the resampled examples' correct predictions over their masked
    tokens."""
    correct, counts = (np.asarray(h, dtype=np.float64) for h in hits)
    return len(counts), lambda draw: {"mlm_accuracy": float(correct[draw].sum() / counts[draw].sum())}


def log_perplexity_metric(outcomes: tuple[np.ndarray, np.ndarray]) -> tuple[int, Metric]:
    """llama31_8b: validation sequences are resampled; log-perplexity is their summed token losses over their
    tokens."""
    losses, tokens = (np.asarray(o, dtype=np.float64) for o in outcomes)
    return len(tokens), lambda draw: {"log_perplexity": float(losses[draw].sum() / tokens[draw].sum())}


def mean_loss_metric(losses: np.ndarray) -> tuple[int, Metric]:
    """llama2_70b_lora: validation sequences are resampled; the evaluation loss is the mean of their losses."""
    each = np.asarray(losses, dtype=np.float64)
    return len(each), lambda draw: {"eval_loss": float(each[draw].mean())}


def timestep_mean_metric(outcomes: tuple[np.ndarray, np.ndarray]) -> tuple[int, Metric]:
    """flux1: validation images are resampled; the loss is the mean over the 8 timesteps of each one's mean."""
    losses, steps = outcomes
    k = int(steps.max()) + 1

    def metric(draw: np.ndarray) -> dict[str, float]:
        sums = np.bincount(steps[draw], losses[draw], minlength=k)
        return {"eval_loss": float((sums / np.bincount(steps[draw], minlength=k)).mean())}

    return len(losses), metric


def wer_metric(outcomes: tuple[np.ndarray, np.ndarray]) -> tuple[int, Metric]:
    """WER of resampled utterances: their word errors over their reference words (an utterance drawn twice
    counts twice)."""
    errors, words = outcomes
    return len(errors), lambda draw: {"wer": float(errors[draw].sum() / words[draw].sum())}


def dice_metric(scores: torch.Tensor) -> tuple[int, Metric]:
    """unet3d: the kidney and tumour Dice of each evaluation case; mean Dice is the mean of the two means."""
    per_case = scores.numpy().astype(np.float64)

    def metric(draw: np.ndarray) -> dict[str, float]:
        kidney, tumour = per_case[draw].mean(axis=0)
        return {"mean_dice": float((kidney + tumour) / 2), "dice_kidney": float(kidney), "dice_tumour": float(tumour)}

    return len(per_case), metric


def auc_metric(scores_and_labels: tuple[np.ndarray, np.ndarray]) -> tuple[int, Metric]:
    """dlrm: scikit-learn's exact AUC of the resampled evaluation samples (a sample drawn twice counts twice)."""
    from sklearn.metrics import roc_auc_score

    scores, labels = scores_and_labels
    return len(scores), lambda draw: {"auc": float(roc_auc_score(labels[draw], scores[draw]))}


def map_metric(workload: Any, detections: list[dict[str, Any]], check: int, console: Console) -> tuple[int, Metric]:
    """COCO mAP of every field on resampled images; the first ``check`` resamples are also scored the slow way."""
    index, fields = workload.val_index, workload.FIELDS
    image_ids = np.asarray(index.image_ids)
    scorers = {name: ResampledMap(index, detections, iou_type) for name, iou_type in fields.items()}
    checked = 0

    def metric(draw: np.ndarray) -> dict[str, float]:
        nonlocal checked
        ids = image_ids[draw].tolist()
        values = {name: score(ids) for name, score in scorers.items()}
        if checked < check:
            checked += 1
            gt, results = resampled(index, detections, ids)
            for name, iou_type in fields.items():
                full = coco_map(gt, results, iou_type)
                if abs(full - values[name]) > 1e-9:
                    raise SystemExit(
                        f"--check: resample {checked} {name}: {values[name]!r} here, {full!r} from COCOeval"
                    )
            console.print(
                f"check {checked}: equal to COCOeval of the resampled data set", highlight=False, soft_wrap=True
            )
        return values

    return len(image_ids), metric


def bootstrap(n: int, metric: Metric, resamples: int, rng: np.random.Generator, label: str) -> dict[str, np.ndarray]:
    """The metric of ``resamples`` draws of ``n`` evaluation images with replacement, per field."""
    values: dict[str, list[float]] = {}
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns) as progress:
        task = progress.add_task(label, total=resamples)
        for _ in range(resamples):
            for name, value in metric(rng.integers(0, n, size=n)).items():
                values.setdefault(name, []).append(value)
            progress.advance(task)
    return {name: np.asarray(v) for name, v in values.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("benchmark", choices=sorted(PER_IMAGE))
    p.add_argument(
        "--seed",
        type=int,
        default=seeds.calibration_seeds(1)[0],
        help=f"calibration seed of the run and the resampling (default {seeds.calibration_seeds(1)[0]})",
    )
    p.add_argument("--resamples", type=int, default=200, help="bootstrap resamples B (at least 200; default 200)")
    p.add_argument(
        "--check",
        type=int,
        default=2,
        help="mAP only: score the first N resamples with a full COCOeval of the resampled data set too (default 2)",
    )
    p.add_argument(
        "--minutes",
        type=float,
        default=None,
        help="time budget of the run (default: the spec's); on a busy machine a longer one lets the run reach "
        "the same deciding evaluation, which does not depend on the clock",
    )
    p.add_argument("--data-dir", type=Path, default=default_data_dir())
    a = p.parse_args()
    if a.seed not in seeds.CALIBRATION_SEEDS:
        lo, hi = seeds.CALIBRATION_SEEDS[0], seeds.CALIBRATION_SEEDS[-1]
        p.error(f"--seed {a.seed}: use a calibration seed ({lo}-{hi}), never one a default run could draw")
    if a.resamples < 200:
        p.error("--resamples: at least 200, so that the standard error itself is known to about 5 %")
    torch.set_num_threads(2)
    console = Console()
    spec = registry.get_spec(a.benchmark, "mini")

    t0 = time.perf_counter()
    outcome, workload, outcomes = train_to_target(a.benchmark, a.seed, a.data_dir, a.minutes)
    trained = time.perf_counter() - t0
    if a.benchmark == "resnet":
        n, metric = top1_metric(outcomes)
    elif a.benchmark == "rnnt":
        n, metric = wer_metric(outcomes)
    elif a.benchmark == "unet3d":
        n, metric = dice_metric(outcomes)
    elif a.benchmark == "dlrm":
        n, metric = auc_metric(outcomes)
    elif a.benchmark == "bert":
        n, metric = mlm_metric(outcomes)
    elif PER_IMAGE[a.benchmark] == "sequence_losses":
        n, metric = log_perplexity_metric(outcomes)
    elif a.benchmark == "llama2_70b_lora":
        n, metric = mean_loss_metric(outcomes)
    elif a.benchmark == "flux1":
        n, metric = timestep_mean_metric(outcomes)
    else:
        n, metric = map_metric(workload, outcomes, a.check, console)
    whole = metric(np.arange(n))
    if abs(spec.headline(whole) - outcome.quality) > 1e-6:
        raise SystemExit(f"the kept outcomes score {spec.headline(whole)!r}, the run logged {outcome.quality!r}")
    console.print(
        f"{a.benchmark} (mini), seed {a.seed}: reached {spec.target_text} at {outcome.progress:g} {outcome.unit} "
        f"({outcome.minutes * 60:.1f} s on the run's clock; training and set-up took {trained:.0f} s)",
        highlight=False,
        soft_wrap=True,
    )

    curve = ", ".join(f"{progress:g}: {quality:.4f}" for _, progress, quality in outcome.curve)
    console.print(
        f"  the run's evaluations ({outcome.unit}: {spec.fields[0][0]}): {curve}", highlight=False, soft_wrap=True
    )
    t1 = time.perf_counter()
    rng = seeds.numpy_rng(a.seed, seeds.STREAM_BOOTSTRAP)
    values = bootstrap(n, metric, a.resamples, rng, f"bootstrap {a.benchmark}")
    console.print(
        f"bootstrap over {n} evaluation images, B = {a.resamples}: {time.perf_counter() - t1:.1f} s",
        highlight=False,
        soft_wrap=True,
    )
    for name, target in spec.fields:
        v, boot = whole[name], values[name]
        se = float(boot.std(ddof=1))
        low, high = np.percentile(boot, [2.5, 97.5])
        console.print(
            f"  {name}: {v:.4f} at the deciding evaluation; SE {se:.4f}; resamples' mean {boot.mean():.4f}, "
            f"95 % percentile interval {low:.4f}-{high:.4f}; "
            f"{(v - target) / se:.1f} SE above the target {target:g}",
            highlight=False,
            soft_wrap=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
