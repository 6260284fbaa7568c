"""The MLPerf Training rounds trainperf mirrors, as data: ``<version>.toml`` beside this file.

A round names its MLPerf version, the ruleset the official tools judge its logs by, the keys its common rules add
to every log (``disclosure``), and its benchmarks, each with what the round fixes for it (a title, the quality
target in words, the runs a result needs and how many olympic scoring drops at each end). A benchmark of a round
that trainperf runs has its own folder, ``trainperf/workloads/<key>/``, with every other fact; the others are listed
as not implemented yet. A new round is a new file naming its benchmarks, not a copy of code.

Reading the rounds imports nothing but the standard library (``trainperf list`` stays instant).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from trainperf.errors import UsageError

DEFAULT_ROUND = "2.0"  # every command's default, so that what ran before --round existed runs the same
_DIR = Path(__file__).parent


@dataclass(frozen=True, kw_only=True)
class RoundBenchmark:
    """What a round fixes for one of its benchmarks."""

    key: str
    title: str
    target: str  # the quality target in words (the reference spec holds the number)
    runs: int  # result files a score needs
    dropped: int = 1  # dropped at each end by olympic scoring

    @property
    def implemented(self) -> bool:
        """Whether trainperf has the benchmark's folder (its facts and workload)."""
        return (_DIR.parent / "workloads" / self.key / "__init__.py").is_file()


@dataclass(frozen=True, kw_only=True)
class Round:
    version: str  # "6.1": as MLCommons names the round (v6.1)
    ruleset: str  # "6.1.0": as the official tools name its rules
    title: str
    disclosure: tuple[str, ...]  # keys the round's common rules require once in every log, beyond v2.0's
    # Evaluations of a benchmark counted in samples carry samples_count in their metadata (6.1's closed rule files
    # require it on eval_accuracy), beside the epoch_num every trainperf log has.
    samples_count: bool
    benchmarks: tuple[RoundBenchmark, ...]

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(b.key for b in self.benchmarks)

    @property
    def implemented(self) -> tuple[str, ...]:
        return tuple(b.key for b in self.benchmarks if b.implemented)

    def entry(self, key: str) -> RoundBenchmark:
        for b in self.benchmarks:
            if b.key == key:
                return b
        raise UsageError(f"benchmark {key!r} is not in round {self.version}: its benchmarks are {', '.join(self.keys)}")


def _load(path: Path) -> Round:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    benches = tuple(
        RoundBenchmark(
            key=b["key"], title=b["title"], target=b["target"], runs=int(b["runs"]), dropped=int(b.get("dropped", 1))
        )
        for b in data["benchmark"]
    )
    found = Round(
        version=data["version"],
        ruleset=data["ruleset"],
        title=data["title"],
        disclosure=tuple(data.get("disclosure", ())),
        samples_count=bool(data.get("samples_count", False)),
        benchmarks=benches,
    )
    if path.stem != found.version:
        raise RuntimeError(f"{path}: holds round {found.version!r}; the file must be named {found.version}.toml")
    return found


@cache
def all_rounds() -> tuple[Round, ...]:
    """Every round, oldest first."""
    found = [_load(p) for p in _DIR.glob("*.toml")]
    return tuple(sorted(found, key=lambda r: tuple(int(x) for x in r.version.split("."))))


def versions() -> tuple[str, ...]:
    return tuple(r.version for r in all_rounds())


def get(version: str) -> Round:
    """The round named ``version`` (``6.1``, ``v6.1`` or its ruleset ``6.1.0``); a clear error otherwise."""
    text = str(version).strip().removeprefix("v")
    for r in all_rounds():
        if text in (r.version, r.ruleset):
            return r
    raise UsageError(f"unknown round {version!r}: trainperf's rounds are {', '.join(versions())} (trainperf list)")


def of_benchmark(key: str) -> Round | None:
    """The round a benchmark key belongs to (the newest that names it), or None."""
    for r in reversed(all_rounds()):
        if key in r.keys:
            return r
    return None
