"""Power logs of a package and the energy to train that MLCommons computes from them.

Where (MLPerf Training power rules, training_policies ``power_measurement.adoc``, from v4.0 on):
``results/<system>/<benchmark>/power/result_<i>/node_<n>.txt`` (one per node, ``power_reading`` lines in watts
between ``power_measurement_start`` and ``power_measurement_stop``, an optional ``conversion_eff``) and
``sw_<n>.txt`` (one per switch: ``interconnect_power_est`` in watts, an optional ``conversion_eff``).

The rules checked here, each named in its finding: readings at 1 Hz or faster (``power_measurement.adoc``:
"at least once every second distributed evenly throughout the timed portion of a run"), at least 60 readings a run
("Measure max(a run, 60 power samples)"), the measurement covering the run from ``run_start`` to ``run_stop``
("must include all timed operations"), a conversion efficiency in (0, 1] ("AC/DC conversion efficiency factor") and
an interconnect estimate that is a number of watts, not negative.

The energy of a run, as the installed ``mlperf_logging.result_summarizer`` computes it (its ``_compute_total_power``;
the rules' "sum(a power reading * duration between the previous reading and the current reading)"): for each node
log, the readings taken between the measurement's start and stop, each times the time since the previous one (the
first since the start), is the measured energy; scaled to the run by ``(run_stop - run_start) / (stop - start)``
and by ``conversion_eff``. For each switch, ``conversion_eff * interconnect_power_est * (run_stop - run_start)``.
Joules, summed over the files. The benchmark's energy is the olympic mean over the runs the time score keeps.

Where the installed summarizer cannot read a package's node logs, review gives the energy by the formula of the
package's own round's summarizer (:func:`formula_of`), where that one read them. v4.0's (mlcommons/logging at tag
4.0.0-rc3-rcp-prunning, 20 May 2024, with 4054425 "Set power_measurement_stop to last measurement"; the round's
energy as published is that of master of 13 June 2024, which adds only a switch's default ``conversion_eff`` of 1.0)
read a node log's lines in file order, not sorted: every reading up to the first ``power_measurement_stop`` line
counted (the time since the previous reading, or since the last ``power_measurement_start``), the stop taken as the
later of that line's time and the latest reading, ``conversion_eff`` the last one before the stop line. Later rounds'
(the installed summarizer's, above) sort the lines and stop at the stop line's time: a log whose stop line sits last
but carries the start's time is a measurement of length zero there, which the installed summarizer divides by.
On logs in time order without a reading before the start, the two formulas agree.

A power log is untrusted: read under the result files' size cap, without following links, through the gate, and
parsed here as data (nothing evaluated, no logged value used as a path). A log the official summarizer would crash
on keeps the benchmark's whole ``power/`` folder out of the copy the tools read, with a warning that names the file.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainperf import limits
from trainperf.fileio import refuse_link
from trainperf.results import mllog_lines
from trainperf.rules import gate

FOLDER = "power"
FILE_NAME = re.compile(r"(node|sw)_(0|[1-9][0-9]{0,3})\.txt")  # node_<n>.txt, sw_<n>.txt (package_checker's names)
RESULT_FOLDER = re.compile(r"result_[A-Za-z0-9_-]{1,64}")  # power/<result file name without .txt>
MIN_READINGS = 60  # power_measurement.adoc: "Measure max(a run, 60 power samples)"
MAX_INTERVAL_MS = 1000  # power_measurement.adoc: "at least once every second"
MAX_GAP_MS = 2 * MAX_INTERVAL_MS  # "distributed evenly": no reading missed for longer than one interval
FIRST_ROUND = "4.0.0"  # MLPerf Training v4.0: the first round with power submissions
INSTALLED = "installed"  # the installed result_summarizer's formula (lines sorted; v4.1 on)
IN_FILE_ORDER = "4.0.0"  # v4.0's summarizer's formula (lines in file order; see the module docstring)
RULE = "MLPerf power rules, power_measurement.adoc"


@dataclass(frozen=True, kw_only=True)
class Line:
    time_ms: float
    key: str
    value: Any


@dataclass(kw_only=True)
class PowerLog:
    """One node_<n>.txt or sw_<n>.txt, parsed."""

    name: str
    lines: list[Line]  # sorted by time_ms (stable), as the installed summarizer sorts them
    in_file: list[Line] = field(default_factory=list)  # in the file's order, as v4.0's summarizer read them

    @property
    def is_node(self) -> bool:
        return self.name.startswith("node_")


@dataclass(kw_only=True)
class RunPower:
    """The power logs of one run (``power/<result>/``)."""

    logs: list[PowerLog] = field(default_factory=list)

    @property
    def nodes(self) -> list[PowerLog]:
        return [log for log in self.logs if log.is_node]

    @property
    def switches(self) -> list[PowerLog]:
        return [log for log in self.logs if not log.is_node]


def formula_of(ruleset: str) -> str:
    """The energy formula of a package's round: v4.0's summarizer's for the 4.0.0 ruleset, the installed one's for
    every other (later rounds; older ones had no power submissions)."""
    return IN_FILE_ORDER if ruleset == IN_FILE_ORDER else INSTALLED


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def parse(data: bytes, name: str, known: Collection[str] | None = None) -> tuple[PowerLog | None, list[str]]:
    """(the log, []) or (None, why no round's official summarizer can read it): every MLLOG line a JSON object with
    a numeric ``time_ms``, a ``key``, a ``value`` and a ``metadata`` (the summarizer's parser stops on a missing one),
    the values it computes with numbers, a node log with a ``power_measurement_start``. Whether a summarizer can
    compute a node's energy from it (a measurement longer than zero) is :func:`unreadable`, by the round's formula."""
    why = [f"{name}: {r}" for r in (gate.screen_log(data) if known is None else gate.screen_log(data, known=known))]
    if why:
        return None, why
    lines = []
    for line in mllog_lines(data, max_line_chars=limits.MAX_LINE_CHARS):
        try:
            rec = json.loads(line.text)
        except (ValueError, RecursionError):
            return None, [f"{name} line {line.lineno}: not a JSON object; the official summarizer's parser needs one"]
        if not (isinstance(rec, dict) and {"time_ms", "key", "value", "metadata"} <= rec.keys()):
            return None, [f"{name} line {line.lineno}: an MLLOG record needs time_ms, key, value and metadata"]
        if not (_number(rec["time_ms"]) and isinstance(rec["key"], str)):
            return None, [f"{name} line {line.lineno}: time_ms must be a number and key a string"]
        if rec["key"] in ("power_reading", "conversion_eff", "interconnect_power_est") and not _number(rec["value"]):
            return None, [f"{name} line {line.lineno}: {rec['key']} {gate.shown(rec['value'])} is not a number"]
        lines.append(Line(time_ms=float(rec["time_ms"]), key=rec["key"], value=rec["value"]))
    log = PowerLog(name=name, lines=sorted(lines, key=lambda x: x.time_ms), in_file=lines)  # stable sort
    if log.is_node and not any(line.key == "power_measurement_start" for line in lines):
        return None, [f"{name}: no power_measurement_start; the official summarizer stops on it ({RULE})"]
    return log, []


def unreadable(log: PowerLog, formula: str = INSTALLED) -> str | None:
    """Why the summarizer of ``formula`` cannot compute a node log's energy (None: it can): a measurement of length
    zero, which it divides by, or (v4.0's) a reading before the start, which it counts from time 0."""
    start, stop, _ = _window(log, formula)
    if formula == IN_FILE_ORDER and _read_before_start(log):
        return f"{log.name}: a power_reading before power_measurement_start, which v4.0's summarizer counts from time 0"
    if start is None or stop is None or stop <= start:
        return f"{log.name}: no reading or power_measurement_stop after power_measurement_start"
    return None


def _read_before_start(log: PowerLog) -> bool:
    for line in log.in_file:
        if line.key == "power_measurement_start":
            return False
        if line.key == "power_reading":
            return True
    return False


def _window(log: PowerLog, formula: str = INSTALLED) -> tuple[float | None, float | None, list[Line]]:
    """(measurement start, stop, the readings counted) as the summarizer of ``formula`` reads them: the installed
    one from the first power_measurement_start on, up to the first power_measurement_stop (else the last reading);
    v4.0's in file order (see the module docstring)."""
    if formula == IN_FILE_ORDER:
        return _window_in_file(log)
    start = stop = None
    readings: list[Line] = []
    for line in log.lines:
        if line.key == "power_measurement_start":
            start = line.time_ms
        elif line.key == "power_reading" and start is not None and stop is None:
            readings.append(line)
        elif line.key == "power_measurement_stop" and stop is None:
            stop = line.time_ms
    if stop is None and readings:
        stop = max(r.time_ms for r in readings)
    return start, stop, readings


def _until_stop(log: PowerLog) -> list[Line]:
    """The lines v4.0's summarizer read: in file order, up to the first power_measurement_stop (included)."""
    out = []
    for line in log.in_file:
        out.append(line)
        if line.key == "power_measurement_stop":
            break
    return out


def _window_in_file(log: PowerLog) -> tuple[float | None, float | None, list[Line]]:
    start = stop = None
    readings: list[Line] = []
    for line in _until_stop(log):
        if line.key == "power_measurement_start":
            start = line.time_ms
        elif line.key == "power_reading":
            readings.append(line)
        elif line.key == "power_measurement_stop":
            stop = line.time_ms
    times = [t for t in (stop, *(r.time_ms for r in readings)) if t is not None]
    return start, max(times) if times else None, readings


def _last(lines: Iterable[Line], key: str, default: float = 1.0) -> float:
    values = [line.value for line in lines if line.key == key]
    return float(values[-1]) if values else default


def node_joules(log: PowerLog, run_ms: float, formula: str = INSTALLED) -> float:
    """A node's energy over a run of ``run_ms`` milliseconds by the summarizer of ``formula`` (see the module
    docstring)."""
    assert unreadable(log, formula) is None
    start, stop, readings = _window(log, formula)
    assert start is not None and stop is not None
    if formula == IN_FILE_ORDER:  # the time since the previous reading, or since the latest start line
        measured, previous = 0.0, start
        for line in _until_stop(log):
            if line.key == "power_measurement_start":
                previous = line.time_ms
            elif line.key == "power_reading":
                measured, previous = measured + line.value * (line.time_ms - previous), line.time_ms
        return _last(_until_stop(log), "conversion_eff") * measured / (stop - start) * run_ms / 1000
    measured, previous = 0.0, start
    for reading in readings:
        measured += reading.value * (reading.time_ms - previous)
        previous = reading.time_ms
    return _last(log.lines, "conversion_eff") * measured / (stop - start) * run_ms / 1000


def switch_joules(log: PowerLog, run_ms: float) -> float:
    """A switch's energy: its first interconnect estimate, with the conversion efficiency logged before it."""
    eff, watts = 1.0, 0.0
    for line in log.lines:
        if line.key == "conversion_eff":
            eff = float(line.value)
        if line.key == "interconnect_power_est":
            watts = float(line.value)
            break
    return eff * watts * run_ms / 1000


def run_joules(power: RunPower, run_ms: float, formula: str = INSTALLED) -> float:
    nodes = sum(node_joules(n, run_ms, formula) for n in power.nodes)
    return nodes + sum(switch_joules(s, run_ms) for s in power.switches)


def rule_findings(
    power: RunPower, result: str, run_start: float | None, run_stop: float | None, formula: str = INSTALLED
) -> list[str]:
    """What breaks the power rules in one run's logs, each naming the file and the rule; the measurement read as the
    summarizer of ``formula`` reads it."""
    out = []
    for log in power.nodes:
        where = f"power/{result}/{log.name}"
        start, stop, readings = _window(log, formula)
        assert start is not None and stop is not None
        if len(readings) < MIN_READINGS:
            out.append(f"{where}: {len(readings)} power readings, under the {MIN_READINGS} a run needs ({RULE})")
        times = [start, *(r.time_ms for r in readings), stop]
        span = stop - start
        if readings and span / len(readings) > MAX_INTERVAL_MS:
            out.append(
                f"{where}: one reading every {span / len(readings) / 1000:.2f} s on average, slower than the 1 Hz "
                f"the rules ask ({RULE})"
            )
        elif len(times) > 1 and (gap := max(b - a for a, b in zip(times, times[1:], strict=False))) > MAX_GAP_MS:
            out.append(
                f"{where}: no reading for {gap / 1000:.2f} s; readings at 1 Hz are distributed evenly over the run "
                f"({RULE})"
            )
        if run_start is not None and run_stop is not None and (start > run_start or stop < run_stop):
            late = [f"starts {(start - run_start) / 1000:.2f} s after run_start"] if start > run_start else []
            late += [f"stops {(run_stop - stop) / 1000:.2f} s before run_stop"] if stop < run_stop else []
            out.append(
                f"{where}: the measurement {' and '.join(late)}: it does not cover the run, and must include all "
                f"timed operations ({RULE})"
            )
        out += _efficiency(log, where)
    for log in power.switches:
        where = f"power/{result}/{log.name}"
        est = [line.value for line in log.lines if line.key == "interconnect_power_est"]
        if not est or est[0] < 0:
            out.append(
                f"{where}: interconnect_power_est must be the interconnect's estimated power in watts, at least 0 "
                f"(got {gate.shown(est[0]) if est else 'none'}; {RULE})"
            )
        out += _efficiency(log, where)
    return out


def _efficiency(log: PowerLog, where: str) -> list[str]:
    bad = [line.value for line in log.lines if line.key == "conversion_eff" and not 0 < line.value <= 1]
    if bad:
        return [f"{where}: conversion_eff {bad[0]!r} is not an efficiency in (0, 1] ({RULE})"]
    return []


def olympic_joules(runs: list[tuple[float, float | None]], dropped: int) -> float | None:
    """The benchmark's energy: ``runs`` is (minutes, joules) per result file, a run the time score does not count
    as ``math.inf`` minutes; the runs the time score's olympic average keeps (the ``dropped`` fastest and slowest
    left out, training_policies: "choose the same runs as the performance score's Olympic scoring"), their mean."""
    ordered = sorted(runs, key=lambda r: r[0])
    kept = ordered[dropped : len(ordered) - dropped]
    if not kept or any(m == math.inf or j is None for m, j in kept):
        return None
    return sum(j for _, j in kept if j is not None) / len(kept)


def joules_text(joules: float | None) -> str:
    if joules is None:
        return "no energy score"
    return f"{joules / 3.6e6:.4f} kWh ({joules:.6g} J)"


def first_ms(records: Iterable[dict[str, Any]], key: str) -> float | None:
    """The time_ms of the first record of ``key`` (the summarizer's run_start and run_stop), None if not a number."""
    t = next((rec.get("time_ms") for rec in records if rec.get("key") == key), None)
    return float(t) if _number(t) else None


UNREADABLE = "power log unreadable"  # folder_joules's note where a summarizer cannot read a run's logs
LOGS_NOTE = "MLPerf power logs"  # ... where it read them


def folder_joules(
    result: Path, start_ms: float | None, stop_ms: float | None, formula: str = INSTALLED
) -> tuple[float | None, str]:
    """The energy of the run in ``result`` (a result file) from the power logs beside it
    (``power/<result name>/{node,sw}_<n>.txt``), as the summarizer of ``formula`` computes it, and how it was found;
    (None, why) where there are none or they cannot be read (read capped, a link refused)."""
    folder = result.parent / FOLDER / result.stem
    if not folder.is_dir() or start_ms is None or stop_ms is None:
        return None, "not measured"
    top = result.parents[3] if len(result.parents) > 3 else result.parent
    refuse_link(folder.parent, top)
    refuse_link(folder, top)
    run = RunPower()
    for path in sorted(folder.iterdir()):
        if not FILE_NAME.fullmatch(path.name) or not refuse_link(path, top).is_file():
            continue
        try:
            data = limits.read_capped(path, limits.MAX_RESULT_BYTES)
        except ValueError as e:
            return None, f"power log {path.name} {e}"
        log, why = parse(data, path.name)
        if log is not None and log.is_node and (zero := unreadable(log, formula)):
            why = [zero]
        if log is None or why:
            return None, f"{UNREADABLE}: {why[0]}"
        run.logs.append(log)
    if not run.nodes:
        return None, f"no node_<n>.txt in {FOLDER}/{result.stem}"
    how = f"{LOGS_NOTE} ({len(run.nodes)} node(s), {len(run.switches)} switch(es))"
    if formula == IN_FILE_ORDER:
        how += ", by v4.0's summarizer's formula (lines in file order): the installed one cannot read all of them"
    return run_joules(run, stop_ms - start_ms, formula), how
