"""`trainperf package` and `trainperf review`: thin handlers over package.py and review.py."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from trainperf.arguments import add_force_argument
from trainperf.fileio import Output, check_outputs, write_output
from trainperf.spec import MLPERF_RULESET
from trainperf.text import printable, shell_command

DEFAULT_ORG = "trainperf-user"  # the default of `trainperf run --org`
REVIEW_MARK = b'"written_by": "trainperf review"'  # the first key of every --json file review writes


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "package",
        help="assemble run folders into an MLCommons submission package",
        description="Assemble trainperf output folders into an MLCommons Training submission package: "
        "OUT/<org>/systems, OUT/<org>/results/<system>/<benchmark>/result_<i>.txt and "
        "OUT/<org>/benchmarks/<benchmark>/implementations/trainperf (code, spec, recipe, rules). "
        "Every log's submission_org must be the org; an existing package is never overwritten.",
    )
    p.add_argument("results", nargs="+", type=Path, metavar="RESULTS", help="output folders of `trainperf run`")
    p.add_argument("-o", "--out", type=Path, required=True, help="where to write the package (it becomes OUT/<org>)")
    p.add_argument(
        "--org",
        default=DEFAULT_ORG,
        help=f"the submitting organization; must match the runs' submission_org (default: {DEFAULT_ORG})",
    )
    p.add_argument(
        "--round",
        default=None,
        metavar="ROUND",
        help="the MLPerf Training round the package is for (e.g. 2.0, 6.1); every result must be of it "
        "(default: the round of the benchmarks the results hold, which must be one)",
    )
    p.set_defaults(func=cmd_package)

    r = subparsers.add_parser(
        "review",
        help="review a submission package with the official MLCommons tools",
        description="Review a submission package, in this order: the official package_checker (the ruleset of "
        f"the package's round: --ruleset, else {MLPERF_RULESET} for trainperf's packages, else the round of the "
        "results repository it is in or of its logs' dates and benchmarks), the compliance checker on every "
        "result file (mini logs against trainperf's mini rules), distinct seeds, the official rcp_checker "
        "(trainperf's own RCPs at the mini scale) and the "
        "official result_summarizer, whose score is shown beside trainperf's. Prints one verdict per "
        "benchmark; exits 1 when any fails. The package is only read: the tools run on a private copy.",
    )
    r.add_argument("package", type=Path, metavar="DIR", help="the package's <org> folder (or the folder holding it)")
    r.add_argument("-v", "--verbose", action="store_true", help="also print the official tools' own output")
    r.add_argument(
        "--json",
        type=Path,
        metavar="FILE",
        help="also write the verdicts, errors, warnings and scores to FILE (JSON), outside the package",
    )
    add_force_argument(r)
    r.add_argument(
        "-j",
        "--jobs",
        type=_jobs,
        default=None,
        metavar="N",
        help="official-tool processes run at once at most (a package's tools run in one; default: the CPUs this "
        "process may use); the verdicts are the same for any N",
    )
    r.add_argument(
        "--ruleset",
        metavar="X.Y.Z",
        help="the MLPerf Training ruleset (round) to review by, e.g. 1.1.0 (default: the package's own round)",
    )
    r.set_defaults(func=cmd_review)


def _jobs(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= 256:
        raise argparse.ArgumentTypeError(f"--jobs takes a whole number from 1 to 256, not {text!r}")
    return n


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def cmd_package(args: argparse.Namespace) -> int:
    from trainperf.submission.package import build_package

    dest = build_package(list(args.results), args.out, org=args.org, round_version=args.round)
    files = sorted((dest / "results").glob("*/*/result_*.txt"))
    benchmarks = sorted({f"{f.parent.name} on {f.parent.parent.name}" for f in files})
    print(printable(f"package written: {dest} ({len(files)} result files: {', '.join(benchmarks)})"))
    print(f"check it with: {shell_command('trainperf', 'review', dest)}")
    return 0


def cmd_review(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from trainperf.submission.review import review

    outputs = [Output(args.json, "--json", REVIEW_MARK)] if args.json is not None else []
    check_outputs(outputs, reading=[args.package], force=args.force)  # before the package is read
    console = Console(stderr=True)
    with Progress(
        TextColumn("reviewing"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("tool runs"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as bar:
        task = bar.add_task("review", total=None)
        result = review(
            args.package,
            jobs=args.jobs or _usable_cpus(),
            progress=lambda done, total: bar.update(task, completed=done, total=total),
            ruleset=args.ruleset,
        )
    if args.verbose:
        for tool, text in result.raw.items():
            print(printable(f"--- {tool} ---\n{text.rstrip()}\n"))
    print(printable("\n".join(format_review(result))))
    if args.json is not None:
        from trainperf.submission.review import review_json

        write_output(args.json, json.dumps(review_json(result), indent=2) + "\n", what="the review's JSON")
    return 0 if result.passed else 1


def format_review(r: Any) -> list[str]:
    """A :class:`trainperf.submission.review.Review` as plain lines: one verdict per benchmark, with reasons."""
    from trainperf.submission.power import joules_text
    from trainperf.submission.review import minutes_text

    ruleset = getattr(r, "ruleset", MLPERF_RULESET)
    source = getattr(r, "ruleset_source", "")
    lines = [
        f"Review of {r.package} (org {r.org}; official tools: MLPerf Training ruleset {ruleset}"
        + (f", {source}" if source else "")
        + ")"
    ]
    lines += [f"  official tools {r.confinement}"] if r.confinement else []
    lines += [f"  - {p}" for p in r.problems]
    lines += [f"  warning: {w}" for w in r.warnings]
    for v in r.verdicts:
        if v.score is None or v.score.minutes is None:
            ours = "no score"
        else:
            ours = f"{v.score.label} {minutes_text(v.score.minutes)}" + (" (olympic)" if v.score.valid else "")
            if v.scaling is not None:
                ours += f", x{v.scaling:g} (scaling.json) = {minutes_text(v.scaled_minutes)} as published"
        lines.append(
            f"{'PASS' if v.passed else 'FAIL'} {v.benchmark} on {v.system} ({v.scale}, {v.runs} runs): "
            f"trainperf {ours} | result_summarizer {minutes_text(v.summarizer_minutes)}"
        )
        if getattr(v, "has_power", False):
            ours = joules_text(v.energy_joules)
            if v.scaling is not None and v.energy_joules is not None:
                ours += f", x{v.scaling:g} (scaling.json) = {joules_text(v.scaled_energy_joules)} as published"
            theirs = joules_text(v.summarizer_energy_joules)
            if getattr(v, "power_withheld", False):
                theirs = "cannot read these power logs (the energy is the round's own summarizer's formula)"
            lines.append(f"  energy to train: trainperf {ours} | result_summarizer {theirs}")
        lines += [f"  - {p}" for p in v.problems]
        lines += [f"  warning: {w}" for w in v.warnings]
        lines.append(f"  RCP: {v.rcp}")
    if r.passed:
        lines.append(f"PASSED: {len(r.verdicts)} benchmark(s)")
    else:
        failed = sum(not v.passed for v in r.verdicts)
        parts = [f"{failed} of {len(r.verdicts)} benchmark(s) fail"] if failed else []
        parts += ["the package has problems (listed at the top)"] if r.problems else []
        parts += ["no benchmark to review"] if not r.verdicts else []
        lines.append(f"FAILED: {'; '.join(parts)}")
    return lines
