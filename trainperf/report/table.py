"""The results table printed at the end of a suite."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def print_summary(console: Console, summaries: list[Any], options: Any) -> None:
    table = Table(title=f"trainperf {options.scale} results — {options.out}")
    for col, just in (
        ("benchmark", "left"),
        ("runs", "right"),
        ("score (min)", "right"),
        ("spread (min)", "right"),
        ("target", "left"),
        ("reached", "right"),
        ("note", "left"),
    ):
        table.add_column(col, justify=just)
    for s in summaries:
        ok = sum(1 for r in s.runs if r["status"] == "success")
        score = "–" if s.score.minutes is None else f"{s.score.minutes:.3f}"
        spread = "–" if s.score.spread is None else f"{s.score.spread:.3f}"
        label = s.score.label if s.score.valid or s.score.minutes is None else "[yellow]preview[/yellow]"
        note = s.score.note or "valid olympic score"
        if options.dry_run:
            note = "dry run: synthetic data, not a result"
        elif getattr(options, "smoke", False):
            note = "smoke run: a tiny real-format fixture, not a result"
        if s.interrupted:
            note += f"; {len(s.interrupted)} interrupted run(s) kept aside, not counted"
        table.add_row(s.benchmark, str(len(s.runs)), f"{score} {label}", spread, s.target, f"{ok}/{len(s.runs)}", note)
    console.print(table)
    console.print(f"logs: {options.out}/results/  summary: {options.out}/summary.json")
