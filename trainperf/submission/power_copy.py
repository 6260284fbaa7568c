"""The power logs of a package on their way into the private copy (:mod:`trainperf.submission.layout`): read as the
result files are read, parsed (:mod:`trainperf.submission.power`), and copied only where the official tools can read
every one of them."""

from __future__ import annotations

import os
import stat
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

from trainperf import limits
from trainperf.rules import gate
from trainperf.submission import power

if TYPE_CHECKING:
    from trainperf.submission.layout import Layout, _Reader


def _name(name: str) -> str:
    return gate.shown(name) if gate.name_problem(name) else name


def read_power(
    reader: _Reader, bench_fd: int, rel: Path, key: tuple[str, str], layout: Layout
) -> dict[str, dict[str, bytes]]:
    """The bytes of ``power/<result>/{node,sw}_<n>.txt`` (read as result files are: capped, no link followed); any
    other entry is left out with a warning."""
    found: dict[str, dict[str, bytes]] = {}
    warn = layout.warnings_of.setdefault(key, [])
    fd = reader.open_folder(rel.name, bench_fd, rel)
    try:
        for run, mode in reader.listing(fd, rel):
            where = f"{rel}/{_name(run)}"
            if not (stat.S_ISDIR(mode) and power.RESULT_FOLDER.fullmatch(run)):
                warn.append(f"{where} is not a run's power folder (power/result_<i>/); left out")
                continue
            run_fd = reader.open_folder(run, fd, rel / run)
            try:
                for name, file_mode in reader.listing(run_fd, rel / run):
                    if not (stat.S_ISREG(file_mode) and power.FILE_NAME.fullmatch(name)):
                        warn.append(f"{where}/{_name(name)} is not a power log (node_<n>.txt, sw_<n>.txt); left out")
                        continue
                    try:
                        found.setdefault(run, {})[name] = reader.read(
                            name, run_fd, limits.MAX_RESULT_BYTES, rel / run / name
                        )
                    except ValueError as e:
                        found.setdefault(run, {})[name] = b""
                        warn.append(f"{where}/{name}: the file {e}; it is not read")
            finally:
                os.close(run_fd)
    finally:
        os.close(fd)
    return found


def _misnumbered(got: dict[str, bytes], rel: str, run: str) -> list[str]:
    """Where a run's node or switch logs are not numbered from 0 on (the installed package checker's rule)."""
    out = []
    for kind in ("node", "sw"):
        names = sorted(n for n in got if n.startswith(f"{kind}_"))
        if {f"{kind}_{i}.txt" for i in range(len(names))} != set(names):
            out.append(f"{rel}/{run}: the {kind} logs are not {kind}_0.txt to {kind}_{len(names) - 1}.txt")
    return out


def withheld_by_names(logs: dict[str, dict[str, bytes]], files: list[str]) -> bool:
    """Whether :func:`copy_power` leaves these logs out of the copy whatever they hold: a run's logs are not numbered
    from 0 on, which the installed tools refuse (read or not, they are then kept from the tools)."""
    runs = [name.removesuffix(".txt") for name in files]
    return bool(logs) and any(_misnumbered(logs.get(run, {}), "", run) for run in runs)


def copy_power(
    logs: dict[str, dict[str, bytes]], files: list[str], key: tuple[str, str], layout: Layout, known: Collection[str]
) -> None:
    """Copy the power logs of the result files in the copy where the official tools can read every one of them:
    each run with node logs node_0 to node_<n-1> (and sw_0 to sw_<m-1>), each readable (:func:`power.parse`, with the
    benchmark names ``known``); else none, and a warning names what is wrong (the summarizer stops on a run without a
    node log)."""
    rel = f"results/{key[0]}/{key[1]}/{power.FOLDER}"
    if not logs:
        layout.warnings_of.setdefault(key, []).append(
            f"{rel} holds no power logs (power/result_<i>/node_<n>.txt); left out: no energy score"
        )
        return
    runs = [name.removesuffix(".txt") for name in files]
    parsed: dict[str, power.RunPower] = {}
    why: list[str] = []  # no round's summarizer reads them
    installed: list[str] = []  # the installed tools do not (the numbering is the installed package checker's rule)
    for run in runs:
        got = logs.get(run, {})
        nodes = sorted(n for n in got if n.startswith("node_"))
        switches = sorted(n for n in got if n.startswith("sw_"))
        installed += _misnumbered(got, rel, run)
        if not nodes:
            why.append(f"{rel}/{run}: no node_<n>.txt for {run}.txt; every run of a power submission has one")
        parsed[run] = power.RunPower()
        for name in nodes + switches:
            if not got[name]:
                why.append(f"{rel}/{run}/{name}: not read (over the size limit)")
                continue
            log, problems = power.parse(got[name], name, known=known)
            why += [f"{rel}/{run}/{p}" for p in problems]
            if log is not None:
                parsed[run].logs.append(log)
                zero = power.unreadable(log) if log.is_node else None
                installed += [f"{rel}/{run}/{zero}"] if zero else []
    if why:
        layout.warnings_of.setdefault(key, []).extend(
            [
                *why,
                *installed,
                f"{rel} is left out of the check: no energy score (the official summarizer cannot read it)",
            ]
        )
        return
    if installed:  # kept from the tools' copy; review decides by the package's round (its formula) once it is known
        layout.power_withheld[key] = installed
        layout.power_logs[key] = parsed
        return
    dest = layout.folder(key) / power.FOLDER
    for run, names in ((r, logs[r]) for r in runs):
        (dest / run).mkdir(parents=True, exist_ok=True)
        for name, data in names.items():
            (dest / run / name).write_bytes(data)
    layout.power_logs[key] = parsed
