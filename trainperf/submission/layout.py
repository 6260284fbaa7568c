"""The layout of an untrusted submission package: finding it, copying it safely, and surveying the copy.

``copy_package`` copies the package into a private folder and refuses, naming the path, any entry that
could make a reader leave the package: a link with an absolute target, with ``..`` components, or whose
target lies outside; a linked folder; anything that is not a plain file or folder; a name with control
characters. ``survey`` then reads the copy's layout as data (JSON and folder names only), records what
is wrong in words that name the file, and removes from the copy what would crash the official tools
(a result folder without a usable system description, a folder that is not a v2.0 benchmark) or sway
them (``scaling.json``, which scales the summarizer's score, and ``package_checker_params``, which
bypasses its seed and RCP checks: both are for the review committee, not for a package to carry).
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from trainperf.errors import ResultsError
from trainperf.registry import BENCHMARKS
from trainperf.spec import MLPERF_RULESET
from trainperf.system import DIVISIONS, REQUIRED_FIELDS

RESULT_GLOB = "result_*.txt"  # what the official tools read
_MAX_DEPTH = 24  # an MLCommons package is 5 deep; code trees a little deeper
_CONTROL_FILES = {
    "scaling.json": "scales the result_summarizer's score",
    "package_checker_params": "bypasses the official seed or RCP checks",
}
_NOT_A_PACKAGE = (
    "a package is <org>/systems/<system>.json, <org>/results/<system>/<benchmark>/result_<i>.txt and "
    "<org>/benchmarks; build one with `trainperf package`"
)


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


def _refuse(rel: Path, why: str) -> ResultsError:
    return ResultsError(
        f"refused: {rel} {why}. A package must hold its own files: nothing outside it is read, so fix or "
        "remove that entry and review again"
    )


def copy_package(src: Path, dest: Path) -> None:
    """Copy the package ``src`` to ``dest`` as plain files; refuse entries that could lead outside it."""
    root = src.resolve()

    def visit(folder: Path, target: Path, depth: int = 0) -> None:
        if depth > _MAX_DEPTH:
            raise _refuse(folder.relative_to(src), f"is nested more than {_MAX_DEPTH} folders deep")
        target.mkdir(parents=True)
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            rel = Path(entry.path).relative_to(src)
            if not entry.name.isprintable():
                raise _refuse(rel, "has control characters in its name")
            if entry.is_symlink():
                link = os.readlink(entry.path)
                if os.path.isabs(link):
                    raise _refuse(rel, f"is a link to the absolute path {link!r}")
                if ".." in Path(link).parts:
                    raise _refuse(rel, f"is a link to {link!r}, a path with '..' components")
                real = Path(entry.path).resolve()
                if not real.is_relative_to(root):
                    raise _refuse(rel, f"is a link to {link!r}, which points outside the package")
                if real.is_dir():
                    raise _refuse(rel, f"is a link to the folder {link!r}; a package holds plain folders")
                if not real.is_file():
                    raise _refuse(rel, f"is a link to {link!r}, which is not a file")
                shutil.copyfile(real, target / entry.name)
            elif entry.is_dir(follow_symlinks=False):
                visit(Path(entry.path), target / entry.name, depth + 1)
            elif entry.is_file(follow_symlinks=False):
                shutil.copyfile(entry.path, target / entry.name)
            else:
                raise _refuse(rel, "is neither a file nor a folder")

    visit(src, dest)


@dataclass(kw_only=True)
class Layout:
    root: Path  # the private copy
    benchmarks: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # (system, benchmark) -> files
    problems: list[str] = field(default_factory=list)  # about the package as a whole
    system_problems: dict[str, list[str]] = field(default_factory=dict)
    problems_of: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    warnings_of: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    unusable_systems: set[str] = field(default_factory=set)  # no usable system description: not checked
    divisions: dict[str, str] = field(default_factory=dict)  # system -> division of its description

    def folder(self, key: tuple[str, str]) -> Path:
        """Where the result files of ``(system, benchmark)`` are in the private copy."""
        if key[0] in self.unusable_systems:
            return self.root.parent / "unchecked" / key[0] / key[1]
        return self.root / "results" / key[0] / key[1]

    def relative(self, text: str) -> str:
        """``text`` with paths inside the private copy written relative to the package."""
        return text.replace(str(self.root) + "/", "")


def _system_problems(desc: Path, system: str, org: str) -> tuple[list[str], dict | None]:
    where = f"systems/{system}.json"
    if not desc.is_file():
        return [f"{where} is missing: results/{system} needs its system description (`trainperf system -o`)"], None
    try:
        contents = json.loads(desc.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        return [f"{where} is not valid JSON ({e}); the official tools cannot read it"], None
    if not isinstance(contents, dict):
        return [f"{where} must be a JSON object of field -> string"], None
    missing = [f for f in REQUIRED_FIELDS if f not in contents]
    if missing:
        return [f"{where} lacks the field(s) {', '.join(missing)} (required by system_desc_checker)"], None
    problems = [
        f"{where}: field {f!r} must be a string, not {type(contents[f]).__name__}"
        for f in REQUIRED_FIELDS
        if not isinstance(contents[f], str)
    ]
    if problems:
        return problems, None
    if contents["submitter"] != org:
        problems.append(f"{where} names submitter {contents['submitter']!r}, but the package is org {org!r}")
    if contents["division"] not in DIVISIONS:
        problems.append(f"{where}: division {contents['division']!r} is not one of {', '.join(DIVISIONS)}")
    return problems, contents


def _control_file(layout: Layout, path: Path, owner: str | tuple[str, str]) -> None:
    rel = path.relative_to(layout.root)
    msg = f"{rel} {_CONTROL_FILES[path.name]}; only the review committee may add it (left out of the check)"
    if isinstance(owner, tuple):
        layout.problems_of.setdefault(owner, []).append(msg)
    else:
        layout.system_problems.setdefault(owner, []).append(msg)
    path.unlink()


def survey(root: Path, org: str) -> Layout:
    """Read the private copy's layout; record problems and remove what the official tools must not see."""
    layout = Layout(root=root)
    results = root / "results"
    if not results.is_dir():
        raise ResultsError(f"{root.name} is not a submission package (no results/ folder): {_NOT_A_PACKAGE}")
    for system_dir in sorted(p for p in results.iterdir() if p.is_dir()):
        system = system_dir.name
        problems, contents = _system_problems(root / "systems" / f"{system}.json", system, org)
        layout.system_problems[system] = problems
        if contents is None:
            layout.unusable_systems.add(system)
        else:
            layout.divisions[system] = contents["division"]
        if (system_dir / "package_checker_params").is_file():
            _control_file(layout, system_dir / "package_checker_params", system)
        for bench_dir in sorted(p for p in system_dir.iterdir() if p.is_dir()):
            key = (system, bench_dir.name)
            if bench_dir.name not in BENCHMARKS:
                layout.problems.append(
                    f"results/{system}/{bench_dir.name}: {bench_dir.name!r} is not an MLPerf Training "
                    f"v{MLPERF_RULESET} benchmark ({', '.join(BENCHMARKS)}); left out of the check"
                )
                shutil.rmtree(bench_dir)
                continue
            files = []
            for p in sorted(bench_dir.iterdir()):
                if p.name in _CONTROL_FILES and p.is_file():
                    _control_file(layout, p, key)
                elif fnmatch.fnmatchcase(p.name, RESULT_GLOB) and p.is_file():
                    files.append(p.name)
                else:
                    layout.warnings_of.setdefault(key, []).append(
                        f"{p.relative_to(root)} is not a result file; a result folder holds result_<i>.txt files only"
                    )
            layout.benchmarks[key] = files
            if not files:
                layout.problems_of.setdefault(key, []).append(
                    f"results/{system}/{bench_dir.name} holds no result files"
                )
        if system in layout.unusable_systems:  # the official tools crash on it: our own checks only
            (root.parent / "unchecked").mkdir(exist_ok=True)
            shutil.move(system_dir, root.parent / "unchecked" / system)
    if not layout.benchmarks:
        layout.problems.append(
            f"the package holds no results (results/<system>/<benchmark>/result_<i>.txt): {_NOT_A_PACKAGE}"
        )
    return layout
