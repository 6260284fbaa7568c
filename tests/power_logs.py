"""Hand-written MLPerf power logs (no copy of a published log), for the tests of `review`'s and `report`'s energy:
``results/<system>/<benchmark>/power/result_<i>/node_<n>.txt`` with ``power_reading`` lines between
``power_measurement_start`` and ``power_measurement_stop``, and ``sw_<n>.txt`` with ``interconnect_power_est``."""

from __future__ import annotations

from pathlib import Path

from round_logs import record, write
from untrusted import SYSTEM


def run_window(recs: list[dict]) -> tuple[int, int]:
    """(run_start, run_stop) time_ms of a result file's records."""
    start = next(r["time_ms"] for r in recs if r["key"] == "run_start")
    return start, next(r["time_ms"] for r in recs if r["key"] == "run_stop")


def node_log(
    recs: list[dict],
    watts: float,
    *,
    every: int = 500,
    eff: float | None = 0.95,
    lead: int = 1000,
    tail: int = 1000,
    uneven: bool = False,
) -> list[dict]:
    """A node's log for the run ``recs``: measured from ``lead`` ms before run_start to ``tail`` ms after run_stop
    (negative: starts late / stops early), a reading of ``watts`` every ``every`` ms, the last at the stop.
    ``uneven``: readings that vary and jitter, one before the start and one after the stop (neither counted), and no
    power_measurement_stop (the last reading ends the measurement)."""
    start, stop = run_window(recs)
    begin, end = start - lead, stop + tail
    out = [record(begin - 900, "power_reading", 9e3, host="node")] if uneven else []
    out += [record(begin, "power_measurement_start", event="INTERVAL_START", host="node")]
    out += [record(begin, "conversion_eff", eff, host="node")] if eff is not None else []
    t, k = begin + every, 0
    while t < end:
        k += 1
        shift, extra = ((k % 3) * 90, 37 * (k % 5)) if uneven else (0, 0)
        out.append(record(t + shift, "power_reading", watts + extra, host="node", unit="W"))
        t += every
    out.append(record(end, "power_reading", watts, host="node", unit="W"))
    if uneven:
        return [*out, record(end + 5000, "power_reading_other", 9e3, host="node")]
    return out + [record(end, "power_measurement_stop", event="INTERVAL_END", host="node")]


def switch_log(recs: list[dict], watts: float, eff: float = 0.9) -> list[dict]:
    start, _ = run_window(recs)
    return [record(start, "conversion_eff", eff, host="sw"), record(start, "interconnect_power_est", watts, host="sw")]


def add_power(org: Path, benchmark: str, run: int, logs: dict[str, list[dict]]) -> Path:
    """Write ``logs`` (file name -> records) into ``results/<system>/<benchmark>/power/result_<run>/``."""
    folder = org / "results" / SYSTEM / benchmark / "power" / f"result_{run}"
    for name, recs in logs.items():
        write(folder / name, recs)
    return folder


def expected_joules(
    recs: list[dict], node_watts: list[float], node_eff: float, sw_watts: float, sw_eff: float
) -> float:
    """The energy of a run whose nodes draw constant power over a measurement that covers it: what the rules'
    "sum(power reading * duration)" gives, scaled to run_stop - run_start, plus the switch estimate over the run."""
    start, stop = run_window(recs)
    seconds = (stop - start) / 1000
    return seconds * (node_eff * sum(node_watts) + sw_eff * sw_watts)
