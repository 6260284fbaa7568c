"""Assemble trainperf output folders into an MLCommons Training submission package.

The package is the layout the official ``package_checker`` and ``result_summarizer`` read::

    <out>/<org>/systems/<system>.json                                  (copied)
    <out>/<org>/results/<system>/<benchmark>/result_<i>.txt            (copied byte for byte)
    <out>/<org>/benchmarks/<benchmark>/implementations/trainperf/      (the code and config used)
        README.md      what produced the results, with versions, and how to reproduce and check them
        spec.json      the benchmark's spec at each scale in the package (trainperf.spec.BenchmarkSpec)
        recipe.json    the hyperparameters per system, as the result files log them
        mini_rules_<benchmark>.yaml, rcps_<benchmark>.json   the mini rules and mini RCPs (mini runs)
        trainperf/     the Python source of trainperf that ran the benchmark (other workloads left out)

The package checker itself demands only ``systems/`` and ``results/``: one system description per
``results/<system>`` folder and exactly the rules' number of ``result_*.txt`` files per benchmark
(the count `trainperf list` shows); it reads ``benchmarks/`` only to list source files. MLPerf's submission rules ask
for the code under ``benchmarks/<benchmark>/implementations/<implementation>/``.

Every log's ``submission_org`` must be the package's org. The package is built in a temporary folder
beside it and renamed into place at the end; an existing non-empty ``<out>/<org>`` is never overwritten.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainperf import limits
from trainperf.errors import NotAvailableError, ResultsError, UsageError
from trainperf.registry import BENCHMARKS
from trainperf.results import read_mllog
from trainperf.spec import MLPERF_RULESET
from trainperf.text import shell_command

IMPLEMENTATION = "trainperf"
RESULT_NAME = re.compile(r"^result_(\d+)\.txt$")
_SAFE_ORG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# Logged keys that make up a recipe, besides the spec's own hyperparameter keys.
_RECIPE_KEYS = ("global_batch_size", "gradient_accumulation_steps", "label_smoothing", "train_epochs")
_RECIPE_PREFIXES = ("opt_", "lars_", "lamb_", "sgd_")
_SOURCE_LEFT_OUT = ("history", "report")  # not used to run a benchmark (history holds large data files)


@dataclass(frozen=True, kw_only=True)
class _Runs:
    """One benchmark's result files of one system, from one trainperf output folder."""

    system: str
    benchmark: str
    scale: str
    files: tuple[Path, ...]
    folder: Path
    records: tuple[tuple[dict[str, Any], ...], ...]  # the MLLOG records of each file


def build_package(results: list[Path], out: Path, *, org: str, round_version: str | None = None) -> Path:
    """Assemble the trainperf output folders ``results`` into ``out/<org>/``; return that folder. A package is of
    one MLPerf round (``round_version``, else the round of the benchmarks it holds); a benchmark of another round is
    refused before anything is written."""
    if not _SAFE_ORG.match(org or "") or org in (".", ".."):
        raise UsageError(
            f"organization name {org!r} is not a safe folder name: use letters, digits, '.', '_' and '-' "
            "(it becomes the package's top folder and every log's submission_org)"
        )
    if not results:
        raise UsageError("give at least one trainperf output folder (the --out folder of `trainperf run`)")
    systems, runs = _collect([Path(p) for p in results], org)
    _check_round({r.benchmark for r in runs}, round_version)
    out = Path(out)
    dest = out / org
    if dest.is_symlink() or (dest.exists() and (not dest.is_dir() or any(dest.iterdir()))):
        raise ResultsError(
            f"{dest} already exists and is not empty: trainperf never overwrites a package. Remove it, "
            "or choose another -o"
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{org}.", suffix=".partial", dir=out))
    except OSError as e:
        raise ResultsError(f"cannot write the package under {out} ({e.strerror}); choose another -o") from None
    try:
        _write_package(tmp, systems, runs, org)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp made it private
        if dest.exists():
            dest.rmdir()  # empty, checked above
        os.replace(tmp, dest)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError):
            raise ResultsError(f"cannot write the package {dest}: {e.strerror or e}") from None
        raise
    return dest


def _check_round(benchmarks: set[str], round_version: str | None) -> None:
    """Every benchmark of the package is of one round (the one given, if any): MLCommons publishes a round's
    packages together, judged by that round's rules."""
    from trainperf import rounds

    found = {key: rounds.of_benchmark(key) for key in sorted(benchmarks)}
    wanted = rounds.get(round_version) if round_version is not None else None
    versions = {r.version for r in found.values() if r is not None}
    if wanted is not None:
        others = [f"{k} (round {r.version})" for k, r in found.items() if r is not None and r is not wanted]
        if others:
            raise UsageError(
                f"--round {wanted.version}: the results hold {', '.join(others)}; package each round's results "
                "separately"
            )
    elif len(versions) > 1:
        held = ", ".join(f"{k} ({r.version})" for k, r in found.items() if r is not None)
        raise UsageError(
            f"the results hold benchmarks of several rounds ({held}); a package is of one round: give the output "
            "folders of one round, or name it with --round"
        )


# --- reading the output folders -------------------------------------------------------------------
def _org_error(where: Path, found: Any, org: str) -> ResultsError:
    return ResultsError(
        f"{where}: submission_org is {found!r}, but the package is for org {org!r}. If the runs are "
        f"yours under that name, pass --org {shell_command(found)}; otherwise re-run the benchmarks with "
        f"`trainperf run ... --org {shell_command(org)}`"
    )


def _first(records: Iterable[dict[str, Any]], key: str) -> dict[str, Any] | None:
    return next((r for r in records if r.get("key") == key), None)


def _value(records: Iterable[dict[str, Any]], key: str, default: Any = None) -> Any:
    rec = _first(records, key)
    return rec.get("value", default) if rec else default


def _collect(folders: list[Path], org: str) -> tuple[dict[str, Path], list[_Runs]]:
    systems: dict[str, Path] = {}
    runs: dict[tuple[str, str], _Runs] = {}
    for folder in folders:
        if not (folder / "results").is_dir():
            raise ResultsError(
                f"{folder} is not a trainperf output folder (it has no results/ folder): give the --out "
                "folder of `trainperf run`"
            )
        for system_dir in sorted(p for p in (folder / "results").iterdir() if p.is_dir()):
            system = system_dir.name
            found = [
                _read_runs(bench_dir, system, org, folder)
                for bench_dir in sorted(p for p in system_dir.iterdir() if p.is_dir())
            ]
            found = [r for r in found if r is not None]
            if not found:
                continue
            _check_system_folder(system_dir)
            desc = folder / "systems" / f"{system}.json"
            _check_system(desc, system, org)
            if system in systems and systems[system].read_bytes() != desc.read_bytes():
                raise ResultsError(
                    f"{systems[system]} and {desc} describe system {system!r} differently: results of two "
                    "machines under one system name cannot share a package; re-run one with --system-name"
                )
            systems[system] = desc
            for r in found:
                if (system, r.benchmark) in runs:
                    raise ResultsError(
                        f"both {runs[(system, r.benchmark)].folder} and {folder} hold {r.benchmark} results of "
                        f"system {system!r}: a package holds one set of runs per system and benchmark; "
                        "package them separately or move one set away"
                    )
                runs[(system, r.benchmark)] = r
    if not runs:
        raise ResultsError(
            "no result files (results/<system>/<benchmark>/result_<i>.txt) in "
            + ", ".join(str(f) for f in folders)
            + ": run the benchmarks first with `trainperf run`"
        )
    return systems, [runs[k] for k in sorted(runs)]


def _check_system_folder(system_dir: Path) -> None:
    """A system folder's name becomes file names and the commands of the package's README: the plain names
    `trainperf run --system-name` allows, nothing a shell or a terminal would read as more than a name."""
    from trainperf.system import check_system_name

    try:
        check_system_name(system_dir.name)
    except UsageError:
        raise ResultsError(
            f"{ascii(str(system_dir))}: the system folder's name {ascii(system_dir.name)} is not a plain name "
            "(letters, digits, '-', '_' and '.'), which trainperf run never writes: rename it, and the "
            "submission_platform of its logs, or run again with --system-name"
        ) from None


def _check_system(desc: Path, system: str, org: str) -> None:
    if not desc.is_file():
        command = shlex.join(["trainperf", "system", "--org", org, "--system-name", system, "-o", str(desc)])
        raise ResultsError(
            f"{desc} is missing: results/{system} needs its system description. Write it with "
            f"`{command}` on that machine"
        )
    try:
        contents = limits.read_json(desc, limits.MAX_SYSTEM_BYTES)
    except (OSError, ValueError) as e:  # limits.OverLimit is a ValueError
        raise ResultsError(f"{desc} is not a readable JSON system description ({e}); write it again") from None
    if not isinstance(contents, dict):
        raise ResultsError(f"{desc}: a system description is a JSON object of field -> string")
    if contents.get("submitter") != org:
        raise _org_error(desc, contents.get("submitter"), org)


def _read_runs(bench_dir: Path, system: str, org: str, folder: Path) -> _Runs | None:
    numbered = []
    for p in bench_dir.iterdir():
        if (m := RESULT_NAME.match(p.name)) and p.is_file():
            numbered.append((int(m[1]), p))
    if not numbered:
        return None
    benchmark = bench_dir.name
    if benchmark not in BENCHMARKS:
        raise ResultsError(
            f"{bench_dir}: {benchmark!r} is not an MLPerf Training v{MLPERF_RULESET} benchmark "
            f"({', '.join(BENCHMARKS)})"
        )
    files = tuple(p for _, p in sorted(numbered))
    records = tuple(tuple(read_mllog(f)) for f in files)
    scales = set()
    for f, recs in zip(files, records, strict=True):
        if not recs:
            raise ResultsError(f"{f} has no MLLOG lines: it is not a trainperf result file; move it away")
        if (found := _value(recs, "submission_org")) != org:
            raise _org_error(f, found, org)
        if (found := _value(recs, "submission_platform")) != system:
            raise ResultsError(f"{f} was made on system {found!r}, not {system!r}: move it to results/{found}")
        if (found := _value(recs, "submission_benchmark")) != benchmark:
            raise ResultsError(f"{f} is a {found!r} run, not {benchmark!r}: it is in the wrong folder")
        if _first(recs, "run_stop") is None:
            raise ResultsError(f"{f} is not a complete run (no run_stop line): delete it and run again")
        scales.add(_value(recs, "trainperf_scale", "reference"))
    if len(scales) > 1:
        raise ResultsError(f"{bench_dir} mixes scales ({', '.join(sorted(scales))}): keep one scale per folder")
    return _Runs(system=system, benchmark=benchmark, scale=scales.pop(), files=files, folder=folder, records=records)


# --- writing ----------------------------------------------------------------------------------------
def _mlperf_division(system: str, runs: list[_Runs]) -> str | None:
    """The MLPerf division that the logs of ``system`` declare (mini logs always declare 'open')."""
    found = {str(_value(recs, "submission_division")) for r in runs if r.system == system for recs in r.records}
    if len(found) > 1:
        raise ResultsError(
            f"the runs of system {system!r} declare MLPerf divisions {', '.join(sorted(found))}: MLCommons "
            "describes a system once per division; re-run one set with another --system-name"
        )
    return found.pop() if found else None


def _write_package(root: Path, systems: dict[str, Path], runs: list[_Runs], org: str) -> None:
    (root / "systems").mkdir(parents=True, exist_ok=True)
    for system, desc in systems.items():
        # The official tools take the division from the system description (a 'closed' one makes them
        # apply the reference RCPs), so it must be the MLPerf division the logs declare. `trainperf run
        # --division closed` at the mini scale writes trainperf's own division there; the logs say 'open'.
        contents = json.loads(desc.read_text(encoding="utf-8"))
        division = _mlperf_division(system, runs)
        if division is not None and contents.get("division") != division:
            contents["division"] = division
            _write_json(root / "systems" / f"{system}.json", contents)
        else:
            shutil.copyfile(desc, root / "systems" / f"{system}.json")
    for r in runs:
        target = root / "results" / r.system / r.benchmark
        target.mkdir(parents=True, exist_ok=True)
        for f in r.files:
            shutil.copyfile(f, target / f.name)
    for benchmark in sorted({r.benchmark for r in runs}):
        impl = root / "benchmarks" / benchmark / "implementations" / IMPLEMENTATION
        _write_implementation(impl, benchmark, [r for r in runs if r.benchmark == benchmark], org)


def _recipe(r: _Runs, spec: Any) -> dict[str, Any]:
    keys = set(getattr(spec, "hparam_keys", ())) | set(_RECIPE_KEYS)
    per_run = []
    for recs in r.records:
        per_run.append(
            {
                rec["key"]: rec.get("value")
                for rec in recs
                if rec.get("key") in keys or str(rec.get("key", "")).startswith(_RECIPE_PREFIXES)
            }
        )
    common = {k: v for k, v in per_run[0].items() if all(p.get(k, object()) == v for p in per_run)}
    doc: dict[str, Any] = {"scale": r.scale, "hyperparameters": dict(sorted(common.items()))}
    differ = {f.name: {k: v for k, v in p.items() if k not in common} for f, p in zip(r.files, per_run, strict=True)}
    if any(differ.values()):
        doc["per_run"] = differ
    return doc


def _spec(benchmark: str, scale: str) -> Any:
    from trainperf import registry

    try:
        return registry.get_spec(benchmark, scale)
    except (NotAvailableError, UsageError):
        return None


def _write_implementation(impl: Path, benchmark: str, runs: list[_Runs], org: str) -> None:
    from trainperf.rules import mini_rules

    impl.mkdir(parents=True, exist_ok=True)
    specs = {scale: _spec(benchmark, scale) for scale in sorted({r.scale for r in runs})}
    _write_json(impl / "spec.json", {s: dataclasses.asdict(sp) for s, sp in specs.items() if sp is not None})
    _write_json(impl / "recipe.json", {r.system: _recipe(r, specs[r.scale]) for r in runs})
    extra = []
    if "mini" in specs:
        for src, name in (
            (mini_rules.shipped_rule_path(benchmark), f"mini_rules_{benchmark}.yaml"),
            (mini_rcp_path(benchmark), f"rcps_{benchmark}.json"),
        ):
            if src.is_file():
                shutil.copyfile(src, impl / name)
                extra.append(name)
    _copy_source(impl / "trainperf", benchmark)
    (impl / "README.md").write_text(_readme(benchmark, runs, specs, extra, org), encoding="utf-8")


def mini_rcp_path(benchmark: str) -> Path:
    """trainperf's RCP table of a benchmark at the mini scale (official rcp_checker JSON format)."""
    return Path(__file__).resolve().parent.parent / "rules" / "rcps" / "mini" / f"rcps_{benchmark}.json"


def _write_json(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=2, default=list) + "\n", encoding="utf-8")


def _copy_source(dest: Path, benchmark: str) -> None:
    """trainperf's Python files that run ``benchmark``: everything but other workloads, history and report."""
    import trainperf

    root = Path(trainperf.__file__).resolve().parent
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        parts = rel.parts
        if "__pycache__" in parts or parts[0] in _SOURCE_LEFT_OUT or not path.is_file():
            continue
        if parts[0] == "workloads" and len(parts) > 2 and parts[1] not in ("common", benchmark):
            continue
        wanted = path.suffix == ".py" or rel == Path("workloads", benchmark, "README.md")
        if wanted:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest / rel)


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _division(records: Iterable[dict[str, Any]]) -> str:
    """trainperf's division of a run (its recipe rules), else the MLPerf division it declares."""
    return str(_value(records, "trainperf_division") or _value(records, "submission_division"))


def _readme(benchmark: str, runs: list[_Runs], specs: dict[str, Any], extra: list[str], org: str) -> str:
    import trainperf

    installed = _version("trainperf") if _version("trainperf") != "not installed" else trainperf.__version__
    rows, logged_versions = [], set()
    for r in runs:
        versions = sorted({str(_value(recs, "trainperf_version", "unknown")) for recs in r.records})
        divisions = sorted({str(_division(recs)) for recs in r.records})
        logged_versions.update(versions)
        rows.append(f"| {r.system} | {r.scale} | {len(r.files)} | {', '.join(divisions)} | {', '.join(versions)} |")
    lines = [
        f"# {benchmark}: the trainperf implementation",
        "",
        f"The results of {benchmark} in this package (organization `{org}`) were produced by trainperf, an open",
        "time-to-train suite built the way MLPerf Training v2.0 is built. Each result file is the MLLOG log of one",
        "timed run; its minutes are `run_stop - run_start`; the runs are combined by olympic scoring.",
        "",
        "| system | scale | runs | division (trainperf) | trainperf version in the logs |",
        "| --- | --- | --- | --- | --- |",
        *rows,
        "",
        "## Files",
        "",
        "- `spec.json`: the benchmark's spec at each scale above (model, dataset, metric, quality target, runs,",
        "  evaluation cadence, budget): `trainperf.spec.BenchmarkSpec`.",
        "- `recipe.json`: the hyperparameters of each system's runs, read from the result files' MLLOG keys.",
    ]
    if f"mini_rules_{benchmark}.yaml" in extra:
        lines.append(
            f"- `mini_rules_{benchmark}.yaml`: the mini-scale compliance rules (the official checker's rule language; "
            "it runs the official `training_2.0.0/common.yaml` too)."
        )
    if f"rcps_{benchmark}.json" in extra:
        lines.append(
            f"- `rcps_{benchmark}.json`: trainperf's reference convergence points for the mini scale "
            "(the official rcp_checker's `--custom_rcps` format)."
        )
    lines += [
        f"- `trainperf/`: the Python source of trainperf {installed} that builds, trains and times the benchmark",
        "  (the other workloads, the report and the history modules are left out).",
        "",
        "## Versions",
        "",
        f"- trainperf {installed} (this source copy); the logs name trainperf {', '.join(sorted(logged_versions))}.",
        f"- mlperf-logging {_version('mlperf-logging')}, torch {_version('torch')}, "
        f"torchvision {_version('torchvision')} (where the package was assembled; the software each run used is in",
        "  `systems/<system>.json`, field `other_software_stack`).",
    ]
    if logged_versions - {installed}:
        lines.append(
            f"- Note: the logs were made with trainperf {', '.join(sorted(logged_versions - {installed}))}, "
            f"not the version copied here ({installed})."
        )
    scale = runs[0].scale
    division = _division(runs[0].records[0])
    lines += [
        "",
        "## Reproduce and check",
        "",
        "```",
        # every word quoted for a shell (shlex): the names come from the logs and folders packaged
        shlex.join(["trainperf", "data", "prepare", benchmark])
        if scale == "mini"
        else f"# provide the {benchmark} dataset",
        shlex.join(
            ["trainperf", "run", benchmark, "--scale", str(scale), "--division", str(division), "--runs",
             str(len(runs[0].files)), "--org", org, "--system-name", runs[0].system, "--out", f"results-{benchmark}"]
        ),  # fmt: skip
        shlex.join(["trainperf", "package", f"results-{benchmark}", "-o", "package", "--org", org]),
        shlex.join(["trainperf", "review", f"package/{org}"]),
        shlex.join(["python", "-m", "mlperf_logging.package_checker", f"package/{org}", "training", MLPERF_RULESET]),
        "```",
        "",
    ]
    return "\n".join(lines)
