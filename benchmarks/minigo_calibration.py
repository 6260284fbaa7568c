"""Calibrate the mini minigo target: time-to-train of the default recipe over calibration seeds.

    python benchmarks/minigo_calibration.py --runs 10 --out /tmp/minigo-calibration

Runs the default recipe through the real harness (`trainperf run minigo --seed S --runs N`, seeds from
``trainperf.seeds.calibration_seeds``), then prints, per seed, its status and time-to-train and the curve
of every evaluation: the 40-game screen's win rate and, where the screen reached the target, the
confirmation's (read from the logs' ``eval_accuracy`` and ``trainperf_eval_details`` lines). On a shared
machine run the seeds in batches (``--first 100001 --runs 3``, ``--first 100004 --runs 3``, ... each into
its own folder) and print them together with ``--report DIR DIR ...``. While the runs go, the resident
memory of the whole process tree (the run, its self-play workers and the GNU Go opponents) is sampled
every 0.25 s and its peak printed (pages the forked workers share count once per process: an upper
bound). The strength of networks that do not learn is measured by ``benchmarks/minigo_strength.py``;
the false-pass probability by ``benchmarks/minigo_false_pass.py``. The figures go in
trainperf/workloads/minigo/README.md. Wrap it in `flock /tmp/trainperf-cpu.lock`.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

from trainperf import registry, seeds
from trainperf.errors import ResultsError
from trainperf.paths import default_data_dir
from trainperf.results import parse_run, read_mllog


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


def evaluations(log: Path) -> list[dict]:
    """Per evaluation: generation, minutes since run_start, the logged win rate and the details."""
    records = read_mllog(log)
    t0 = next(float(r["time_ms"]) for r in records if r["key"] == "run_start")
    out: dict[float, dict] = {}
    for r in records:
        if r["key"] in ("eval_accuracy", "trainperf_eval_details"):
            g = float((r.get("metadata") or {}).get("epoch_num", 0))
            row = out.setdefault(g, {"generation": g})
            if r["key"] == "eval_accuracy":
                row["win_rate"] = float(r["value"])
                row["minutes"] = (float(r["time_ms"]) - t0) / 60000
            else:
                row.update(r["value"])
    return [out[g] for g in sorted(out)]


def report(folders: list[Path]) -> None:
    spec = registry.get_spec("minigo", "mini")
    print(
        f"target {spec.target_text}; budget {spec.max_progress:g} generations (runaway guard {spec.max_minutes:g} min)"
    )
    times, runs = [], 0
    for folder in folders:
        for log in sorted((folder / "results").rglob("result_*.txt")):
            try:
                run = parse_run(log)
            except ResultsError as e:
                print(f"{log}: not counted ({e})")
                continue
            if run.minutes is None:
                print(f"{log}: no run_stop (interrupted), not counted")
                continue
            runs += 1
            evals = evaluations(log)
            status = run.status  # the budget is generations: a success within them counts however long it took
            if status == "success":
                times.append(run.minutes * 60)
            curve = " ".join(
                f"{e.get('screen_win_rate', e['win_rate']):.3f}"
                + (f"/{e['confirmation_win_rate']:.3f}" if "confirmation_win_rate" in e else "")
                for e in evals
            )
            per_colour = evals[-1] if evals else {}
            print(
                f"seed {run.seed}: {status:8s} {run.minutes * 60:6.1f} s  generations {len(evals)}  "
                f"last evaluation: Black {per_colour.get('black_wins', 0):.0f}/{per_colour.get('black_games', 0):.0f} "
                f"White {per_colour.get('white_wins', 0):.0f}/{per_colour.get('white_games', 0):.0f} "
                f"disagreements {sum(e.get('disagreements', 0) for e in evals):.0f}"
            )
            print(f"    screen[/confirmation] per generation: {curve}")
    median = statistics.median(times) if times else float("nan")
    print(f"reached within the budget: {len(times)}/{runs}; median time-to-train of those {median:.1f} s")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--first", type=int, default=seeds.calibration_seeds(1)[0], help="the first seed")
    p.add_argument("--out", type=Path, default=Path("/tmp/minigo-calibration"))
    p.add_argument("--data-dir", type=Path, default=default_data_dir())
    p.add_argument("--report", type=Path, nargs="+", help="only print the runs already in these folders")
    a = p.parse_args()
    if a.report:
        report(a.report)
        return 0
    if a.first not in seeds.CALIBRATION_SEEDS:
        print(f"--first {a.first}: calibration uses the seeds of trainperf.seeds.CALIBRATION_SEEDS", file=sys.stderr)
        return 2
    cmd = [sys.executable, "-m", "trainperf", "run", "minigo", "--runs", str(a.runs), "--seed", str(a.first)]
    cmd += ["--out", str(a.out), "--data-dir", str(a.data_dir), "--quiet"]
    rc, tree_peak = run_with_tree_rss(cmd)
    if rc not in (0, 1):  # 1: a run missed its target, which the calibration wants to see
        print(f"trainperf run exited with {rc}", file=sys.stderr)
        return rc
    report([a.out])
    print(f"peak resident memory of the whole process tree (run + workers + GNU Go): {tree_peak:.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
