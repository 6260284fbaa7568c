"""The results table printed at the end of a suite."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

PIPED_WIDTH = 200  # a table printed to a pipe or file: its whole rows, never wrapped at rich's default 80 columns


def for_output(console: Console) -> Console:
    """``console`` on a terminal; piped, a console as wide as the table's rows (a script reads whole lines)."""
    if console.is_terminal:
        return console
    return Console(file=console.file, width=max(console.width, PIPED_WIDTH), quiet=console.quiet, soft_wrap=True)


def print_summary(console: Console, summaries: list[Any], options: Any) -> None:
    from trainperf import rounds

    console = for_output(console)
    versions = {s.benchmark: (r.version if (r := rounds.of_benchmark(s.benchmark)) else "") for s in summaries}
    named = f", round {next(iter(versions.values()))}" if len(set(versions.values())) == 1 else ""
    table = Table(title=f"trainperf {options.scale} results{named} — {options.out}")
    if not named:  # a suite of several rounds: each row says its own
        table.add_column("round", justify="left")
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
        cells = [] if named else [versions[s.benchmark] or "–"]
        table.add_row(
            *cells, s.benchmark, str(len(s.runs)), f"{score} {label}", spread, s.target, f"{ok}/{len(s.runs)}", note
        )
    console.print(table)
    console.print(f"logs: {options.out}/results/  summary: {options.out}/summary.json")
