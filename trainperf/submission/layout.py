"""The layout of an untrusted submission package: finding it, and copying what the official tools read.

``copy_package`` copies into a private folder only what the official tools need: ``systems/*.json``,
``results/<system>/<benchmark>/result_*.txt`` and the power logs ``power/result_<i>/{node,sw}_<n>.txt`` beside them
(:mod:`trainperf.submission.power`: kept out, the whole folder, where the summarizer could not read one; read
for review where only the installed tools cannot). Every file
is read as bytes under a size cap (see :mod:`trainperf.limits`: 16 MiB a result file or power log, 1 MiB a system
description, 256 MiB in all), refused
by its apparent size before a byte is read. Links are never followed: a link where the copy reads
refuses the package, naming it. Each name on the way must be a plain name (no path separator, ``..``,
control or pattern character), and each file must pass the gate: a result file whose logged values
would lead the official tools to other files, or a system description whose names would, is kept out
of the copy, with the reason. The copy also leaves out what would crash the official tools (a result
folder without a usable system description, a folder that is not a v2.0 benchmark) or sway them
(``scaling.json``, which scales the summarizer's score, and ``package_checker_params``, which bypasses
its seed and RCP checks: both are for the review committee, not for a package to carry). What it
leaves out, and why, is recorded in words that name the file.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainperf import limits
from trainperf.errors import ResultsError
from trainperf.fileio import link_refusal
from trainperf.registry import BENCHMARKS
from trainperf.rules import gate, rulesets
from trainperf.spec import MLPERF_RULESET
from trainperf.submission import power, power_copy
from trainperf.system import DIVISIONS, REQUIRED_FIELDS

RESULT_GLOB = "result_*.txt"  # what the official tools read
# At most this many entries are looked at in one package: a v2.0 package holds, per system, at most 8
# benchmark folders of 5 to 40 result files.
MAX_ENTRIES = 20_000
_CONTROL_FILES = {
    "scaling.json": "scales the result_summarizer's score",
    "package_checker_params": "bypasses the official seed or RCP checks",
}
_NOT_A_PACKAGE = (
    "a package is <org>/systems/<system>.json, <org>/results/<system>/<benchmark>/result_<i>.txt and "
    "<org>/benchmarks; build one with `trainperf package`"
)
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def find_org_dir(path: Path) -> Path:
    """The package's ``<org>`` folder: ``path`` itself, or the one package folder inside it."""
    if not path.is_dir():
        raise ResultsError(f"{path} is not a folder: give the package's <org> folder ({_NOT_A_PACKAGE})")
    path = path.resolve()
    if (path / "results").is_dir() or (path / "systems").is_dir():
        return path
    inside = [p for p in sorted(path.iterdir()) if not p.is_symlink() and (p / "results").is_dir()]
    if len(inside) == 1:
        return inside[0]
    if len(inside) > 1:
        raise ResultsError(
            f"{path} holds several packages ({', '.join(p.name for p in inside)}): review one <org> folder at a time"
        )
    raise ResultsError(f"{path} is not a submission package (no results/ folder): {_NOT_A_PACKAGE}")


@dataclass(kw_only=True)
class Layout:
    root: Path  # the private copy
    benchmarks: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # (system, benchmark) -> files
    # (system, benchmark) -> result file name -> why it was kept out of the copy (not read by any official tool)
    refused: dict[tuple[str, str], dict[str, list[str]]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # about the package as a whole
    system_problems: dict[str, list[str]] = field(default_factory=dict)
    system_warnings: dict[str, list[str]] = field(default_factory=dict)
    problems_of: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    warnings_of: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    unusable_systems: set[str] = field(default_factory=set)  # no usable system description: not checked
    divisions: dict[str, str] = field(default_factory=dict)  # system -> division of its description
    descriptions: dict[str, dict[str, Any]] = field(default_factory=dict)  # system -> its usable description
    scaling: dict[tuple[str, str], float] = field(default_factory=dict)  # (system, benchmark) -> scaling.json factor
    # (system, benchmark) -> result name (result_<i>) -> its power logs, copied (power/, see trainperf.submission.power)
    power_logs: dict[tuple[str, str], dict[str, power.RunPower]] = field(default_factory=dict)
    # (system, benchmark) -> why the installed tools cannot read its power logs, which are kept out of the copy but
    # read (in power_logs): an earlier round's summarizer may have (see review's _check_power)
    power_withheld: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    deferring: bool = False  # copy_package(defer_power=True): see finish_power
    deferred_power: list[tuple[dict[str, dict[str, bytes]], list[str], tuple[str, str]]] = field(default_factory=list)

    def finish_power(self) -> None:
        """Read the power logs that ``copy_package(defer_power=True)`` left unread because the copy leaves them out
        whatever they hold (:func:`power_copy.withheld_by_names`): power_logs, power_withheld and the warnings of each
        benchmark as ``copy_package`` gives them, each benchmark's power warnings after its others."""
        for logs, files, key in self.deferred_power:
            power_copy.copy_power(logs, files, key, self, _known())
        self.deferred_power = []

    def folder(self, key: tuple[str, str]) -> Path:
        """Where the result files of ``(system, benchmark)`` are in the private copy."""
        if key[0] in self.unusable_systems:
            return self.root.parent / "unchecked" / key[0] / key[1]
        return self.root / "results" / key[0] / key[1]

    def relative(self, text: str) -> str:
        """``text`` with paths inside the private copy written relative to the package."""
        return text.replace(str(self.root) + "/", "")


# --- reading the package without following a link ------------------------------------------------
class _Reader:
    """Reads folders and files of the package by descriptor (``O_NOFOLLOW``), counting entries and bytes."""

    def __init__(self) -> None:
        self.entries = 0
        self.bytes = 0

    def listing(self, fd: int, rel: Path, *, read: Callable[[str], bool] = lambda name: True) -> list[tuple[str, int]]:
        """(name, st_mode) of each entry of the folder ``fd`` that ``read`` selects, sorted; such an entry that is
        a link refuses the package."""
        out = []
        with os.scandir(fd) as it:
            for entry in it:
                self.entries += 1
                if self.entries > MAX_ENTRIES:
                    raise ResultsError(
                        f"refused: the package holds more than {MAX_ENTRIES} entries where the official tools read "
                        f"(at {gate.printable(str(rel))}); a package holds systems/ and results/<system>/<benchmark>/"
                    )
                if not read(entry.name):
                    continue
                mode = os.stat(entry.name, dir_fd=fd, follow_symlinks=False).st_mode
                if stat.S_ISLNK(mode):
                    raise link_refusal(rel / entry.name, os.readlink(entry.name, dir_fd=fd))
                out.append((entry.name, mode))
        return sorted(out)

    def open_folder(self, name: str, parent: int, rel: Path) -> int:
        try:
            return os.open(name, _FOLDER, dir_fd=parent)
        except OSError as e:  # replaced by a link (ELOOP) or a file while it was read
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                raise link_refusal(rel, "?") from None
            raise ResultsError(f"cannot read {gate.printable(str(rel))} in the package: {e.strerror}") from None

    def read(self, name: str, parent: int, limit: int, rel: Path) -> bytes:
        """The file's bytes (ValueError with the reason when it is over ``limit``)."""
        try:
            data = limits.read_capped(Path(name), limit, dir_fd=parent)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise link_refusal(rel, "?") from None
            raise ResultsError(f"cannot read {gate.printable(str(rel))} in the package: {e.strerror}") from None
        self.bytes += len(data)
        if self.bytes > limits.MAX_PACKAGE_BYTES:
            raise ResultsError(
                f"refused: the system descriptions and result files of the package add up to more than "
                f"{limits.MAX_PACKAGE_BYTES // 2**20} MiB (at {gate.printable(str(rel))}); MLPerf packages are far "
                "smaller: remove what is not a result of a run"
            )
        return data


def _name(name: str) -> str:
    return gate.shown(name) if gate.name_problem(name) else name


# --- the copy ------------------------------------------------------------------------------------------
def copy_package(src: Path, dest: Path, *, defer_power: bool = False) -> Layout:
    """Copy what the official tools read from the package ``src`` into ``dest`` (see the module docstring).
    ``defer_power``: the power logs that the copy leaves out whatever they hold are read by ``finish_power`` (a
    review reads them while the official tools run on the copy)."""
    org = src.name
    if problem := gate.name_problem(org, file_name=True):
        raise ResultsError(
            f"refused: the package folder's name {gate.shown(org)} {problem}; it is the submitter's name "
            "(<org>): rename the folder"
        )
    reader = _Reader()
    layout = Layout(root=dest, deferring=defer_power)
    dest.mkdir(parents=True)
    root = os.open(src, _FOLDER)
    try:
        top = dict(reader.listing(root, Path(), read=lambda name: name in ("systems", "results")))
        if "results" not in top or not stat.S_ISDIR(top["results"]):
            raise ResultsError(f"{org} is not a submission package (no results/ folder): {_NOT_A_PACKAGE}")
        descriptions: dict[str, tuple[list[str], dict[str, Any] | None]] = {}
        if "systems" in top and stat.S_ISDIR(top["systems"]):
            descriptions = _copy_systems(reader, root, dest / "systems", layout, org)
        results = reader.open_folder("results", root, Path("results"))
        try:
            systems = [name for name, mode in reader.listing(results, Path("results")) if stat.S_ISDIR(mode)]
            for system in systems:
                _copy_system_results(reader, results, system, descriptions, layout)
        finally:
            os.close(results)
    finally:
        os.close(root)
    for system, (problems, _) in descriptions.items():  # a description without results still counts
        layout.problems += [] if system in systems else problems
    if not layout.benchmarks:
        layout.problems.append(
            f"the package holds no results (results/<system>/<benchmark>/result_<i>.txt): {_NOT_A_PACKAGE}"
        )
    return layout


def _copy_systems(
    reader: _Reader, root: int, dest: Path, layout: Layout, org: str
) -> dict[str, tuple[list[str], dict[str, Any] | None]]:
    """Read every systems/*.json; copy the usable ones. Returns system -> (problems, contents or None)."""
    found: dict[str, tuple[list[str], dict[str, Any] | None]] = {}
    fd = reader.open_folder("systems", root, Path("systems"))
    try:
        for name, mode in reader.listing(fd, Path("systems"), read=lambda name: name.endswith(".json")):
            if not stat.S_ISREG(mode):
                continue
            system = name.removesuffix(".json")
            where = f"systems/{_name(name)}"
            if problem := gate.name_problem(system, file_name=True):
                layout.problems.append(f"{where}: the system name {problem}; left out of the check")
                continue
            try:
                data = reader.read(name, fd, limits.MAX_SYSTEM_BYTES, Path("systems") / name)
            except ValueError as e:
                found[system] = ([f"{where} {e}; left out of the check (a system description is a few KiB)"], None)
                continue
            found[system] = _system_problems(data, system, org, layout.system_warnings.setdefault(system, []))
            if found[system][1] is not None:
                dest.mkdir(parents=True, exist_ok=True)
                (dest / name).write_bytes(data)
    finally:
        os.close(fd)
    return found


def _system_problems(
    data: bytes, system: str, org: str, warnings: list[str] | None = None
) -> tuple[list[str], dict[str, Any] | None]:
    """(problems, contents); contents is None when the official tools must not see the description. What the
    official system_desc_checker accepts but trainperf would write otherwise goes to ``warnings``.

    Only the fields the tools put in a path or a link (:data:`trainperf.rules.gate.SYSTEM_NAME_FIELDS`) must be
    strings; the official checker asks the other required fields to be present, whatever their JSON type
    (MLCommons published descriptions with ``number_of_nodes`` 1.0 and ``other_software_stack`` an object), and
    every string in them is screened for control characters by :func:`trainperf.rules.gate.screen_system`.
    """
    warnings = [] if warnings is None else warnings
    where = f"systems/{system}.json"
    try:
        contents = limits.loads(data.decode("utf-8"))  # within the limits: nesting, number length
    except (UnicodeDecodeError, ValueError) as e:
        return [f"{where} is not valid JSON ({gate.printable(str(e))}); the official tools cannot read it"], None
    if not isinstance(contents, dict):
        return [f"{where} must be a JSON object of field -> string"], None
    missing = [f for f in REQUIRED_FIELDS if f not in contents]
    if missing:
        return [f"{where} lacks the field(s) {', '.join(missing)} (required by system_desc_checker)"], None
    problems = [
        f"{where}: field {f!r} must be a string, not {type(contents[f]).__name__} (the official tools build paths "
        "and links from it)"
        for f in gate.SYSTEM_NAME_FIELDS
        if not isinstance(contents.get(f), str)
    ]
    if problems:
        return problems, None
    refused = gate.screen_system(contents)
    if refused:
        return [f"{where}: {r}; the official tools are not run on this system" for r in refused], None
    warnings += [
        f"{where}: field {f!r} is a JSON {type(contents[f]).__name__}, not a string (the official system_desc_checker "
        "accepts it; `trainperf system` writes strings)"
        for f in REQUIRED_FIELDS
        if not isinstance(contents[f], str)
    ]
    if contents["submitter"] != org:
        warnings.append(
            f"{where} names submitter {contents['submitter']!r}, but the package folder is {org!r} (the official "
            "tools do not compare them)"
        )
    if contents["division"] not in DIVISIONS:  # the tools of every round accept it: MLCommons published 'close'
        warnings.append(
            f"{where}: division {gate.shown(contents['division'])} is not one of {', '.join(DIVISIONS)}; the "
            "official tools accept it and read the system as not closed (no seed or RCP check of theirs): write "
            "'closed' or 'open'"
        )
    return problems, contents


def _control_file(layout: Layout, rel: str, name: str, owner: str | tuple[str, str]) -> None:
    msg = f"{rel} {_CONTROL_FILES[name]}; only the review committee may add it (left out of the check)"
    if isinstance(owner, tuple):
        layout.problems_of.setdefault(owner, []).append(msg)
    else:
        layout.system_problems.setdefault(owner, []).append(msg)


def _copy_system_results(
    reader: _Reader,
    results: int,
    system: str,
    descriptions: dict[str, tuple[list[str], dict[str, Any] | None]],
    layout: Layout,
) -> None:
    rel = Path("results") / system
    if problem := gate.name_problem(system, file_name=True):
        layout.problems.append(f"results/{_name(system)}: the system folder's name {problem}; left out of the check")
        return
    missing = f"systems/{system}.json is missing: results/{system} needs its system description (`trainperf system -o`)"
    problems, contents = descriptions.get(system, ([missing], None))
    layout.system_problems[system] = list(problems)
    if contents is None:  # the official tools crash on it: trainperf's own checks only
        layout.unusable_systems.add(system)
    else:
        layout.divisions[system] = contents["division"]
        layout.descriptions[system] = contents
    fd = reader.open_folder(system, results, rel)
    try:
        for name, mode in reader.listing(fd, rel):
            if name == "package_checker_params" and stat.S_ISREG(mode):
                _control_file(layout, f"results/{system}/{name}", name, system)
            elif stat.S_ISDIR(mode):
                _copy_benchmark(reader, fd, system, name, layout)
    finally:
        os.close(fd)


MAX_SCALING_FACTOR = 10.0  # MLPerf v2.0's review committee published factors of about 1.0 to 1.1


def _scaling(reader: _Reader, fd: int, rel: Path, where: str, key: tuple[str, str], layout: Layout) -> None:
    """A published ``scaling.json``: the review committee's factor on the score, read as a JSON number only.

    The committee's factor is a penalty (MLPerf v2.0: Google's ssd on cloud-tpu-v4-4096-TF, 1.023): at least 1,
    so it can only lengthen the time. A factor below 1, which would shorten it, is what a package could add to
    buy a score, and is refused. The file is kept out of the copy the official tools read either way, so the
    summarizer's score stays raw; the review shows the raw score and the scaled one apart.
    """
    try:
        data = limits.loads(reader.read(rel.name, fd, limits.MAX_SYSTEM_BYTES, rel).decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        data = {"scaling_factor": f"unreadable ({gate.printable(str(e))})"}
    factor = data.get("scaling_factor") if isinstance(data, dict) else None
    if not (isinstance(factor, (int, float)) and not isinstance(factor, bool) and 1 <= factor <= MAX_SCALING_FACTOR):
        layout.problems_of.setdefault(key, []).append(
            f"{where} {_CONTROL_FILES['scaling.json']} by {gate.shown(factor)}; only the review committee's "
            f"penalty (a number from 1 to {MAX_SCALING_FACTOR:g}) is accepted: a factor below 1 would shorten the "
            "time (left out of the check)"
        )
        return
    layout.scaling[key] = float(factor)
    layout.warnings_of.setdefault(key, []).append(
        f"{where}: the review committee's scaling factor {factor:g} applies to the published score (shown apart "
        "from the raw one; the summarizer is run without it)"
    )


def _known() -> frozenset[str]:
    """The benchmark names a package may hold: trainperf's and those of every round the official tools support (the
    package's own round, found after the copy, then decides; each name is that of a rule file the tools ship)."""
    return frozenset(BENCHMARKS) | rulesets.all_benchmarks()


def _copy_benchmark(reader: _Reader, system_fd: int, system: str, benchmark: str, layout: Layout) -> None:
    rel = Path("results") / system / benchmark
    if benchmark not in _known():
        layout.problems.append(
            f"results/{system}/{_name(benchmark)}: {benchmark!r} is not an MLPerf Training benchmark of any round "
            f"from {rulesets.round_name(rulesets.supported()[0])} on (v{MLPERF_RULESET}: {', '.join(BENCHMARKS)}); "
            "left out of the check"
        )
        return
    key = (system, benchmark)
    files: list[str] = []
    dest = layout.folder(key)
    fd = reader.open_folder(benchmark, system_fd, rel)
    logs: dict[str, dict[str, bytes]] | None = None
    try:
        for name, mode in reader.listing(fd, rel):
            where = f"results/{system}/{benchmark}/{_name(name)}"
            if name == power.FOLDER and stat.S_ISDIR(mode):
                logs = power_copy.read_power(reader, fd, rel / name, key, layout)
                continue
            if name == "scaling.json" and stat.S_ISREG(mode):
                _scaling(reader, fd, rel / name, where, key, layout)
                continue
            if name in _CONTROL_FILES and stat.S_ISREG(mode):
                _control_file(layout, where, name, key)
                continue
            if not (fnmatch.fnmatchcase(name, RESULT_GLOB) and stat.S_ISREG(mode)):
                layout.warnings_of.setdefault(key, []).append(
                    f"{where} is not a result file; a result folder holds result_<i>.txt files only (left out)"
                )
                continue
            if problem := gate.name_problem(name):
                layout.refused.setdefault(key, {})[name] = [f"its name {problem}"]
                continue
            try:
                data = reader.read(name, fd, limits.MAX_RESULT_BYTES, rel / name)
            except ValueError as e:
                layout.refused.setdefault(key, {})[name] = [f"the file {e}; it is not read"]
                continue
            refusals = gate.screen_log(data, known=_known())
            if refusals:
                layout.refused.setdefault(key, {})[name] = refusals
                continue
            dest.mkdir(parents=True, exist_ok=True)
            (dest / name).write_bytes(data)
            files.append(name)
    finally:
        os.close(fd)
    layout.benchmarks[key] = files
    if logs is not None and layout.deferring and power_copy.withheld_by_names(logs, files):
        layout.deferred_power.append((logs, files, key))  # not copied whatever they hold: read in finish_power
    elif logs is not None:
        power_copy.copy_power(logs, files, key, layout, _known())
    if not files and not layout.refused.get(key):
        layout.problems_of.setdefault(key, []).append(f"results/{system}/{benchmark} holds no result files")
