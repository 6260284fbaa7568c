"""Energy per run for a report: the log's ``trainperf_energy_joules`` event, else the run's record in summary.json,
else a published package's MLPerf power logs beside the result file (:mod:`trainperf.submission.power`)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from trainperf import limits
from trainperf.errors import ResultsError
from trainperf.submission import power

ENERGY_KEY = "trainperf_energy_joules"  # MLLOG event: value joules (or null), metadata sources and note


def read_energy(path: Path, records: list[dict[str, Any]], summary: dict[str, Any] | None) -> tuple[float | None, str]:
    """Energy from the log's ``trainperf_energy_joules`` event, else from summary.json's run record, else from a
    published package's power logs by the installed summarizer's formula (:func:`by_round_formula` then reads a
    benchmark's logs by its round's formula where that one cannot read them)."""
    rec = next((r for r in records if r.get("key") == ENERGY_KEY), None)
    if rec is not None:
        meta = rec.get("metadata") if isinstance(rec.get("metadata"), dict) else {}
        value, note, where = rec.get("value"), meta.get("note"), f"{path} ({ENERGY_KEY})"
    elif summary is not None:
        value, note, where = summary.get("energy_joules"), summary.get("energy_note"), f"summary.json ({path.name})"
    else:  # a published package's power logs (results/<system>/<benchmark>/power/<result>/)
        return power.folder_joules(path, power.first_ms(records, "run_start"), power.first_ms(records, "run_stop"))
    if value is None:
        return None, str(note) if note else "not measured"
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ResultsError(f"{where}: energy {value!r} is not a non-negative number of joules")
    return float(value), str(note) if note else "measured"


def summary_json_energy(root: Path) -> tuple[dict[str, dict[tuple[str, str], dict[str, Any]]], str]:
    """summary.json's run records that carry energy, by system, then (benchmark, result file name)."""
    path = root / "summary.json"
    if not path.is_file():
        return {}, ""
    try:
        doc = limits.read_json(path, limits.MAX_DOCUMENT_BYTES)
        found: dict[tuple[str, str], dict[str, Any]] = {}
        for bench in doc.get("benchmarks", []):
            for run in bench.get("runs", []):
                if isinstance(run, dict) and "energy_joules" in run and isinstance(run.get("log"), str):
                    found[(str(bench.get("benchmark")), Path(run["log"]).name)] = run
        return {str(doc.get("system")): found}, ""
    except limits.OverLimit as e:
        raise ResultsError(f"{path} {e}: refused; a trainperf summary.json is a few KiB: move it away") from None
    except (OSError, ValueError, TypeError, AttributeError):
        return {}, f"{path} is unreadable; energy was read from the result files only"


def by_round_formula(runs: list[Any], ruleset: str) -> list[Any]:
    """A benchmark's runs (a report's RunResult), their power logs read by one formula, as ``review`` reads them:
    where the installed summarizer cannot read one run's logs and the package's round (``ruleset``) had another
    formula (v4.0's), every run's energy by that one."""
    formula = power.formula_of(ruleset)
    if formula == power.INSTALLED or not any(r.energy_note.startswith(power.UNREADABLE) for r in runs):
        return runs
    redone = []
    for r in runs:
        if r.energy_note.startswith((power.LOGS_NOTE, power.UNREADABLE)):
            joules, note = power.folder_joules(r.path, *r.power_window, formula)
            r = dataclasses.replace(r, energy_joules=joules, energy_note=note)
        redone.append(r)
    return redone
