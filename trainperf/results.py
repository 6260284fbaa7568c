"""Reading MLLOG result files back (never evaluating anything in them)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainperf.errors import ResultsError

TOKEN = ":::MLLOG "


def read_mllog(path: Path) -> list[dict[str, Any]]:
    """The MLLOG records of a file, in order; lines that are not MLLOG JSON are skipped."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise ResultsError(f"cannot read result file {path}: {e.strerror}") from None
    records = []
    for line in text.splitlines():
        i = line.find(TOKEN)
        if i < 0:
            continue
        try:
            rec = json.loads(line[i + len(TOKEN) :])
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and "key" in rec:
            records.append(rec)
    return records


@dataclass(frozen=True, kw_only=True)
class LoggedRun:
    path: Path
    benchmark: str | None
    platform: str | None
    scale: str
    seed: int | None
    status: str | None  # None when the log has no run_stop
    minutes: float | None
    curve: list[tuple[float, float, float]]  # (minutes since run_start, progress as logged in epoch_num, quality)

    @property
    def success(self) -> bool:
        return self.status == "success"


def parse_run(path: Path) -> LoggedRun:
    records = read_mllog(path)
    first: dict[str, Any] = {}
    for rec in records:
        first.setdefault(rec["key"], rec)
    start = first.get("run_start")
    stop = first.get("run_stop")
    minutes = None
    if start and stop:
        minutes = (float(stop["time_ms"]) - float(start["time_ms"])) / 60000.0
    curve = []
    if start:
        t0 = float(start["time_ms"])
        for rec in records:
            if rec["key"] == "eval_accuracy":
                meta = rec.get("metadata") or {}
                value = rec["value"]
                if isinstance(value, dict):  # a multi-field metric: its first field is the headline
                    value = next(iter(value.values()), float("nan"))
                curve.append(((float(rec["time_ms"]) - t0) / 60000.0, float(meta.get("epoch_num", 0)), float(value)))
    status = ((stop or {}).get("metadata") or {}).get("status")
    return LoggedRun(
        path=path,
        benchmark=(first.get("submission_benchmark") or {}).get("value"),
        platform=(first.get("submission_platform") or {}).get("value"),
        scale=(first.get("trainperf_scale") or {}).get("value", "reference"),
        seed=(first.get("seed") or {}).get("value"),
        status=status,
        minutes=minutes,
        curve=curve,
    )
