"""Load the published MLPerf Training results and answer the questions MLPerf press releases answer.

The table is data, not code: every cell is parsed as untrusted text (never evaluated); an empty cell, or a
number that does not parse, becomes None. Every query keeps only rows with a score and returns a
deterministically sorted list of small frozen dataclasses.
"""

from __future__ import annotations

import csv
import difflib
import functools
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from trainperf.errors import DataError, UsageError

DEFAULT_CSV = Path(__file__).parent / "data" / "mlperf_training_results.csv"

COLUMNS = (
    "round", "org", "system", "benchmark", "division", "status", "system_name", "accelerator", "nodes",
    "acc_per_node", "n_acc", "framework", "n_runs", "n_failed", "raw_score_min", "scaling", "score_min", "log_date",
)  # fmt: skip
_REQUIRED = ("round", "org", "system", "benchmark")  # a row without these names nothing


@functools.cache
def _history_facts() -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    """(alias -> key, key -> (round, what changed)), from each benchmark's ``history_*`` facts."""
    from trainperf import registry

    aliases, redefined = {}, {}
    for bench in registry.all_benchmarks():
        aliases.update({alias: bench.key for alias in bench.history_aliases})
        if bench.history_redefined is not None:
            redefined[bench.key] = bench.history_redefined
    return aliases, redefined


# Other names the published results use for a key, and keys whose task changed under the same name: (first
# round of the new task, what changed). A speed-up across such a change would compare two different
# benchmarks, so `speedup` restarts its baseline there.
def benchmark_aliases() -> dict[str, str]:
    return _history_facts()[0]


def redefined() -> dict[str, tuple[str, str]]:
    return _history_facts()[1]


_DIVISION_ALIASES = {"close": "closed"}  # the source also writes `Closed`, `Open` (lower-cased here)
_NO_ACCELERATOR = {"n/a", "na", "none", "-", "?"}


DIVISIONS = ("closed", "open", "any")
SCOPES = ("any", "single-node-8")
_ROUND_RE = re.compile(r"v?(\d{1,3})\.(\d{1,3})")


@dataclass(frozen=True, kw_only=True)
class Result:
    """One (round, org, system, benchmark) row of the published table; None where the source had no value."""

    round: str
    org: str
    system: str
    benchmark: str
    division: str | None
    status: str | None
    system_name: str | None
    accelerator: str | None
    nodes: int | None
    acc_per_node: int | None
    n_acc: int | None
    framework: str | None
    n_runs: int | None
    n_failed: int | None
    raw_score_min: float | None
    scaling: float | None
    score_min: float | None
    log_date: str | None
    energy_joules: float | None = None  # the published energy score (joules), None where none was published
    energy_source: str | None = None  # where that energy was published (``data/README.md``)


@dataclass(frozen=True, kw_only=True)
class SpeedupRow:
    """An org's best score on a benchmark in one round, and its speed-up over `baseline_round`."""

    round: str
    org: str
    benchmark: str
    score_min: float
    speedup: float  # baseline score / this score: 2.0 means twice as fast
    baseline_round: str
    system: str
    accelerator: str | None
    n_acc: int | None
    energy_joules: float | None = None  # the published energy of that best result, if any


@dataclass(frozen=True, kw_only=True)
class AcceleratorRow:
    """The fastest result of one accelerator model, normalized by its accelerator count."""

    accelerator: str
    score_min: float
    n_acc: int
    acc_minutes: float  # score_min x n_acc of that fastest result
    min_acc_minutes: float  # the least accelerator-minutes of any result with this accelerator
    n_results: int
    org: str
    system: str
    energy_joules: float | None = None  # the published energy of that fastest result, if any


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Where a user's minutes would rank among the published results of one benchmark and round."""

    benchmark: str
    round: str
    division: str
    minutes: float
    n_acc: int | None
    rank: int  # 1 + the number of published results strictly faster
    count: int  # published results compared (the user's would be one more)
    faster_than: float  # fraction of the published results strictly slower than `minutes`
    faster: tuple[Result, ...]  # the nearest published results ahead (nearest last)
    slower: tuple[Result, ...]  # the nearest published results behind (nearest first)


def round_key(value: str) -> tuple:
    """Sort key of a round: 'v0.6' < 'v0.7' < 'v1.0' < 'v2.0' < 'v5.1'; unparseable names sort last."""
    m = _ROUND_RE.fullmatch(value.strip().lower())
    return (0, int(m.group(1)), int(m.group(2)), "") if m else (1, 0, 0, value)


def _text(cell: str | None) -> str | None:
    return (cell.strip() or None) if cell is not None else None


def _int(cell: str | None) -> int | None:
    text = _text(cell)
    if text is None or not text.isascii() or not text.isdigit():
        return None
    return int(text)


def _float(cell: str | None) -> float | None:
    """A finite, positive number, or None: minutes, factors and scores are never zero or negative."""
    text = _text(cell)
    if text is None or "_" in text or len(text) > 40:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


_PARSERS = {c: _int for c in ("nodes", "acc_per_node", "n_acc", "n_runs", "n_failed")}
_PARSERS |= {c: _float for c in ("raw_score_min", "scaling", "score_min")}


def _row_to_result(row: dict, where: str) -> Result:
    cells = {col: _PARSERS.get(col, _text)(row.get(col)) for col in COLUMNS}
    cells["energy_joules"] = _float(row.get("energy_joules"))  # an optional column of a table of one's own
    for col in _REQUIRED:
        if cells[col] is None:
            raise DataError(f"{where}: the {col!r} cell is empty; every row needs round, org, system and benchmark")
    benchmark = cells["benchmark"].lower()
    division = (cells["division"] or "").lower()
    accelerator = cells["accelerator"]
    cells.update(
        round=cells["round"].lower(),
        benchmark=benchmark_aliases().get(benchmark, benchmark),
        division=_DIVISION_ALIASES.get(division, division) or None,
        accelerator=None if accelerator is None or accelerator.lower() in _NO_ACCELERATOR else accelerator,
    )
    return Result(**cells)


def load_results(path: Path | None = None) -> list[Result]:
    """Read the published results table (default: the copy shipped with trainperf, with the published energy of
    ``data/mlperf_training_energy.csv``; a table of one's own carries its energy in an optional ``energy_joules``
    column)."""
    if path is None:
        from trainperf.history.energy import DEFAULT_ENERGY_CSV, load_energy, with_energy

        energy = load_energy(DEFAULT_ENERGY_CSV, lambda b: benchmark_aliases().get(b, b))
        return with_energy(_read_results(DEFAULT_CSV), energy, DEFAULT_ENERGY_CSV)
    return _read_results(Path(path))


def _read_results(path: Path) -> list[Result]:
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            header = [h.strip() for h in reader.fieldnames or []]
            missing = [c for c in COLUMNS if c not in header]
            if missing:
                raise DataError(
                    f"{path}: missing column(s) {', '.join(missing)}; "
                    f"a results table needs the columns {', '.join(COLUMNS)}"
                )
            reader.fieldnames = header
            return [_row_to_result(row, f"{path}, line {reader.line_num}") for row in reader]
    except FileNotFoundError:
        raise DataError(f"{path}: no such results table") from None
    except (UnicodeDecodeError, csv.Error) as e:
        raise DataError(f"{path}: not a readable CSV table ({e})") from None


# -- argument checks ------------------------------------------------------------------------------


def _close(value: str, valid: Iterable[str]) -> str:
    valid = sorted(set(valid))
    near = difflib.get_close_matches(value, valid, n=3, cutoff=0.5)
    hint = f"did you mean {' or '.join(near)}? " if near else ""
    return f"{hint}valid: {', '.join(valid)}"


def _choice(value: str, valid: Sequence[str], what: str) -> str:
    if value not in valid:
        raise UsageError(f"unknown {what} {value!r}; {_close(value, valid)}")
    return value


def _check_benchmark(results: Sequence[Result], benchmark: str) -> str:
    key = benchmark.strip().lower()
    key = benchmark_aliases().get(key, key)
    known = {r.benchmark for r in results}
    if key not in known:
        raise UsageError(f"unknown benchmark {benchmark!r}; {_close(key, known)}")
    return key


def _check_round(results: Sequence[Result], value: str) -> str:
    m = _ROUND_RE.fullmatch(value.strip().lower())
    key = f"v{int(m.group(1))}.{int(m.group(2))}" if m else value.strip().lower()
    known = {r.round for r in results}
    if key not in known:
        rounds = ", ".join(sorted(known, key=round_key))
        raise UsageError(f"unknown round {value!r}; published rounds: {rounds}")
    return key


def _check_org(results: Sequence[Result], org: str) -> str:
    """Orgs match case-insensitively (the source spells some two ways, e.g. `Krai` and `krai`)."""
    known = {r.org.lower(): r.org for r in results}
    key = org.strip().lower()
    if key not in known:
        near = difflib.get_close_matches(key, list(known), n=3, cutoff=0.5)
        valid = (
            f"did you mean {' or '.join(known[n] for n in near)}?"
            if near
            else "orgs: " + ", ".join(sorted(known.values(), key=str.lower))
        )
        raise UsageError(f"unknown org {org!r}; {valid}")
    return key


def _scored(results: Iterable[Result], division: str) -> list[Result]:
    _choice(division, DIVISIONS, "division")
    return [r for r in results if r.score_min is not None and (division == "any" or r.division == division)]


def _in_scope(r: Result, scope: str) -> bool:
    return scope == "any" or (r.nodes == 1 and r.n_acc == 8)


def _best(rows: Iterable[Result]) -> Result:
    return min(rows, key=lambda r: (r.score_min, r.org.lower(), r.system))


# -- the queries ----------------------------------------------------------------------------------


def fastest(
    results: Sequence[Result],
    *,
    division: str = "closed",
    benchmark: str | None = None,
    round: str | None = None,
    scope: str = "any",
) -> list[Result]:
    """For each (round, benchmark): the fastest result at any scale, or on one node of 8 accelerators."""
    _choice(scope, SCOPES, "scope")
    bench = _check_benchmark(results, benchmark) if benchmark is not None else None
    rnd = _check_round(results, round) if round is not None else None
    groups: dict[tuple[str, str], list[Result]] = {}
    for r in _scored(results, division):
        if (bench is None or r.benchmark == bench) and (rnd is None or r.round == rnd) and _in_scope(r, scope):
            groups.setdefault((r.round, r.benchmark), []).append(r)
    return [_best(groups[k]) for k in sorted(groups, key=lambda k: (round_key(k[0]), k[1]))]


def with_energy(
    results: Sequence[Result], *, division: str = "closed", benchmark: str | None = None, round: str | None = None
) -> list[Result]:
    """Every scored result with a published energy to train, by round, benchmark and minutes."""
    bench = _check_benchmark(results, benchmark) if benchmark is not None else None
    rnd = _check_round(results, round) if round is not None else None
    rows = [
        r
        for r in _scored(results, division)
        if r.energy_joules is not None and (bench is None or r.benchmark == bench) and (rnd is None or r.round == rnd)
    ]
    return sorted(rows, key=lambda r: (round_key(r.round), r.benchmark, r.score_min, r.org.lower(), r.system))


def era_start(benchmark: str, round: str) -> str | None:
    """The round where `benchmark` took the task it has in `round` (None: unchanged since it began)."""
    change = redefined().get(benchmark)
    return change[0] if change and round_key(round) >= round_key(change[0]) else None


def speedup(
    results: Sequence[Result],
    org: str,
    benchmark: str,
    *,
    division: str = "closed",
    scope: str = "any",
) -> list[SpeedupRow]:
    """Per round, the org's best score and its speed-up over the org's first round with a score.

    Where the benchmark changed its task under the same key (see ``redefined()``), the baseline restarts at the
    first round of the new task: each row names its `baseline_round`.
    """
    _choice(scope, SCOPES, "scope")
    org_key = _check_org(results, org)
    bench = _check_benchmark(results, benchmark)
    mine = [r for r in _scored(results, division) if r.org.lower() == org_key and _in_scope(r, scope)]
    rows = [r for r in mine if r.benchmark == bench]
    if not rows:
        theirs = sorted({r.benchmark for r in mine})
        raise UsageError(
            f"{next(r.org for r in results if r.org.lower() == org_key)} has no {division} {bench} result with a score"
            + (" on one node of 8 accelerators" if scope != "any" else "")
            + (f"; its benchmarks: {', '.join(theirs)}" if theirs else "")
        )
    per_round: dict[str, list[Result]] = {}
    for r in rows:
        per_round.setdefault(r.round, []).append(r)
    out: list[SpeedupRow] = []
    baselines: dict[str | None, tuple[str, float]] = {}
    for rnd in sorted(per_round, key=round_key):
        best = _best(per_round[rnd])
        base_round, base_score = baselines.setdefault(era_start(bench, rnd), (rnd, best.score_min))
        out.append(
            SpeedupRow(
                round=rnd,
                org=best.org,
                benchmark=bench,
                score_min=best.score_min,
                speedup=base_score / best.score_min,
                baseline_round=base_round,
                system=best.system,
                accelerator=best.accelerator,
                n_acc=best.n_acc,
                energy_joules=best.energy_joules,
            )
        )
    return out


def latest_round(results: Sequence[Result], benchmark: str, *, division: str = "closed") -> str:
    """The latest round with a scored `division` result of `benchmark`."""
    bench = _check_benchmark(results, benchmark)
    rounds = {r.round for r in _scored(results, division) if r.benchmark == bench}
    if not rounds:
        raise UsageError(f"no {division} {bench} result has a score")
    return max(rounds, key=round_key)


def per_accelerator(
    results: Sequence[Result], benchmark: str, round: str | None = None, *, division: str = "closed"
) -> list[AcceleratorRow]:
    """Per accelerator model: its fastest result, that result's accelerator count and accelerator-minutes.

    Sorted by accelerator-minutes (score_min x n_acc); `round` defaults to the benchmark's latest. MLCommons
    does not endorse per-accelerator normalization; results without an accelerator name or count are left out.
    """
    bench = _check_benchmark(results, benchmark)
    rnd = _check_round(results, round) if round is not None else latest_round(results, bench, division=division)
    groups: dict[str, list[Result]] = {}
    for r in _scored(results, division):
        if r.benchmark == bench and r.round == rnd and r.accelerator and r.n_acc:
            groups.setdefault(r.accelerator, []).append(r)
    rows = []
    for acc, rs in groups.items():
        best = _best(rs)
        rows.append(
            AcceleratorRow(
                accelerator=acc,
                score_min=best.score_min,
                n_acc=best.n_acc,
                acc_minutes=best.score_min * best.n_acc,
                min_acc_minutes=min(r.score_min * r.n_acc for r in rs),
                n_results=len(rs),
                org=best.org,
                system=best.system,
                energy_joules=best.energy_joules,
            )
        )
    return sorted(rows, key=lambda a: (a.acc_minutes, a.score_min, a.accelerator))


def place(
    results: Sequence[Result],
    benchmark: str,
    minutes: float,
    *,
    n_acc: int | None = None,
    scale: str = "reference",
    round: str | None = None,
    division: str = "closed",
    neighbours: int = 2,
) -> Placement:
    """Where `minutes` would rank among the published results of `benchmark` (default: its latest round).

    With `n_acc`, only published results on exactly that many accelerators are compared.
    """
    if scale == "mini":
        raise UsageError(
            "mini results are not comparable to MLPerf's: the mini scale trains a different model on different "
            "data to a different target; compare a reference-scale result, or compare mini results with each other"
        )
    _choice(scale, ("reference", "mini"), "scale")
    if not (isinstance(minutes, int | float) and math.isfinite(minutes) and minutes > 0):
        raise UsageError(f"minutes must be a positive number, not {minutes!r}")
    if n_acc is not None and n_acc < 1:
        raise UsageError(f"--n-acc must be at least 1, not {n_acc}")
    bench = _check_benchmark(results, benchmark)
    rnd = _check_round(results, round) if round is not None else latest_round(results, bench, division=division)
    pool = [r for r in _scored(results, division) if r.benchmark == bench and r.round == rnd]
    if not pool:
        having = sorted({r.round for r in _scored(results, division) if r.benchmark == bench}, key=round_key)
        raise UsageError(f"{rnd} has no {division} {bench} result; rounds with one: {', '.join(having) or 'none'}")
    if n_acc is not None:
        counts = sorted({r.n_acc for r in pool if r.n_acc is not None})
        pool = [r for r in pool if r.n_acc == n_acc]
        if not pool:
            raise UsageError(
                f"no {division} {bench} result in {rnd} used {n_acc} accelerators; "
                f"published counts: {', '.join(map(str, counts))}"
            )
    ranked = sorted(pool, key=lambda r: (r.score_min, r.org.lower(), r.system))
    ahead = [r for r in ranked if r.score_min < minutes]
    behind = [r for r in ranked if r.score_min > minutes]
    return Placement(
        benchmark=bench,
        round=rnd,
        division=division,
        minutes=float(minutes),
        n_acc=n_acc,
        rank=len(ahead) + 1,
        count=len(ranked),
        faster_than=len(behind) / len(ranked),
        faster=tuple(ahead[-neighbours:]) if neighbours else (),
        slower=tuple(behind[:neighbours]),
    )
