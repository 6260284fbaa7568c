"""Calibrate the mini bert target: time-to-train over several seeds, an untrained model and the unigram guesser.

    python benchmarks/bert_calibration.py --runs 10 --out /tmp/bert-calibration

Runs the default recipe through the real harness (`trainperf run bert --runs N --seed S`, with its strict time
budget), then evaluates the untrained model (same seeds, same evaluation code) and prints both beside the two
baselines `trainperf data prepare bert` measured (the training set's most frequent masked token, and copying the
input token). Seeds come from trainperf's calibration range (``trainperf.seeds.CALIBRATION_SEEDS``). The
figures go in trainperf/workloads/bert/README.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

import torch

from trainperf import registry, seeds
from trainperf.cli import default_data_dir
from trainperf.dist import DistContext
from trainperf.harness.runner import seed_everything
from trainperf.harness.torch_state import torch_state
from trainperf.spec import RunConfig
from trainperf.workloads.bert import mini


def untrained_quality(seed: int, data_dir: Path) -> float:
    spec = registry.get_spec("bert", "mini")
    recipe = registry.default_recipe("bert", "mini")
    cls = registry.workload_class("bert")
    with torch_state(cls.TORCH_STATE):
        w = cls(spec, recipe, RunConfig(seed=seed), data_dir=data_dir, dist=DistContext())
        w.prepare()
        w.load_data()
        seed_everything(seed)
        return spec.headline(w.evaluate(w.build_model()))


def deciding(spec, curve) -> str:
    """The last evaluation below the target and the first at or above it, in standard errors from the target."""
    se = spec.metric_se
    first = next((i for i, (_, _, q) in enumerate(curve) if q >= spec.target), None)
    picks = [curve[-1]] if first is None else curve[max(0, first - 1) : first + 1]
    shown = [f"{q:.4f} at {e:g} samples" + (f" ({(q - spec.target) / se:+.1f} SE)" if se else "") for _, e, q in picks]
    return " -> ".join(shown) + ("" if first is not None else " (never reached)") if picks else "none"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=10, help="calibration seeds (default 10)")
    p.add_argument(
        "--seed", type=int, default=seeds.CALIBRATION_SEEDS[0], help="first calibration seed (default 100001)"
    )
    p.add_argument("--out", type=Path, default=Path("/tmp/bert-calibration"))
    p.add_argument("--data-dir", type=Path, default=default_data_dir())
    p.add_argument("--report-only", action="store_true", help="print the figures of an earlier --out")
    a = p.parse_args()
    if a.seed not in seeds.CALIBRATION_SEEDS or a.seed + a.runs - 1 not in seeds.CALIBRATION_SEEDS:
        p.error(f"calibration seeds come from {seeds.CALIBRATION_SEEDS.start}..{seeds.CALIBRATION_SEEDS.stop - 1}")
    if not a.report_only:
        cmd = [sys.executable, "-m", "trainperf", "run", "bert", "--runs", str(a.runs), "--seed", str(a.seed)]
        subprocess.call([*cmd, "--out", str(a.out), "--data-dir", str(a.data_dir), "--quiet"])
    summary = json.loads((a.out / "summary.json").read_text())["benchmarks"][0]
    spec = registry.get_spec("bert", "mini")
    print(f"target {spec.target_text}")
    for r in summary["runs"]:
        curve = r.get("curve") or []
        last = curve[-1] if curve else (0, 0, float("nan"))
        print(
            f"seed {r['seed']}: {r['status']:8s} {r['minutes'] * 60:6.1f} s  samples {last[1]:.0f}  "
            f"mlm_accuracy {last[2]:.4f}  data load {r.get('load_seconds', float('nan')):.2f} s  "
            f"peak RSS {r.get('peak_rss_mib', float('nan')):.0f} MiB  {r.get('samples_per_second', 0):.0f} samples/s"
        )
        print(f"    deciding evaluations {deciding(spec, curve)}")
    ok = [r["minutes"] * 60 for r in summary["runs"] if r["status"] == "success"]
    print(
        f"reached: {len(ok)}/{len(summary['runs'])}; median time-to-train "
        f"{statistics.median(ok) if ok else float('nan'):.1f} s; score {summary['score_minutes']} min "
        f"({summary['score_label']})"
    )
    manifest = mini.read_manifest(a.data_dir)
    print(
        f"unigram guesser (token {manifest['unigram_token']}): {manifest['unigram_accuracy']:.4f}; copying the input "
        f"token: {manifest['copy_accuracy']:.4f} ({manifest['eval_masked_tokens']} masked tokens)"
    )
    torch.set_num_threads(2)
    untrained = [untrained_quality(a.seed + i, a.data_dir) for i in range(a.runs)]
    print("untrained mlm_accuracy: " + ", ".join(f"{q:.4f}" for q in untrained))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
