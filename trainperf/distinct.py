"""The distinct-runs rule: the runs of one result set are distinct runs.

One log copied under several result files (its seed changed, or not) would be scored as several runs. Within one
(system, benchmark) result set, runs whose training timeline or evaluation curve is the same to the millisecond are
one run, whatever their seeds say: ``review`` refuses the result set, and ``report`` and ``compare`` count each copy
after the first as a failed run. Two findings of ``review`` are warnings:

- runs that overlap in time on one system: MLCommons accepted such runs (in the published v2.0 round, 18 of the 262
  result sets, NVIDIA's, Dell's, Azure's and Google's among them, hold runs whose run_start..run_stop overlap: one
  system description stands for a type of machine, and several of them ran at once);
- byte-identical result files under two systems of one submitter: a published, accepted round holds such files (the
  same runs submitted for two system descriptions).

Measured on mlcommons/training_results_v2.0 (2,760 result files): no two runs of a result set share a timeline or an
evaluation curve. A forger who rewrites every time of a copy differently is not caught by this rule.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trainperf.run_checks import logged_ms
from trainperf.timeline import EVALUATION, TRAINING

RULE = "distinct-runs rule"
# a training timeline of fewer records than this is too short to tell two runs apart: a run of one block is its
# start and its end, and two runs' durations can agree to the millisecond by chance
_MIN_RECORDS = 4
_SHOWN = 3  # pairs named in a warning before "and N more"

Line = tuple[int, Mapping[str, Any]]
Fingerprint = tuple[str, Any]  # (what it is: "training timeline" or "evaluation curve", the value compared)


def _first_ms(lines: Sequence[Line], key: str) -> int | None:
    return next((logged_ms(rec) for _, rec in lines if rec.get("key") == key), None)


def fingerprints(lines: Sequence[Line]) -> tuple[Fingerprint, ...]:
    """The run's training timeline and its evaluation curve, each as times since run_start (exact milliseconds) with
    run_stop's. Empty for a log without a readable run_start."""
    start = _first_ms(lines, "run_start")
    if start is None:
        return ()
    stop = _first_ms(lines, "run_stop")
    end = None if stop is None else stop - start
    training, curve = [], []
    for _, rec in lines:
        key, t = rec.get("key"), logged_ms(rec)
        if t is None:
            continue
        if key in TRAINING:
            training.append((key, t - start))
        elif key == EVALUATION:
            curve.append((t - start, json.dumps(rec.get("value"), sort_keys=True)))
    found: list[Fingerprint] = []
    if len(training) >= _MIN_RECORDS:
        found.append(("training timeline", (end, tuple(training))))
    if curve and end is not None:
        found.append(("evaluation curve", (end, tuple(curve))))
    return tuple(found)


def same_runs(runs: Sequence[tuple[str, Sequence[Fingerprint]]]) -> list[tuple[str, tuple[str, ...], Any]]:
    """The groups of runs of one result set (``(file name, its fingerprints)``) that are one run: (what they share,
    their names in the order given, the value shared), each group of names once."""
    seen: dict[Fingerprint, list[str]] = defaultdict(list)
    for name, prints in runs:
        for fingerprint in prints:
            seen[fingerprint].append(name)
    groups, named = [], set()
    for (what, value), names in seen.items():
        if len(names) > 1 and tuple(names) not in named:
            named.add(tuple(names))
            groups.append((what, tuple(names), value))
    return groups


def copies(runs: Sequence[tuple[str, Sequence[Fingerprint]]]) -> dict[str, str]:
    """Each run that is a copy of an earlier one in ``runs``: its name -> the first run's name."""
    found: dict[str, str] = {}
    for _, names, _ in same_runs(runs):
        found.update({name: found.get(names[0], names[0]) for name in names[1:] if name not in found})
    return found


def copy_note(original: str) -> str:
    """What ``report`` says of a run it counts as failed because it copies ``original``."""
    return f"the same run as {original} to the millisecond ({RULE}: a copy, whatever its seed says); counted as failed"


def same_run_problems(runs: Sequence[tuple[str, Sequence[Line]]]) -> list[str]:
    """``review``'s errors for runs of one result set (``(file name, its records)``) that are the same run."""
    problems = []
    for what, names, (end, records) in same_runs([(name, fingerprints(lines)) for name, lines in runs]):
        minutes = f"{end / 60000:.4g} minutes" if end is not None else "no run_stop"
        problems.append(
            f"{RULE}: {' and '.join(names)} have the same {what} to the millisecond ({minutes}, {len(records)} "
            "records), whatever their seeds say: they are one run, and each result file must be a run of its own; "
            "keep one of them and redo the others"
        )
    return problems


def overlapping_runs(system: str, runs: Sequence[tuple[str, Sequence[Line]]]) -> list[str]:
    """A warning for runs of one result set whose timed runs overlap on the system: each run that starts before an
    earlier-started run has stopped, named with that run."""
    spans = []
    for name, lines in runs:
        start, stop = _first_ms(lines, "run_start"), _first_ms(lines, "run_stop")
        if start is not None and stop is not None and stop > start:
            spans.append((start, stop, name))
    pairs, latest = [], None  # latest: the span that stops last of those started so far
    for span in sorted(spans):
        if latest is not None and span[0] < latest[1]:
            pairs.append((latest, span))
        if latest is None or span[1] > latest[1]:
            latest = span
    if not pairs:
        return []
    shown = ", ".join(f"{a[2]} and {b[2]} ({(min(a[1], b[1]) - b[0]) / 60000:.3g} minutes)" for a, b in pairs[:_SHOWN])
    more = f" and {len(pairs) - _SHOWN} more pair(s)" if len(pairs) > _SHOWN else ""
    return [
        f"runs overlap in time on system {system}: {shown}{more}; MLCommons accepted overlapping runs (one system "
        "description standing for several machines of its kind), so this is a warning: each run must have had a "
        "whole system of that description to itself"
    ]


def identical_across_systems(files: Mapping[tuple[str, str], Sequence[Path]]) -> list[str]:
    """Warnings for result files with the same bytes under two or more systems (``files``: (system, benchmark) ->
    paths), one for each set of systems and benchmark, naming the files."""
    by_hash: dict[str, list[tuple[str, str, Path]]] = defaultdict(list)
    for (system, benchmark), paths in files.items():
        for path in paths:
            try:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError:
                continue
            by_hash[digest].append((system, benchmark, path))
    groups: dict[tuple[tuple[str, ...], tuple[str, ...]], list[str]] = defaultdict(list)
    for found in by_hash.values():
        systems = tuple(sorted({s for s, _, _ in found}))
        if len(systems) > 1:
            names = [f"results/{s}/{b}/{p.name}" for s, b, p in sorted(found, key=lambda x: (x[0], x[1], x[2].name))]
            groups[(systems, tuple(sorted({b for _, b, _ in found})))].append(" and ".join(names))
    warnings = []
    for (systems, _), same in sorted(groups.items()):
        same.sort()
        more = f" (and {len(same) - _SHOWN} more)" if len(same) > _SHOWN else ""
        warnings.append(
            f"{', '.join(same[:_SHOWN])}{more} are the same bytes under {len(systems)} systems ({', '.join(systems)}): "
            "the same runs submitted for two system descriptions (MLCommons published such files); each system's "
            "score is then the other's"
        )
    return warnings
