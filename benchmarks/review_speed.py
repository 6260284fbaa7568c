"""`trainperf review`'s time against the official package_checker's on the same package, in the same run.

    python benchmarks/review_speed.py ORG_DIR [--repeats 5] [--jobs 2] [--ruleset X.Y.Z] [--profile FILE]

Each repeat times, in alternating order, (a) ``python -m mlperf_logging.package_checker`` on a private copy of the
package with the ruleset review chooses (the official tool alone, unconfined, as a submitter runs it) and (b)
``trainperf.submission.review.review`` with ``--jobs``. Printed: the medians and their ratio (review / checker).
``--profile FILE`` also writes a cProfile of one more review (the main process; the tools run in subprocesses).
"""

from __future__ import annotations

import argparse
import cProfile
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainperf.submission.review import review  # noqa: E402


def package_checker(org: Path, ruleset: str) -> float:
    with tempfile.TemporaryDirectory(prefix="review-speed-") as tmp:
        copy = Path(tmp) / org.name
        shutil.copytree(org / "systems", copy / "systems")
        shutil.copytree(org / "results", copy / "results")
        start = time.perf_counter()
        cmd = [sys.executable, "-m", "mlperf_logging.package_checker", str(copy), "training", ruleset]
        subprocess.run(cmd + ["--log_output", str(Path(tmp) / "pc.log")], cwd=tmp, capture_output=True, check=False)
        return time.perf_counter() - start


def one_review(org: Path, jobs: int, ruleset: str | None) -> tuple[float, str]:
    start = time.perf_counter()
    r = review(org, jobs=jobs, ruleset=ruleset)
    return time.perf_counter() - start, r.ruleset


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("org", type=Path)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--ruleset")
    ap.add_argument("--profile", type=Path)
    args = ap.parse_args(argv)
    _, ruleset = one_review(args.org, args.jobs, args.ruleset)  # warm-up, and the ruleset review chooses
    checker, reviewed = [], []
    for i in range(args.repeats):
        order = [0, 1] if i % 2 == 0 else [1, 0]
        for which in order:
            if which == 0:
                checker.append(package_checker(args.org, ruleset))
            else:
                reviewed.append(one_review(args.org, args.jobs, args.ruleset)[0])
    a, b = statistics.median(checker), statistics.median(reviewed)
    files = len(list(args.org.glob("results/*/*/result_*.txt")))
    print(f"{args.org.name} ({files} result files, ruleset {ruleset}), {args.repeats} repeats, medians:")
    print(f"  package_checker {a:.2f} s   review --jobs {args.jobs} {b:.2f} s   ratio {b / a:.2f}")
    if args.profile:
        cProfile.runctx("one_review(args.org, args.jobs, args.ruleset)", globals(), locals(), str(args.profile))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
