"""Calibrate a mini target: time-to-train over calibration seeds, and what an untrained network scores.

    python benchmarks/calibrate.py dlrm --runs 10 --out /tmp/dlrm-calibration [--precision bf16] [--compile]

Any benchmark with a mini scale. Runs the default recipe through the real harness (`trainperf run KEY
--runs N --seed S`, with its progress budget), then evaluates the untrained network (same seeds, same
evaluation code) and prints both, with each seed's deciding evaluations (the last below the target and
the first at or above it) in standard errors of the metric from the target where the spec has one
(``metric_se``). Seeds come from trainperf's calibration range (``trainperf.seeds.CALIBRATION_SEEDS``,
100001 and up), which no default run can draw. The figures go in the workload's README.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from trainperf import registry, seeds
from trainperf.paths import default_data_dir


def rnnt_guesser(data_dir: Path) -> str:
    """rnnt: the most frequent training transcript answered for every evaluation utterance, scored by jiwer."""
    import collections

    import jiwer

    from trainperf.workloads.rnnt import data, generator

    root = generator.mini_dir(data_dir)
    train = [u.transcript for u in data.scan_subset(root / generator.TRAIN_SUBSET)]
    evaluation = [u.transcript for u in data.scan_subset(root / generator.EVAL_SUBSET)]
    guess, _ = collections.Counter(train).most_common(1)[0]
    return f"most-frequent-transcript guesser ({guess!r}): wer {jiwer.wer(evaluation, [guess] * len(evaluation)):.4f}"


def untrained_quality(key: str, seed: int, data_dir: Path) -> dict[str, float]:
    """Every field the freshly initialized model scores, through the workload's own evaluation."""
    from trainperf.dist import DistContext
    from trainperf.harness.runner import seed_everything
    from trainperf.harness.torch_state import torch_state
    from trainperf.spec import RunConfig

    spec = registry.get_spec(key, "mini")
    recipe = registry.default_recipe(key, "mini")
    cls = registry.workload_class(key)
    with torch_state(cls.TORCH_STATE):  # the workload's own torch settings (bert: flush denormals)
        w = cls(spec, recipe, RunConfig(seed=seed), data_dir=data_dir, dist=DistContext())
        w.prepare()
        w.load_data()
        seed_everything(seed)
        try:
            model = w.build_model()
            if any(p.is_meta for p in model.parameters()):  # placed and filled by parallelize (from a checkpoint)
                model = w.parallelize(model)
            return dict(w.evaluate(model))
        finally:
            w.close()


def bert_baselines(data_dir: Path) -> str:
    from trainperf.workloads.bert import mini

    m = mini.read_manifest(data_dir)
    return (
        f"unigram guesser (token {m['unigram_token']}): {m['unigram_accuracy']:.4f}; copying the input token: "
        f"{m['copy_accuracy']:.4f} ({m['eval_masked_tokens']} masked tokens)"
    )


def llama_baselines(data_dir: Path) -> str:
    from trainperf.workloads.llama31_8b import mini

    m = mini.read_manifest(data_dir)
    return (
        f"unigram model (training token frequencies): log-perplexity {m['unigram_log_perplexity']:.4f}; uniform "
        f"guess over {m['vocab_size']} tokens: {m['uniform_log_perplexity']:.4f}"
    )


def deepseek_baselines(data_dir: Path) -> str:
    from trainperf.workloads.deepseekv3_671b import mini_start

    m = json.loads((mini_start.start_dir(data_dir) / mini_start.MANIFEST).read_text())
    return (
        f"{llama_baselines(data_dir)}; the starting checkpoint (its manifest): {m['log_perplexity']:.4f}, the "
        f"model it was trained from: {m['training_curve'][0][1]:.4f} (the 'untrained' figures below are the "
        "starting checkpoint's: a run continues from it)"
    )


def lora_baselines(data_dir: Path) -> str:
    from trainperf.workloads.llama2_70b_lora import base, mini

    m = json.loads((base.base_dir(data_dir) / "manifest.json").read_text())
    unigram = mini.read_manifest(data_dir)["unigram_summary_loss"]
    return (
        f"the base model's own evaluation loss (no fine-tuning, its manifest): {m['summary_eval_loss']:.4f}; a model "
        f"knowing only the training summaries' token frequencies: {unigram:.4f} "
        "(the 'untrained' figures below are the base model's: LoRA starts as the identity)"
    )


# Guessers that use no model, printed beside the untrained model: key -> a function that describes them.
BASELINES = {
    "bert": bert_baselines,
    "rnnt": rnnt_guesser,
    "llama31_8b": llama_baselines,
    "deepseekv3_671b": deepseek_baselines,
    "llama2_70b_lora": lora_baselines,
}


def deciding(spec, curve, success: bool) -> str:
    """The last evaluation below the target and the first at or above it, in standard errors from the target.

    The curve holds the headline field alone (maskrcnn: BBOX, not SEGM), so whether an evaluation reached
    every field comes from the run: a successful run stops at the first that did, its last.
    """
    se = getattr(spec, "metric_se", None)
    first = len(curve) - 1 if success and curve else None
    picks = [curve[-1]] if first is None else curve[max(0, first - 1) : first + 1]
    shown = [f"{q:.4f} at {e:g}" + (f" ({(q - spec.target) / se:+.1f} SE)" if se else "") for _, e, q in picks]
    return " -> ".join(shown) + ("" if first is not None else " (never reached)") if picks else "none"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("benchmark", help="benchmark key (mini scale)")
    p.add_argument("--runs", type=int, default=10, help="calibration seeds (default 10)")
    p.add_argument(
        "--seed", type=int, default=seeds.CALIBRATION_SEEDS[0], help="first calibration seed (default 100001)"
    )
    p.add_argument("--out", type=Path, help="output folder (default /tmp/<benchmark>-calibration)")
    p.add_argument("--data-dir", type=Path, default=default_data_dir())
    p.add_argument("--untrained-only", action="store_true", help="skip the runs; evaluate untrained models only")
    p.add_argument("--precision", help="passed to `trainperf run --precision` (default: the run's own, auto)")
    p.add_argument("--compile", action="store_true", help="passed to `trainperf run` (torch.compile of the model)")
    a = p.parse_args()
    spec = registry.get_spec(a.benchmark, "mini")
    if a.seed not in seeds.CALIBRATION_SEEDS or a.seed + a.runs - 1 not in seeds.CALIBRATION_SEEDS:
        p.error(f"calibration seeds come from {seeds.CALIBRATION_SEEDS.start}..{seeds.CALIBRATION_SEEDS.stop - 1}")
    out = a.out or Path(f"/tmp/{a.benchmark}-calibration")
    print(f"target {spec.target_text}")
    if not a.untrained_only:
        cmd = [sys.executable, "-m", "trainperf", "run", a.benchmark, "--runs", str(a.runs), "--seed", str(a.seed)]
        cmd += [*(["--precision", a.precision] if a.precision else []), *(["--compile"] if a.compile else [])]
        rc = subprocess.call([*cmd, "--out", str(out), "--data-dir", str(a.data_dir), "--quiet"])
        if rc not in (0, 1):  # 1: some runs did not reach the target, which is a calibration's finding
            p.exit(rc, f"calibrate: the runs stopped with exit code {rc} (above); {out} was not read\n")
        summary = json.loads((out / "summary.json").read_text())["benchmarks"][0]
        for r in summary["runs"]:
            curve = r.get("curve") or []
            last = curve[-1] if curve else (0, 0, float("nan"))
            print(
                f"seed {r['seed']}: {r['status']:8s} {r['minutes'] * 60:6.1f} s  {spec.unit} {last[1]:.2f}  "
                f"{spec.metric} {last[2]:.4f}  data load {r.get('load_seconds', float('nan')):.2f} s  "
                f"overhead {100 * r.get('harness_overhead', float('nan')):.2f}%  "
                f"peak RSS {r.get('peak_rss_mib', float('nan')):.0f} MiB"
            )
            print(f"    deciding evaluations {deciding(spec, curve, r['status'] == 'success')}")
        ok = [r["minutes"] * 60 for r in summary["runs"] if r["status"] == "success"]
        print(
            f"reached: {len(ok)}/{len(summary['runs'])}; median time-to-train "
            f"{statistics.median(ok) if ok else float('nan'):.1f} s; score {summary['score_minutes']} min "
            f"({summary['score_label']})"
        )
    if a.benchmark in BASELINES:
        print(BASELINES[a.benchmark](a.data_dir))
    import torch

    torch.set_num_threads(2)
    untrained = [untrained_quality(a.benchmark, a.seed + i, a.data_dir) for i in range(a.runs)]
    for field in untrained[0]:
        print(f"untrained {field}: " + ", ".join(f"{q[field]:.4f}" for q in untrained))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
