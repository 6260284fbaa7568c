"""`trainperf list`: the benchmarks, their scales, targets, run counts and evaluation schedules."""

from __future__ import annotations

import argparse
from typing import Any

from trainperf import registry, rounds
from trainperf.spec import SCALES


def add_parser(subparsers: Any) -> None:
    ls = subparsers.add_parser(
        "list",
        help="list the benchmarks, their scales, targets, run counts and evaluation schedules",
        description="Every MLPerf benchmark key at each scale: whether trainperf runs it yet, the quality "
        "target, the runs olympic scoring needs, and when it evaluates (in its progress unit) within its budget.",
    )
    ls.add_argument("--details", action="store_true", help="also print each benchmark's model and dataset")
    ls.add_argument(
        "--round",
        default=rounds.DEFAULT_ROUND,
        metavar="ROUND",
        help=f"the MLPerf Training round: {', '.join(rounds.versions())} or all (default {rounds.DEFAULT_ROUND}); "
        "its benchmarks that trainperf does not implement yet are listed with their targets",
    )
    ls.add_argument("--json", action="store_true", help="print the rounds and benchmarks as JSON (for scripts)")
    ls.set_defaults(func=cmd_list)


def cmd_list(args: argparse.Namespace) -> int:
    from rich import box  # rich: 35 ms to import, not for `trainperf --help`
    from rich.console import Console
    from rich.table import Table

    from trainperf.report.table import for_output

    chosen = rounds.all_rounds() if args.round == "all" else (rounds.get(args.round),)
    if args.json:
        import json

        print(json.dumps([_round_json(r) for r in chosen], indent=2))
        return 0
    console = for_output(Console())  # piped: whole rows, as wide as they are
    for r in chosen:
        table, details, notes = _round_table(r, Table, box)
        console.print(table)
        for line in notes:
            console.print(line, highlight=False)
        if args.details:
            for line in details:
                console.print(line, highlight=False)
    console.print(
        "SE: bootstrap standard error of the (headline) metric over evaluation samples, measured at the target "
        "(benchmarks/metric_error.py); — : not measured. Other rounds: trainperf list --round "
        f"{'|'.join(rounds.versions())}|all",
        highlight=False,
    )
    return 0


def _round_json(r: rounds.Round) -> dict[str, Any]:
    out = []
    for entry in r.benchmarks:
        row: dict[str, Any] = {"benchmark": entry.key, "title": entry.title, "target": entry.target, "runs": entry.runs}
        if entry.implemented:
            bench = registry.benchmark(entry.key)
            row["scales"] = {
                scale: {
                    "available": bench.available_at(scale) and not spec.dry_run_only,
                    "target": spec.target_text,
                    "runs": spec.runs_required,
                    "unit": spec.unit,
                }
                for scale, spec in bench.specs.items()
            }
            # a scale the benchmark has no spec for yet: not implemented (llama2_70b_lora's mini)
            row["scales"] |= {s: {"available": False, "implemented": False} for s in SCALES if s not in bench.specs}
        else:
            row["scales"] = {}
        out.append(row)
    return {"round": r.version, "ruleset": r.ruleset, "title": r.title, "benchmarks": out}


def _round_table(r: rounds.Round, Table: Any, box: Any) -> tuple[Any, list[str], list[str]]:
    """One round's table: each implemented benchmark at each scale, then those not implemented yet."""
    table = Table(
        title=f"{r.title} (ruleset {r.ruleset}): trainperf benchmarks (models and data: trainperf list --details)",
        box=box.SIMPLE,
    )
    for col in ("benchmark", "scale", "status", "target", "SE", "runs", "unit", "evaluated", "budget"):
        table.add_column(col, no_wrap=col in ("benchmark", "scale", "unit"))
    details, notes = [], []
    for entry in r.benchmarks:
        if not entry.implemented:
            runs = f"{entry.runs} (-{entry.dropped}-{entry.dropped})"
            table.add_row(entry.key, "—", "not implemented yet", entry.target, "—", runs, "", "", "")
            details.append(f"{entry.key} ({entry.title}): not implemented in trainperf yet")
            continue
        bench = registry.benchmark(entry.key)
        for scale in (s for s in SCALES if s not in bench.specs):  # a scale not built yet: said, not hidden
            table.add_row(bench.key, scale, "not implemented yet", "", "—", "", "", "", "")
            details.append(f"{bench.key} ({scale}): not implemented in trainperf yet")
        for scale, spec in bench.specs.items():
            status = "ready" if bench.available_at(scale) and not spec.dry_run_only else "not available yet"
            if bench.available_at(scale) and spec.dry_run_only:
                notes.append(f"{bench.key} {scale}: not available yet, dry run only: {spec.dry_run_only}")
            runs = f"{spec.runs_required} (-{spec.runs_dropped}-{spec.runs_dropped})"
            recipe = bench.recipes.get(scale)
            by_recipe = " (by recipe)" if callable(spec.max_progress) and recipe is not None else ""
            budget = (
                f"{_figure_text(spec.max_progress, recipe, spec.budget)}{by_recipe} (guard {spec.max_minutes:g} min)"
            )
            table.add_row(
                bench.key,
                scale,
                status,
                spec.target_text,
                spec.metric_se_text,
                runs,
                spec.unit,
                _schedule_text(spec, recipe),
                budget,
            )
            details.append(f"{bench.key} ({scale}, {bench.title}): {spec.model}; data: {spec.dataset}")
    return table, details, notes


def _schedule_text(spec, recipe) -> str:
    """When a spec evaluates, in its own unit; figures computed from the recipe (the batch size) are shown for the
    default recipe and marked so."""
    every = _figure_text(spec.eval_interval, recipe, spec.interval)
    first = "" if spec.first_eval is None else f" from {_figure_text(spec.first_eval, recipe, spec.first)}"
    by_recipe = callable(spec.eval_interval) or callable(spec.first_eval)
    return f"every {every}{first}" + (" (by recipe)" if by_recipe and recipe is not None else "")


def _figure_text(value, recipe, of_recipe) -> str:
    """A schedule figure: a number as it is; a function of the recipe as its value for the default recipe."""
    if not callable(value):
        return f"{value:g}"
    return "by recipe" if recipe is None else f"{of_recipe(recipe):g}"
