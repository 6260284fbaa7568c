"""A mini calibration of two checkouts, alternating: is a change's time-to-train unchanged?

    flock /tmp/trainperf-cpu.lock python benchmarks/calibration_ab.py minigo --base ../base --out /tmp/ab

For each calibration seed (``--seed``, ``--runs``), one run of the mini benchmark in each checkout
(``python -m trainperf run KEY --runs 1 --seed S``, the checkout's own code on ``PYTHONPATH``), the order
swapped from one seed to the next (base first on odd seeds), so that a drift of the machine's speed over the
minutes falls on both sides alike. Two calibrations run one after the other instead (all of one, then all of
the other) can differ by several per cent on this shared machine with the same code. Prints each seed's
time-to-train, stop and metric on both sides, the medians and their ratio, and whether every seed stopped at
the same point with the same metric; ``--json`` writes the same. Wrap it in the CPU lock; it runs ``2 x runs``
trainings (minigo about 65 s each, unet3d 1-4 minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from trainperf import seeds
from trainperf.paths import default_data_dir

HERE = Path(__file__).resolve().parents[1]


def order(seed: int) -> tuple[str, str]:
    """Which side runs first for ``seed``: base on odd seeds, this checkout on even ones."""
    return ("base", "now") if seed % 2 else ("now", "base")


def run_one(checkout: Path, key: str, seed: int, out: Path, data_dir: Path) -> dict:
    """One mini run of ``key`` at ``seed`` with ``checkout``'s code; its run record from ``summary.json``."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    cmd = [sys.executable, "-m", "trainperf", "run", key, "--runs", "1", "--seed", str(seed)]
    cmd += ["--out", str(out), "--data-dir", str(data_dir), "--quiet"]
    rc = subprocess.call(cmd, cwd=checkout, env=env)
    summary = out / "summary.json"
    if rc not in (0, 1) or not summary.is_file():  # 1: the run missed the target, a finding, not a failure
        raise SystemExit(f"calibration_ab: {' '.join(cmd)} in {checkout} stopped with exit code {rc}")
    return json.loads(summary.read_text())["benchmarks"][0]["runs"][0]


def compare(records: dict[str, list[dict]]) -> dict:
    """Both sides' seconds, medians, ratio (now / base) and whether each seed stopped alike."""
    secs = {side: [r["minutes"] * 60 for r in runs] for side, runs in records.items()}
    medians = {side: statistics.median(v) for side, v in secs.items()}
    same = all(
        (a["status"], a.get("progress"), a.get("quality")) == (b["status"], b.get("progress"), b.get("quality"))
        for a, b in zip(records["now"], records["base"], strict=True)
    )
    return {
        "seconds": secs,
        "medians": medians,
        "ratio": medians["now"] / medians["base"],
        "same_stops_and_metrics": same,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("benchmark", help="benchmark key (mini scale)")
    p.add_argument("--base", type=Path, required=True, help="the other checkout (e.g. a git worktree of the old code)")
    p.add_argument("--now", type=Path, default=HERE, help="the checkout measured against it (default this one)")
    p.add_argument("--runs", type=int, default=5, help="calibration seeds (default 5)")
    p.add_argument("--seed", type=int, default=seeds.CALIBRATION_SEEDS[0], help="first seed (default 100001)")
    p.add_argument("--out", type=Path, default=Path("/tmp/calibration-ab"), help="run folders go here")
    p.add_argument("--data-dir", type=Path, default=default_data_dir())
    p.add_argument("--json", type=Path, help="also write the comparison here")
    a = p.parse_args(argv)
    for flag, checkout in (("--base", a.base), ("--now", a.now)):
        if not (checkout / "trainperf" / "__init__.py").is_file():
            p.error(f"{flag} {checkout}: no trainperf/__init__.py there; give a checkout of trainperf")
    wanted = range(a.seed, a.seed + a.runs)
    if a.runs < 1 or wanted[0] not in seeds.CALIBRATION_SEEDS or wanted[-1] not in seeds.CALIBRATION_SEEDS:
        p.error(f"calibration seeds come from {seeds.CALIBRATION_SEEDS.start}..{seeds.CALIBRATION_SEEDS.stop - 1}")
    checkouts = {"now": a.now.resolve(), "base": a.base.resolve()}
    records: dict[str, list[dict]] = {"now": [], "base": []}
    for seed in wanted:
        for side in order(seed):
            record = run_one(checkouts[side], a.benchmark, seed, a.out / f"{side}-{seed}", a.data_dir)
            records[side].append(record)
            print(
                f"{side:4s} seed {seed}: {record['status']:8s} {record['minutes'] * 60:6.1f} s  "
                f"progress {record.get('progress')}  metric {record.get('quality')}",
                flush=True,
            )
    result = compare(records)
    for side in ("now", "base"):
        times = ", ".join(f"{s:.1f}" for s in result["seconds"][side])
        print(f"{side:4s}: {times} s; median {result['medians'][side]:.1f} s")
    print(
        f"median now / base = {result['ratio']:.3f}; every seed's stop and metric the same: "
        f"{'yes' if result['same_stops_and_metrics'] else 'NO'}"
    )
    if a.json:
        a.json.write_text(json.dumps({"benchmark": a.benchmark, "seeds": list(wanted), **result}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
