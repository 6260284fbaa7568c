"""The published energy to train of MLPerf Training results, beside their minutes.

``data/mlperf_training_energy.csv`` holds one row per (round, org, system, benchmark) whose energy score MLCommons
published, with its source (see ``data/README.md``); every other result has none, shown blank, never 0. The table
is data, not code: a cell is parsed as text and never evaluated, and a row that cannot be read is an error naming
the file, the line and the fix, since a wrong energy beside a published result would pass for a published figure.
"""

from __future__ import annotations

import csv
import dataclasses
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from trainperf.errors import DataError

DEFAULT_ENERGY_CSV = Path(__file__).parent / "data" / "mlperf_training_energy.csv"
ENERGY_COLUMNS = ("round", "org", "system", "benchmark", "energy_joules", "source")

Key = tuple[str, str, str, str]  # (round, org, system, benchmark) as the results table names them


def _joules(cell: str, where: str) -> float:
    try:
        value = float(cell)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0 or "_" in cell:
        raise DataError(
            f"{where}: energy_joules {cell!r} is not a positive number of joules; write the published energy score "
            "in joules, or leave the row out where none was published (never 0)"
        )
    return value


def load_energy(path: Path, benchmark_key: Callable[[str], str] = str.lower) -> dict[Key, tuple[float, str]]:
    """(round, org, system, benchmark) -> (joules, source) from an energy table; ``benchmark_key`` maps the
    benchmark's name to the results table's key (its aliases)."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            header = [h.strip() for h in reader.fieldnames or []]
            missing = [c for c in ENERGY_COLUMNS if c not in header]
            if missing:
                raise DataError(
                    f"{path}: missing column(s) {', '.join(missing)}; an energy table needs the columns "
                    f"{', '.join(ENERGY_COLUMNS)}"
                )
            reader.fieldnames = header
            found: dict[Key, tuple[float, str]] = {}
            for row in reader:
                where = f"{path}, line {reader.line_num}"
                cells = {c: (row.get(c) or "").strip() for c in ENERGY_COLUMNS}
                empty = [c for c in ENERGY_COLUMNS if not cells[c]]
                if empty:
                    raise DataError(f"{where}: the {empty[0]!r} cell is empty; every row names its result, its "
                                    "energy and the source that published it")  # fmt: skip
                key = (cells["round"].lower(), cells["org"], cells["system"], benchmark_key(cells["benchmark"].lower()))
                if key in found:
                    raise DataError(f"{where}: {' '.join(key)} has a second energy; keep one row per result")
                found[key] = (_joules(cells["energy_joules"], where), cells["source"])
            return found
    except FileNotFoundError:
        raise DataError(f"{path}: no such energy table") from None
    except (UnicodeDecodeError, csv.Error) as e:
        raise DataError(f"{path}: not a readable CSV table ({e})") from None


def with_energy(results: Sequence[Any], energy: dict[Key, tuple[float, str]], where: Path) -> list[Any]:
    """``results`` (query.Result) with the published energy of each that has one. An energy row that names no
    result is an error: it would never be shown."""
    keys = {(r.round, r.org, r.system, r.benchmark) for r in results}
    stray = [k for k in energy if k not in keys]
    if stray:
        raise DataError(
            f"{where}: {' '.join(stray[0])} names no row of the results table; correct its round, org, system or "
            "benchmark to the results table's"
        )
    out = []
    for r in results:
        found = energy.get((r.round, r.org, r.system, r.benchmark))
        out.append(r if found is None else dataclasses.replace(r, energy_joules=found[0], energy_source=found[1]))
    return out


def kwh(joules: float | None) -> str | None:
    """Energy as a table cell shows it: kWh to three decimals; None (blank) where none was published."""
    return None if joules is None else f"{joules / 3.6e6:.3f}"


__all__ = ["DEFAULT_ENERGY_CSV", "ENERGY_COLUMNS", "kwh", "load_energy", "with_energy"]
