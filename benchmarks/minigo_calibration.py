"""Calibrate the mini minigo target: time-to-train over several seeds, and the untrained network's win rate.

    python benchmarks/minigo_calibration.py --runs 5 --out /tmp/minigo-calibration

Runs the default recipe through the real harness (`trainperf run minigo --runs N`), then evaluates the
untrained network (same seeds, same evaluation code) and prints both. While the runs go, the resident
memory of the whole process tree (the run, its self-play workers and the GNU Go opponents) is sampled
every 0.25 s and its peak printed: the harness's own ``peak_rss_mib`` counts the main process only.
The sum counts pages the forked workers share with the main process once per process, so it is an
upper bound. The figures go in trainperf/workloads/minigo/README.md. Wrap it in
`flock /tmp/trainperf-cpu.lock`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil
import torch

from trainperf import registry
from trainperf.cli import default_data_dir
from trainperf.dist import DistContext
from trainperf.harness.runner import seed_everything
from trainperf.spec import RunConfig


def untrained_quality(seed: int, data_dir: Path) -> float:
    """The win rate of the network a run of ``seed`` starts from (the harness seeds the same way)."""
    spec = registry.get_spec("minigo", "mini")
    recipe = registry.default_recipe("minigo", "mini")
    w = registry.workload_class("minigo")(spec, recipe, RunConfig(seed=seed), data_dir=data_dir, dist=DistContext())
    try:
        w.prepare()  # checks GNU Go (and starts the self-play workers, which evaluation does not use)
        seed_everything(seed)
        return w.evaluate(w.build_model())["win_rate"]
    finally:
        w.close()


def run_with_tree_rss(cmd: list[str]) -> tuple[int, float]:
    """Run ``cmd``; return its exit code and the peak summed RSS (MiB) of its process tree."""
    proc = subprocess.Popen(cmd)
    root = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        total = 0
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            procs = []
        for p in procs:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass  # a process that ended between the listing and the reading
        peak = max(peak, total)
        time.sleep(0.25)
    return proc.returncode, peak / 2**20


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=Path("/tmp/minigo-calibration"))
    p.add_argument("--data-dir", type=Path, default=default_data_dir())
    a = p.parse_args()
    cmd = [
        sys.executable,
        "-m",
        "trainperf",
        "run",
        "minigo",
        "--runs",
        str(a.runs),
        "--seed",
        str(a.seed),
        "--out",
        str(a.out),
        "--data-dir",
        str(a.data_dir),
        "--quiet",
    ]
    rc, tree_peak = run_with_tree_rss(cmd)
    if rc not in (0, 1):  # 1: a run missed its target, which the calibration wants to see
        print(f"trainperf run exited with {rc}", file=sys.stderr)
        return rc
    summary = json.loads((a.out / "summary.json").read_text())["benchmarks"][0]
    spec = registry.get_spec("minigo", "mini")
    print(f"target {spec.target_text}")
    for r in summary["runs"]:
        curve = r.get("curve") or []
        last = curve[-1] if curve else (0, 0, float("nan"))
        generations = r.get("progress", last[1])  # a resumed run's record has only its logged curve
        print(
            f"seed {r['seed']}: {r['status']:8s} {r['minutes'] * 60:6.1f} s  generations {generations:.0f}  "
            f"win rate {last[2]:.4f}  overhead {100 * r.get('harness_overhead', float('nan')):.2f}%  "
            f"peak RSS {r.get('peak_rss_mib', float('nan')):.0f} MiB"
        )
    ok = [r["minutes"] * 60 for r in summary["runs"] if r["status"] == "success"]
    print(
        f"reached: {len(ok)}/{len(summary['runs'])}; median time-to-train "
        f"{statistics.median(ok) if ok else float('nan'):.1f} s; score {summary['score_minutes']} min "
        f"({summary['score_label']})"
    )
    print(f"peak resident memory of the whole process tree (run + workers + GNU Go): {tree_peak:.0f} MiB")
    torch.set_num_threads(2)
    untrained = [untrained_quality(a.seed + i, a.data_dir) for i in range(a.runs)]
    print("untrained win rate: " + ", ".join(f"{q:.4f}" for q in untrained))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
