"""Calibrate the mini rnnt target: time-to-train over several seeds, an untrained model's WER and a guesser's.

    python benchmarks/rnnt_calibration.py --runs 10 --out /tmp/rnnt-calibration

Runs the default recipe through the real harness (`trainperf run rnnt --runs N --seed S`, with its strict time
budget), then scores two baselines with the same evaluation code: the untrained model (same seeds) and a
guesser that answers every evaluation utterance with the most frequent training transcript. Seeds come from
trainperf's calibration range (``trainperf.seeds.CALIBRATION_SEEDS``, 100001 and up), which no default run can
draw. ``--baselines-only`` skips the runs. The figures go in trainperf/workloads/rnnt/README.md.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import subprocess
import sys
from pathlib import Path

import jiwer
import torch

from trainperf import registry, seeds
from trainperf.cli import default_data_dir
from trainperf.dist import DistContext
from trainperf.harness.runner import seed_everything
from trainperf.spec import RunConfig


def mini_workload(seed: int, data_dir: Path):
    spec = registry.get_spec("rnnt", "mini")
    recipe = registry.default_recipe("rnnt", "mini")
    w = registry.workload_class("rnnt")(spec, recipe, RunConfig(seed=seed), data_dir=data_dir, dist=DistContext())
    w.prepare()
    w.load_data()
    return w


def untrained_wer(seed: int, data_dir: Path) -> float:
    w = mini_workload(seed, data_dir)
    seed_everything(seed)
    return w.evaluate(w.build_model())["wer"]


def guesser_wer(data_dir: Path) -> tuple[str, float]:
    """The most frequent training transcript, answered for every evaluation utterance."""
    w = mini_workload(seeds.CALIBRATION_SEEDS[0], data_dir)
    guess, _ = collections.Counter(u.transcript for u in w.train).most_common(1)[0]
    refs = [u.transcript for u in w.eval]
    return guess, jiwer.wer(refs, [guess] * len(refs))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=10, help="calibration seeds (default 10)")
    p.add_argument("--seed", type=int, default=seeds.CALIBRATION_SEEDS[0], help="first calibration seed (100001)")
    p.add_argument("--out", type=Path, default=Path("/tmp/rnnt-calibration"))
    p.add_argument("--data-dir", type=Path, default=default_data_dir())
    p.add_argument("--baselines-only", action="store_true", help="only the untrained model and the guesser")
    a = p.parse_args()
    if a.seed not in seeds.CALIBRATION_SEEDS or a.seed + a.runs - 1 not in seeds.CALIBRATION_SEEDS:
        p.error(f"calibration seeds come from {seeds.CALIBRATION_SEEDS.start}..{seeds.CALIBRATION_SEEDS.stop - 1}")
    spec = registry.get_spec("rnnt", "mini")
    print(f"target {spec.target_text}")
    if not a.baselines_only:
        cmd = [sys.executable, "-m", "trainperf", "run", "rnnt", "--runs", str(a.runs), "--seed", str(a.seed)]
        subprocess.call([*cmd, "--out", str(a.out), "--data-dir", str(a.data_dir), "--quiet"])
        summary = json.loads((a.out / "summary.json").read_text())["benchmarks"][0]
        for r in summary["runs"]:
            curve = r.get("curve") or []
            shown = ", ".join(f"{e:g}: {q:.3f}" for _, e, q in curve)
            print(
                f"seed {r['seed']}: {r['status']:8s} {r['minutes'] * 60:6.1f} s  WER by epoch {shown}  "
                f"data load {r.get('load_seconds', float('nan')):.1f} s  peak RSS {r.get('peak_rss_mib', 0):.0f} MiB"
            )
        ok = [r["minutes"] * 60 for r in summary["runs"] if r["status"] == "success"]
        print(
            f"reached: {len(ok)}/{len(summary['runs'])}; median time-to-train "
            f"{statistics.median(ok) if ok else float('nan'):.1f} s; score {summary['score_minutes']} min "
            f"({summary['score_label']})"
        )
    torch.set_num_threads(2)
    guess, wer = guesser_wer(a.data_dir)
    print(f"most-frequent-transcript guesser ({guess!r}): WER {wer:.4f}")
    untrained = [untrained_wer(a.seed + i, a.data_dir) for i in range(min(a.runs, 3))]
    print("untrained WER: " + ", ".join(f"{q:.4f}" for q in untrained))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
