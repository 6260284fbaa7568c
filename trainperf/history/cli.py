"""`trainperf history`: the published MLPerf Training results, queried the way press releases read them."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from trainperf.errors import UsageError
from trainperf.fileio import atomic_write_bytes
from trainperf.history import query
from trainperf.history.charts import fastest_bar_chart, speedup_chart
from trainperf.history.energy import kwh
from trainperf.report.collect import collect

_SOURCE = "rescored from mlcommons/training_results_v0.6 … v5.1 (olympic mean × scaling.json)"
_ENERGY_SOURCE = "energy: the published energy score, where one was published (trainperf/history/data/README.md)"
_ENERGY = ("energy (kWh)", "right")


def _has_energy(rows: Any) -> bool:
    """Whether a table shows the energy column: only where one of its rows has a published energy."""
    return any(r.energy_joules is not None for r in rows)


def _cell(value: Any, fmt: str = "{}") -> Any:
    """A table cell: table data is untrusted text, so it is wrapped in Text and never read as rich markup."""
    from rich.text import Text  # rich: 35 ms to import, not for `trainperf --help`

    return Text("–" if value is None else fmt.format(value))


def _table(title: str, columns: list[tuple[str, str]], caption: str | None = None) -> Any:
    from rich.table import Table  # rich: 35 ms to import, not for `trainperf --help`

    table = Table(title=_cell(title), caption=_cell(caption) if caption else None)
    for name, justify in columns:
        table.add_column(name, justify=justify)
    return table


def _print(renderable: Any) -> None:
    from rich.console import Console  # rich: 35 ms to import, not for `trainperf --help`

    from trainperf.report.table import for_output

    for_output(Console()).print(renderable)


def _print_json(value: Any) -> None:
    print(json.dumps(dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value, indent=2))


def _write_chart(path: Path, png: bytes, quiet: bool) -> None:
    """Write to a temporary file beside `path` and rename, so a failure never leaves half a PNG."""
    if path.suffix.lower() != ".png":
        raise UsageError(f"--chart {path}: the chart is a PNG; name the file *.png")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise UsageError(f"--chart {path}: the folder {folder} does not exist")
    try:
        atomic_write_bytes(path, png)
    except OSError as e:
        raise UsageError(f"--chart {path}: cannot write it ({e.strerror or e})") from None
    print(f"chart: {path}", file=sys.stderr if quiet else sys.stdout)


def _load(args: argparse.Namespace) -> list[query.Result]:
    return query.load_results(args.results_csv)


def _place_folder(results: list[query.Result], args: argparse.Namespace) -> int:
    """``place PATH``: every scored reference-scale (system, benchmark) of a results folder or submission package
    (read as it is, by the report's reader), placed among the published results of its benchmark's round."""
    folder = Path(args.benchmark)
    if not folder.is_dir():
        raise UsageError(
            f"{folder}: give a BENCHMARK and your MINUTES, or a results folder or submission package to place "
            "every score in it (`trainperf history place PATH`)"
        )
    rows: list[dict[str, Any]] = []
    for system in collect([folder]):
        for b in system.benchmarks:
            row: dict[str, Any] = {"system": system.label, "benchmark": b.benchmark, "scale": b.scale}
            row["minutes"], row["score"] = b.score.minutes, b.score.label
            if b.scale != "reference" or b.score.minutes is None:
                row["placement"] = None
                row["note"] = "a mini-scale result is not comparable" if b.scale != "reference" else "no score"
            else:
                try:
                    p = query.place(
                        results,
                        b.benchmark,
                        b.score.minutes,
                        n_acc=args.n_acc,
                        round=args.round,
                        division=args.division,
                    )
                except UsageError as e:  # a benchmark or round the published table does not have: say so, go on
                    row["placement"], row["note"] = None, str(e)
                else:
                    row["placement"] = {k: getattr(p, k) for k in ("round", "division", "rank", "count", "faster_than")}
                    row["note"] = ""
            rows.append(row)
    if args.json:
        _print_json(rows)
        return 0
    table = _table(
        f"{folder}: each score among the published results",
        [("system", "left"), ("benchmark", "left"), ("minutes", "right"), ("round", "left"), ("rank", "right")]
        + [("faster than", "right"), ("note", "left")],
    )
    for r in rows:
        pl = r["placement"]
        table.add_row(
            _cell(r["system"]),
            _cell(r["benchmark"]),
            _cell(r["minutes"], "{:.3f}"),
            _cell(pl and pl["round"]),
            _cell(pl and f"{pl['rank']} of {pl['count'] + 1}"),
            _cell(pl and f"{pl['faster_than']:.0%}"),
            _cell(r["note"] or None),
        )
    _print(table)
    return 0


def cmd_fastest(args: argparse.Namespace) -> int:
    results = _load(args)
    scope = "single-node-8" if args.single_node else "any"
    rows = query.fastest(results, division=args.division, benchmark=args.benchmark, round=args.round, scope=scope)
    where = " on one node of 8 accelerators" if args.single_node else ""
    title = f"Fastest {args.division} results{where}" + (f" — {rows[0].round}" if args.round and rows else "")
    if args.json:
        _print_json([dataclasses.asdict(r) for r in rows])
    elif not rows:
        print(f"no {args.division} result with a score{where} matches")
    else:
        one_round = args.round is not None
        energy = _has_energy(rows)
        columns = [("benchmark", "left"), ("minutes", "right"), ("org", "left"), ("system", "left")]
        columns += [("accelerator", "left"), ("nodes", "right"), ("acc", "right"), ("log date", "left")]
        columns += [_ENERGY] if energy else []
        caption = f"{_SOURCE}; {_ENERGY_SOURCE}" if energy else _SOURCE
        table = _table(title, columns if one_round else [("round", "left"), *columns], caption=caption)
        for r in rows:
            cells = [_cell(r.benchmark), _cell(r.score_min, "{:.3f}")]
            cells += map(_cell, (r.org, r.system, r.accelerator, r.nodes, r.n_acc, r.log_date))
            cells += [_cell(kwh(r.energy_joules))] if energy else []
            table.add_row(*cells if one_round else [_cell(r.round), *cells])
        _print(table)
    if args.chart is not None:
        _write_chart(args.chart, fastest_bar_chart(rows, title, log_scale=not args.linear), args.json)
    return 0


def cmd_speedup(args: argparse.Namespace) -> int:
    results = _load(args)
    scope = "single-node-8" if args.single_node else "any"
    rows = query.speedup(results, args.org, args.benchmark, division=args.division, scope=scope)
    where = ", one node of 8 accelerators" if args.single_node else ""
    title = f"{rows[0].org} {rows[0].benchmark}: best {args.division} result per round{where}"
    if args.json:
        _print_json([dataclasses.asdict(r) for r in rows])
    else:
        change = query.redefined().get(rows[0].benchmark)
        restarted = change is not None and len({r.baseline_round for r in rows}) > 1
        note = f"; the baseline restarts in {change[0]}: {change[1]}" if restarted else ""
        energy = _has_energy(rows)
        table = _table(
            title,
            [("round", "left"), ("minutes", "right"), ("speed-up", "right"), ("vs", "left"), ("system", "left")]
            + [("accelerator", "left"), ("acc", "right")]
            + ([_ENERGY] if energy else []),
            caption=f"speed-up = baseline minutes / minutes{note}" + (f"; {_ENERGY_SOURCE}" if energy else ""),
        )
        for r in rows:
            table.add_row(
                _cell(r.round),
                _cell(r.score_min, "{:.3f}"),
                _cell(r.speedup, "{:.2f}×"),
                *map(_cell, (r.baseline_round, r.system, r.accelerator, r.n_acc)),
                *([_cell(kwh(r.energy_joules))] if energy else []),
            )
        _print(table)
    if args.chart is not None:
        _write_chart(args.chart, speedup_chart(rows, title), args.json)
    return 0


def cmd_per_accelerator(args: argparse.Namespace) -> int:
    results = _load(args)
    rows = query.per_accelerator(results, args.benchmark, args.round, division=args.division)
    if args.json:
        _print_json([dataclasses.asdict(r) for r in rows])
        return 0
    rnd = args.round or query.latest_round(results, args.benchmark, division=args.division)
    energy = _has_energy(rows)
    table = _table(
        f"{args.benchmark} {rnd} ({args.division}): fastest result per accelerator",
        [("accelerator", "left"), ("minutes", "right"), ("acc", "right"), ("acc-minutes", "right")]
        + [("least acc-min", "right"), ("results", "right"), ("org", "left"), ("system", "left")]
        + ([_ENERGY] if energy else []),
        caption="acc-minutes = minutes × accelerators of the fastest result; "
        "per-accelerator normalization is not an official MLPerf metric" + (f"; {_ENERGY_SOURCE}" if energy else ""),
    )
    for a in rows:
        table.add_row(
            _cell(a.accelerator),
            _cell(a.score_min, "{:.3f}"),
            _cell(a.n_acc),
            _cell(a.acc_minutes, "{:.1f}"),
            _cell(a.min_acc_minutes, "{:.1f}"),
            *map(_cell, (a.n_results, a.org, a.system)),
            *([_cell(kwh(a.energy_joules))] if energy else []),
        )
    _print(table)
    return 0


def cmd_energy(args: argparse.Namespace) -> int:
    results = _load(args)
    rows = query.with_energy(results, division=args.division, benchmark=args.benchmark, round=args.round)
    if args.json:
        _print_json([dataclasses.asdict(r) for r in rows])
        return 0
    if not rows:
        print(f"no {args.division} result with a score and a published energy matches")
        return 0
    table = _table(
        f"Published {args.division} results with their energy to train",
        [("round", "left"), ("benchmark", "left"), ("minutes", "right"), _ENERGY, ("org", "left")]
        + [("system", "left"), ("acc", "right"), ("source", "left")],
        caption=f"{_SOURCE}; energy: the published energy score, olympic mean over the runs the time score keeps "
        "× scaling.json; sources in trainperf/history/data/README.md",
    )
    for r in rows:
        table.add_row(
            _cell(r.round),
            _cell(r.benchmark),
            _cell(r.score_min, "{:.3f}"),
            _cell(kwh(r.energy_joules)),
            *map(_cell, (r.org, r.system, r.n_acc, r.energy_source)),
        )
    _print(table)
    return 0


def cmd_place(args: argparse.Namespace) -> int:
    results = _load(args)
    if args.minutes is None:
        return _place_folder(results, args)
    p = query.place(
        results,
        args.benchmark,
        args.minutes,
        n_acc=args.n_acc,
        scale=args.scale,
        round=args.round,
        division=args.division,
    )
    if args.json:
        _print_json(p)
        return 0
    among = f" on {p.n_acc} accelerators" if p.n_acc else ""
    print(
        f"{p.minutes:g} min would rank {p.rank} of {p.count + 1} among the {p.count} published {p.division} "
        f"{p.benchmark} results{among} of {p.round}, faster than {p.faster_than:.0%} of them"
    )
    slower = round(p.faster_than * p.count)
    ties = p.count - (p.rank - 1) - slower
    energy = _has_energy(p.faster + p.slower)
    table = _table(
        f"{p.benchmark} {p.round}: the neighbours of {p.minutes:g} min",
        [("rank", "right"), ("minutes", "right"), ("org", "left"), ("system", "left")]
        + [("accelerator", "left"), ("acc", "right")]
        + ([_ENERGY] if energy else []),
        caption=f"{ties} published result(s) tie with yours and share rank {p.rank}" if ties else None,
    )

    def neighbour(rank: int, r: query.Result) -> None:
        cells = [_cell(rank), _cell(r.score_min, "{:.3f}"), *map(_cell, (r.org, r.system, r.accelerator, r.n_acc))]
        table.add_row(*cells, *([_cell(kwh(r.energy_joules))] if energy else []))

    first = p.rank - len(p.faster)
    for i, r in enumerate(p.faster):
        neighbour(first + i, r)
    you = [_cell(p.rank), _cell(p.minutes, "{:.3f}"), _cell("you"), _cell(""), _cell(""), _cell(p.n_acc)]
    table.add_row(*you, *([_cell("")] if energy else []), style="bold")
    for i, r in enumerate(p.slower):
        neighbour(p.rank + ties + 1 + i, r)
    _print(table)
    return 0


def add_parser(subparsers: Any) -> None:
    """Add `trainperf history` and its queries to the main command's subparsers."""
    h = subparsers.add_parser(
        "history",
        help="compare with the published MLPerf Training results (v0.6 to v5.1)",
        description="Query the published MLPerf Training results, rescored from the official MLCommons "
        "repositories: the fastest result per benchmark, an org's speed-up over the rounds, accelerators "
        "compared per accelerator, where your own reference-scale result would rank, and the energy to train "
        "where one was published.",
    )
    sub = h.add_subparsers(dest="history_command", required=True, metavar="QUERY")
    common, chart, single = _shared_options()
    _add_fastest(sub, [common, chart, single])
    _add_speedup(sub, [common, chart, single])
    _add_per_accelerator(sub, [common])
    _add_place(sub, [common])
    _add_energy(sub, [common])


def _shared_options() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser, argparse.ArgumentParser]:
    """The options several queries take: (every query's, the chart's, --single-node)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--division",
        choices=query.DIVISIONS,
        default="closed",
        help="closed (default), open, or any (also rows whose division the source left empty)",
    )
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")
    common.add_argument(
        "--results-csv",
        type=Path,
        default=None,
        metavar="CSV",
        help="read this results table instead of the one shipped with trainperf (same columns)",
    )
    chart = argparse.ArgumentParser(add_help=False)
    chart.add_argument("--chart", type=Path, default=None, metavar="FILE.png", help="also draw a PNG chart")
    single = argparse.ArgumentParser(add_help=False)
    single.add_argument(
        "--single-node", action="store_true", help="only results on one node of 8 accelerators (nodes=1, n_acc=8)"
    )
    return common, chart, single


_BENCHMARK_HELP = "benchmark key as the published results name it (see `trainperf history fastest`)"


def _add_fastest(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    f = sub.add_parser(
        "fastest",
        parents=parents,
        help="the fastest result per round and benchmark",
        description="The fastest published result of each benchmark in each round, at any scale or "
        "(--single-node) on one node of 8 accelerators.",
    )
    f.add_argument("--round", default=None, help="one round, e.g. v2.0 (default: all)")
    f.add_argument("--benchmark", default=None, help="one benchmark key (default: all)")
    f.add_argument("--linear", action="store_true", help="draw the chart on a linear minutes axis (default: log)")
    f.set_defaults(func=cmd_fastest)


def _add_speedup(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    s = sub.add_parser(
        "speedup",
        parents=parents,
        help="an org's best result per round and its speed-up",
        description="An org's best result of one benchmark in each round, and the speed-up over its first "
        "round with a score (restarted where the benchmark changed its task under the same key).",
    )
    s.add_argument("org", metavar="ORG", help="submitting organization, e.g. NVIDIA (any letter case)")
    s.add_argument("benchmark", metavar="BENCHMARK", help=_BENCHMARK_HELP)
    s.set_defaults(func=cmd_speedup)


def _add_per_accelerator(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    a = sub.add_parser(
        "per-accelerator",
        parents=parents,
        help="the fastest result per accelerator model, with accelerator-minutes",
        description="Per accelerator model: its fastest result in one round, that result's accelerator count "
        "and accelerator-minutes (minutes × accelerators), sorted by accelerator-minutes.",
    )
    a.add_argument("benchmark", metavar="BENCHMARK", help=_BENCHMARK_HELP)
    a.add_argument("--round", default=None, help="round, e.g. v3.0 (default: the benchmark's latest)")
    a.set_defaults(func=cmd_per_accelerator)


def _add_place(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "place",
        parents=parents,
        help="where your result would rank among the published ones",
        description="Where MINUTES of a reference-scale BENCHMARK would rank among the published results of one "
        "round (default: the benchmark's latest). Mini-scale results are refused: they are not comparable. "
        "Given a PATH instead (a trainperf output folder or an MLCommons submission package, read as it is), "
        "every scored (system, benchmark) in it is placed.",
    )
    p.add_argument(
        "benchmark",
        metavar="BENCHMARK|PATH",
        help=f"{_BENCHMARK_HELP}, or a results folder or submission package",
    )
    p.add_argument("minutes", metavar="MINUTES", type=float, nargs="?", help="your score in minutes (with BENCHMARK)")
    p.add_argument("--n-acc", type=int, default=None, help="compare only with results on this many accelerators")
    p.add_argument("--scale", choices=("reference", "mini"), default="reference", help="the scale of your result")
    p.add_argument("--round", default=None, help="round, e.g. v2.0 (default: the benchmark's latest)")
    p.set_defaults(func=cmd_place)


def _add_energy(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    e = sub.add_parser(
        "energy",
        parents=parents,
        help="the results with a published energy to train",
        description="Every published result whose energy to train was published (MLPerf power measurement), "
        "with its minutes, its energy in kWh and where the energy was published. Other queries show the energy "
        "beside a result that has one.",
    )
    e.add_argument("--round", default=None, help="one round, e.g. v4.0 (default: all)")
    e.add_argument("--benchmark", default=None, help="one benchmark key (default: all)")
    e.set_defaults(func=cmd_energy)
