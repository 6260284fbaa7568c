"""`trainperf report RESULTS... -o report.html`: the one-file HTML report (and a Markdown table)."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainperf.arguments import add_force_argument, real_number
from trainperf.text import printable

DEFAULT_REPORT = Path("report.html")


def cmd_report(args: argparse.Namespace) -> int:
    from trainperf.report.html import write_report

    history_png = None
    if args.history_round != "none":
        from trainperf.history.charts import fastest_bar_chart
        from trainperf.history.query import fastest, load_results

        rows = fastest(load_results(), division="closed", round=args.history_round)
        history_png = fastest_bar_chart(rows, f"Published MLPerf Training {args.history_round}: fastest closed results")
    out = write_report(
        args.results,
        args.output,
        price_per_hour=args.price_per_hour,
        markdown=args.markdown,
        history_png=history_png,
        history_round=None if args.history_round == "none" else args.history_round,
        force=args.force,
    )
    print(printable(f"{out}: report written ({out.stat().st_size / 1024:.0f} KiB, one self-contained file)"))
    if args.markdown is not None:
        print(printable(f"{args.markdown}: Markdown table written"))
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "report",
        help="make a one-file HTML report (tables, charts, cost, energy) from result folders",
        description="Read the MLLOG result files of trainperf output folders or MLCommons submission "
        "folders (<org>/results/<system>/<benchmark>/result_<i>.txt with <org>/systems/<system>.json), "
        "score each benchmark by olympic scoring, and write one self-contained HTML file: summary table, "
        "time to train, run spread, convergence curves, per-accelerator time, cost and energy to train.",
    )
    p.add_argument("results", nargs="+", type=Path, metavar="RESULTS", help="result folders to report on")
    p.add_argument(
        "-o", "--output", type=Path, default=DEFAULT_REPORT, help=f"the HTML file to write (default: {DEFAULT_REPORT})"
    )
    p.add_argument(
        "--price-per-hour",
        type=real_number(0, 1e9),
        default=None,
        metavar="X",
        help="price of one hour of a whole system, to show the cost to train (minutes / 60 × X)",
    )
    p.add_argument("--markdown", type=Path, default=None, metavar="FILE", help="also write a Markdown table here")
    add_force_argument(p)
    p.add_argument(
        "--history-round",
        default="v2.0",
        metavar="ROUND",
        help="also chart the fastest published closed MLPerf results of this round, like the press releases, and "
        "place each reference-scale score among that round's published results (default v2.0, the round the "
        "reference scale mirrors; 'none' to leave the chart out and place scores in each benchmark's latest round)",
    )
    p.set_defaults(func=cmd_report)
    return p


__all__ = ["add_parser", "cmd_report"]
