"""`trainperf report`'s energy to train on a published package, against the energy MLCommons published.

    python benchmarks/report_energy.py <org folder> --published-energy benchmarks/data/published_energy_v4.0.csv

For each (system, benchmark) of the package: the report's runs and its energy score of the benchmark
(`trainperf.report.energy.energy_score`: the olympic mean of their energies over the runs the time score keeps, as
`review` and the summarizer take it), times the folder's scaling.json factor where it has one (the published figure
is scaled, the report's is not), and whether it equals the published energy to 1e-9. The org folder is a published
results repository's `<org>/` (e.g. `git archive` of training_results_v4.0's `smc-ac-power`, under a folder named
`training_results_v4.0` so that the round is known).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path

from trainperf.report.collect import collect
from trainperf.report.energy import energy_score


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("org", type=Path, help="a published package's <org>/ folder")
    ap.add_argument("--published-energy", type=Path, required=True, help="CSV: org, system, benchmark, energy_joules")
    ap.add_argument("--json", action="store_true", help="one JSON document instead of the table")
    args = ap.parse_args(argv)
    with args.published_energy.open() as f:
        published = {
            (r["system"], r["benchmark"]): float(r["energy_joules"])
            for r in csv.DictReader(f)
            if r["org"] == args.org.name
        }
    rows = []
    for system in collect([args.org]):
        for bench in system.benchmarks:
            runs = [(r.minutes if r.success else math.inf, r.energy_joules) for r in bench.runs]
            scaling = bench.runs[0].path.parent / "scaling.json"
            factor = float(json.loads(scaling.read_text())["scaling_factor"]) if scaling.is_file() else 1.0
            mean, how = energy_score(bench)
            ours = None if mean is None else mean * factor
            theirs = published.get((system.name, bench.benchmark))
            equal = ours is not None and theirs is not None and abs(ours - theirs) <= 1e-9 * theirs
            rows.append(
                {
                    "system": system.name,
                    "benchmark": bench.benchmark,
                    "round": bench.round,
                    "runs": len(runs),
                    "with_energy": sum(j is not None for _, j in runs),
                    "report_joules": ours,
                    "report_note": how,
                    "published_joules": theirs,
                    "equal": equal,
                }
            )
    if args.json:
        print(json.dumps({"org": args.org.name, "pairs": rows, "equal": sum(r["equal"] for r in rows)}, indent=2))
    else:
        print("| system | benchmark | round | runs (with energy) | report, J | published, J | equal |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for r in rows:
            ours = "none" if r["report_joules"] is None else f"{r['report_joules']:.6g}"
            theirs = "none" if r["published_joules"] is None else f"{r['published_joules']:.6g}"
            print(
                f"| {r['system']} | {r['benchmark']} | {r['round']} | {r['runs']} ({r['with_energy']}) | {ours} | "
                f"{theirs} | {'yes' if r['equal'] else 'no'} |"
            )
        print(f"\n{sum(r['equal'] for r in rows)} of {len(rows)} pairs equal to the published energy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
