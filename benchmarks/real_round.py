"""Review a whole published MLPerf Training results repository and print how far trainperf agrees with MLCommons.

    python benchmarks/real_round.py ROUND [--orgs A,B] [--json FILE] [--jobs N] [--ruleset X.Y.Z]
                                     [--published-energy CSV]

ROUND is a folder holding one ``<org>/`` package per submitter (systems/ and results/), e.g. the files of the
mlcommons/training_results_v2.0 repository. Every (system, benchmark) of every org is reviewed with
``trainperf.submission.review.review`` and compared with the published score of trainperf's shipped history
table (trainperf/history/data/mlperf_training_results.csv, the round taken from the folder's name or --round).
Printed: per org the pairs, how many are accepted, how many of trainperf's scores equal the published one to three
decimals (the raw score, times scaling.json's factor where the committee gave one), how many pairs have power logs
and how many of trainperf's energy scores equal the official result_summarizer's (the tool MLCommons' results
tables, energy included, come from; the history table holds no energy) or, where the installed summarizer cannot
read the power logs, the published one of --published-energy (a CSV: org, system, benchmark, energy_joules as
published, scaling.json's factor applied; benchmarks/data/published_energy_v4.0.csv for v4.0), errors and warnings
by kind, and the time; then every rejected pair with its errors. --json writes every verdict. Each org is reviewed by
the ruleset of its round as review finds it (--ruleset: that one for every org); the rulesets used are printed.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainperf.submission.review import review, review_json  # noqa: E402

HISTORY = ROOT / "trainperf" / "history" / "data" / "mlperf_training_results.csv"


def published(round_name: str) -> dict[tuple[str, str, str], dict[str, str]]:
    with HISTORY.open(newline="", encoding="utf-8") as f:
        return {(r["org"], r["system"], r["benchmark"]): r for r in csv.DictReader(f) if r["round"] == round_name}


def review_org(org_dir: str, jobs: int, ruleset: str | None = None) -> dict[str, Any]:
    start = time.perf_counter()
    try:
        data = review_json(review(Path(org_dir), jobs=jobs, ruleset=ruleset))
    except Exception as e:  # noqa: BLE001 - one org's failure is a row of the table, not the end of the run
        data = {
            "org": Path(org_dir).name,
            "passed": False,
            "verdicts": [],
            "errors": [{"kind": "crash", "text": repr(e)}],
        }
    data["seconds"] = time.perf_counter() - start
    return data


def _same(ours: float | None, theirs: str) -> bool:
    """Equal to three decimals: within half a unit of the third decimal of the published score (ASUSTeK's v2.0
    maskrcnn is 79.8345 minutes, published 79.835; in floating point it reads 79.83449999999999)."""
    return ours is not None and theirs not in ("", None) and abs(ours - float(theirs)) <= 0.0005 + 1e-9


def _energy_same(v: dict[str, Any], published: float | None = None) -> bool:
    """trainperf's energy score equal, to a part in 10^9, to the official result_summarizer's (the table MLCommons
    publishes energy from) or, for power logs kept from the installed summarizer, to the ``published`` one (scaled
    by scaling.json's factor, as published)."""
    a, b = v.get("energy_joules"), v.get("summarizer_energy_joules")
    if v.get("power_withheld"):
        a, b = v.get("scaled_energy_joules"), published
    return a is not None and b is not None and abs(a - b) <= 1e-9 * max(abs(a), abs(b))


def published_energy(path: Path | None) -> dict[tuple[str, str, str], float]:
    if path is None:
        return {}
    with path.open(newline="", encoding="utf-8") as f:
        return {(r["org"], r["system"], r["benchmark"]): float(r["energy_joules"]) for r in csv.DictReader(f)}


def table_lines(
    results: list[dict[str, Any]],
    table: dict[tuple[str, str, str], dict[str, str]],
    round_name: str,
    total: float,
    jobs: int,
    energy_table: dict[tuple[str, str, str], float] | None = None,
) -> list[str]:
    """The agreement table (per org: pairs, accepted, score equal to the published one, pairs with power logs and
    whose energy equals the summarizer's, errors, warnings, time), the errors and warnings by kind, and every
    rejected pair with its errors."""
    rows, rejected = [], []
    errors: Counter[str] = Counter()
    warnings: Counter[str] = Counter()
    sums: Counter[str] = Counter()
    for r in results:
        n = len(r["verdicts"])
        accepted = sum(v["accepted"] and not r["errors"] for v in r["verdicts"])
        equal = power = energy = 0
        for v in r["verdicts"]:
            row = table.get((r["org"], v["system"], v["benchmark"]))
            ours = v["scaled_minutes"] if v["scaling_factor"] else v["score_minutes"]
            equal += bool(row and _same(ours, row["score_min"]))
            power += bool(v.get("power_logs"))
            energy += _energy_same(v, (energy_table or {}).get((r["org"], v["system"], v["benchmark"])))
            errors.update(f["kind"] for f in v["errors"])
            warnings.update(f["kind"] for f in v["warnings"])
            if not v["accepted"] or r["errors"]:
                rejected.append((r["org"], v, r["errors"]))
        errors.update(f["kind"] for f in r["errors"])
        warnings.update(f["kind"] for f in r.get("warnings", []))
        n_err = sum(len(v["errors"]) for v in r["verdicts"]) + len(r["errors"])
        n_warn = sum(len(v["warnings"]) for v in r["verdicts"]) + len(r.get("warnings", []))
        rows.append((r["org"], n, accepted, equal, power, energy, n_err, n_warn, r["seconds"]))
        sums.update(pairs=n, accepted=accepted, equal=equal, power=power, energy=energy, errors=n_err, warnings=n_warn)
    out = [
        f"| org ({round_name}) | pairs | accepted | score = published | power logs | energy = summarizer's/published "
        "| errors "
        "| warnings | time (s) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    out += [
        f"| {o} | {n} | {a} | {e} | {p} | {en} | {ne} | {nw} | {sec:.1f} |" for o, n, a, e, p, en, ne, nw, sec in rows
    ]
    s = sums
    out.append(
        f"| all {len(rows)} orgs | {s['pairs']} | {s['accepted']} | {s['equal']} | {s['power']} | {s['energy']} | "
        f"{s['errors']} | {s['warnings']} | {total:.1f} (wall, --jobs {jobs}) |"
    )
    used = Counter(f"{r.get('ruleset')} ({r.get('ruleset_source', '').split(' (')[0]})" for r in results)
    out.append("\nrulesets: " + ", ".join(f"{k}: {n} org(s)" for k, n in used.most_common()))
    out.append("errors by kind: " + (", ".join(f"{k} {n}" for k, n in errors.most_common()) or "none"))
    out.append("warnings by kind: " + (", ".join(f"{k} {n}" for k, n in warnings.most_common()) or "none"))
    out += ["\nrejected:"] if rejected else []
    for org, v, package_errors in rejected:
        out.append(f"- {org} {v['system']}/{v['benchmark']}:")
        out += [f"    [{f['kind']}] {f['text'][:400]}" for f in v["errors"] + package_errors]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("round", type=Path, help="the results repository's files (one <org>/ folder per submitter)")
    ap.add_argument("--orgs", help="only these orgs, comma-separated")
    ap.add_argument("--round", dest="round_name", help="the round in the history table (default: from the folder)")
    ap.add_argument("--json", type=Path, help="write every org's review (verdicts, findings, scores) here")
    ap.add_argument(
        "--jobs", type=int, default=2, help="official-tool processes each review runs at once (review --jobs)"
    )
    ap.add_argument(
        "--ruleset", help="review every org by this ruleset (default: each org's round, as review finds it)"
    )
    ap.add_argument(
        "--published-energy",
        type=Path,
        help="a CSV of published energy scores (org, system, benchmark, energy_joules) for power logs the installed "
        "summarizer cannot read",
    )
    args = ap.parse_args(argv)
    round_name = args.round_name or ("v" + m[1] if (m := re.search(r"(\d+\.\d+)", args.round.name)) else "")
    table = published(round_name)
    orgs = sorted(p for p in args.round.iterdir() if (p / "results").is_dir())
    if args.orgs:
        orgs = [p for p in orgs if p.name in args.orgs.split(",")]
    start = time.perf_counter()
    results = []
    for p in orgs:  # one org at a time, its review running --jobs official-tool processes at once
        r = review_org(str(p), max(1, args.jobs), args.ruleset)
        results.append(r)
        print(f"{r['org']}: {len(r['verdicts'])} pairs, {r['seconds']:.1f} s", file=sys.stderr, flush=True)
    total = time.perf_counter() - start
    for line in table_lines(results, table, round_name, total, args.jobs, published_energy(args.published_energy)):
        print(line)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
