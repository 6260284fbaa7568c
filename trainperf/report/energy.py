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


def energy_score(bench: Any) -> tuple[float | None, str]:
    """A benchmark's energy to train (a report's BenchmarkResults) as MLCommons scores it, and how it was found.

    The MLCommons figure is an olympic mean over the same runs as the time score, ordered and dropped by their
    minutes, not by their energy. Followed: mlperf_logging 4.1.68, ``result_summarizer/result_summarizer.py``,
    ``_compute_strong_score_standalone``: a run that fails the checks gets no minutes and no energy (the
    ``continue`` at line 378 comes before ``_compute_total_power`` at 381); line 421 orders the energies by the
    runs' minutes, and ``_index_olympic_average`` (lines 204-224) keeps ``sorted_scores[max_dropped_scores :
    len(scores) - (max_dropped_scores - dropped_scores)]``: the fastest dropped, and at the slow end the failed
    runs fill the dropped slots first, so a failed run's energy never counts. That is
    :func:`trainperf.submission.power.olympic_joules` with a failed run as infinitely slow, as ``review`` takes it.
    With more runs than required the time score is that of a window of consecutive runs (:mod:`trainperf.scoring`):
    the energy is that window's. The summarizer also multiplies by scaling.json's factor (line 427) as it does the
    time score; the report shows neither scaled. With fewer runs than required (a preview) the energy is the mean
    of the successful runs, as the preview's minutes are."""
    score = bench.score
    if not any(r.energy_joules is not None for r in bench.runs):
        return None, "not measured"
    if score.minutes is None:
        return None, "no time score, so no energy score"
    if score.window is None:  # a preview: the mean of the successful runs, as its minutes
        ok = [r for r in bench.runs if r.success]
        measured = [r.energy_joules for r in ok if r.energy_joules is not None]
        if len(measured) < len(ok):
            return None, f"measured for {len(measured)} of the {len(ok)} successful runs"
        return sum(measured) / len(measured), f"preview: mean of the {len(ok)} successful runs"
    window = [bench.runs[i] for i in score.window_runs]
    runs = [(r.minutes if r.success else math.inf, r.energy_joules) for r in window]
    joules = power.olympic_joules(runs, bench.runs_dropped)
    kept = sorted(runs, key=lambda r: r[0])[bench.runs_dropped : len(runs) - bench.runs_dropped]
    if joules is None:
        measured = sum(j is not None for _, j in kept)
        return None, f"measured for {measured} of the {len(kept)} runs the time score keeps"
    return joules, f"olympic mean of the {len(kept)} runs the time score keeps"
