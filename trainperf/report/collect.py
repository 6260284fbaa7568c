"""Collect results for a report: every system's runs per benchmark, read back from MLLOG result files.

A path is a trainperf output folder (``trainperf run --out``) or an MLCommons submission folder
``<org>/`` (or a folder holding several of either): both have ``results/<system>/<benchmark>/result_<i>.txt``
and ``systems/<system>.json``. Result files are only read, never executed or evaluated; a file whose
timing is impossible (see :func:`trainperf.run_checks.timing_problems`) is refused. A run counts as a
success only when ``run_stop`` says so *and* one of its logged evaluations reaches the spec's target
(the log's status is not trusted alone). Each benchmark is scored with
:func:`trainperf.scoring.score_results` under the spec the registry gives for its scale, the runs
ordered by their ``run_start`` times.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from trainperf import distinct, limits, registry
from trainperf.errors import ResultsError, TrainperfError
from trainperf.fileio import refuse_link
from trainperf.report.energy import ENERGY_KEY, by_round_formula, read_energy, summary_json_energy
from trainperf.results import INTERRUPTED, interrupted_logs, parse_run
from trainperf.rules import rulesets
from trainperf.run_checks import RECORD_FIX, impossible_quality, logged_ms
from trainperf.scoring import Score, score_results
from trainperf.spec import SCALES, BenchmarkSpec
from trainperf.submission import power
from trainperf.text import shell_command
from trainperf.timeline import first_past_budget, own_progress

# result_<i>.txt, or result_<id>_<i>.txt as some published packages name them (the official package checker takes
# every result_*.txt; HazyResearch's v2.0 results are result_220520100725096152634_1.txt ... _10.txt)
_RESULT_FILE = re.compile(r"^result_(?:[A-Za-z0-9][A-Za-z0-9_-]{0,63}_)?(\d{1,9})\.txt$")
FALLBACK_RUNS = (5, 1)  # an unknown benchmark key: 5 runs, drop 1


@dataclass(frozen=True, kw_only=True)
class RunResult:
    index: int  # i of result_<i>.txt
    path: Path
    seed: int | None
    status: str
    minutes: float
    curve: list[tuple[float, float, float]]  # (minutes since run_start, progress as logged in epoch_num, quality)
    energy_joules: float | None = None
    energy_note: str = "not measured"
    power_window: tuple[float | None, float | None] = (None, None)  # first run_start, run_stop: a power log's window
    start_ms: int | None = None  # run_start's time_ms: the order of the runs for scoring
    evaluations: tuple[Any, ...] = ()  # the eval_accuracy values as logged (numbers, or objects of fields)
    evaluation_lines: tuple[int, ...] = ()  # the line of each evaluation in the result file
    reached_target: bool | None = None  # whether an evaluation reaches the spec's target; None: target unknown
    progress: tuple[Any, ...] = ()  # the epoch_num of each evaluation of trainperf's own log (timeline.own_progress)
    fingerprints: tuple[Any, ...] = ()  # its timeline and evaluation curve, for the distinct-runs rule
    note: str = ""  # why the run is counted differently from its logged status; "" otherwise
    own_log: bool = False  # written by trainperf (it logs trainperf_* keys)

    @property
    def success(self) -> bool:
        """Logged as a success, and (when the target is known) an evaluation reaches the target."""
        return self.status == "success" and self.reached_target is not False

    @property
    def counted_status(self) -> str:
        return self.status if self.success or self.status != "success" else "failed (target not reached)"


@dataclass(frozen=True, kw_only=True)
class BenchmarkResults:
    benchmark: str
    scale: str
    runs: list[RunResult]
    score: Score
    target: float | None  # None when the registry does not know the benchmark
    target_text: str
    runs_required: int
    runs_dropped: int
    spec_note: str = ""  # "" when the spec came from the registry, else what was assumed
    round: str = ""  # the MLPerf round its logs belong to ("v2.0", "v6.1"); "" where none can be told
    interrupted: list[Path] = field(default_factory=list)  # runs interrupted and kept aside (not results)

    @property
    def run_notes(self) -> list[str]:
        """Why runs are counted differently from their logged status (e.g. success without the target), and
        the runs that were interrupted and kept aside (visible, so a slow run is never silently redone)."""
        notes = [r.note for r in self.runs if r.note]
        if self.interrupted:
            names = ", ".join(p.name for p in self.interrupted[:5]) + (" ..." if len(self.interrupted) > 5 else "")
            notes.append(f"{len(self.interrupted)} interrupted run(s) kept aside and not counted ({names})")
        return notes


@dataclass(frozen=True, kw_only=True)
class SystemResults:
    name: str  # system_name, the folder under results/
    label: str  # unique among the collected systems (the name, plus the folder when names repeat)
    source: Path  # the trainperf output folder or submission folder it came from
    nodes: int
    accelerators: int  # accelerators_per_node x number_of_nodes; 0 for a CPU-only system
    accelerator_model: str
    host_processor_model: str
    benchmarks: list[BenchmarkResults]
    notes: list[str] = field(default_factory=list)
    description: dict[str, Any] = field(default_factory=dict)

    @property
    def processors(self) -> int:
        """What per-accelerator time multiplies by: the accelerators, or each CPU-only host as one."""
        return self.accelerators if self.accelerators else self.nodes

    @property
    def processor_word(self) -> str:
        return "accelerator" if self.accelerators else "host processor"


def collect(paths: list[Path]) -> list[SystemResults]:
    """Every system's scored results under ``paths``, in the order given (systems sorted within a folder)."""
    if not paths:
        raise ResultsError("no results folder given: name trainperf output folders or MLCommons submission folders")
    systems: list[SystemResults] = []
    for root in result_roots(paths):
        systems += _collect_root(root)
    if not systems:
        raise ResultsError(
            f"no result files (results/<system>/<benchmark>/result_<i>.txt) under {', '.join(map(str, paths))}"
        )
    return _unique_labels(systems)


def result_roots(paths: list[Path]) -> list[Path]:
    """The folders holding ``results/`` and ``systems/`` under ``paths``, each once, in the order found."""
    roots: list[Path] = []
    seen: set[Path] = set()
    for path in paths:
        for root in _roots(Path(path)):
            if root.resolve() not in seen:  # a folder named twice is read once
                seen.add(root.resolve())
                roots.append(root)
    return roots


def _roots(path: Path) -> list[Path]:
    if not path.is_dir():
        raise ResultsError(
            f"{path}: no such folder; give a trainperf output folder (`trainperf run --out`) or an MLCommons "
            "submission folder <org>/ holding results/ and systems/"
        )
    if path.name == "results" and (path.parent / "systems").is_dir():
        return [path.parent]
    if (path / "results").is_dir():
        return [path]
    found = sorted(
        {
            p.parent
            for pattern in ("*/results", "*/*/results")
            for p in path.glob(pattern)
            if p.is_dir() and not _linked(p, path)  # a linked folder is refused when read, not searched through
        }
    )
    if not found:
        raise ResultsError(
            f"{path}: no results/ folder in it or in the folders below it; expected "
            "<folder>/results/<system>/<benchmark>/result_<i>.txt and <folder>/systems/<system>.json"
        )
    return found


def _linked(path: Path, top: Path) -> bool:
    """Whether ``path`` or a folder between ``top`` and it is a symbolic link."""
    return any(p.is_symlink() for p in (path, *path.parents) if p.is_relative_to(top) and p != top)


def _entries(folder: Path, root: Path, read: Callable[[Path], bool] = Path.is_dir) -> list[Path]:
    """The entries of ``folder`` that the report reads (not hidden, ``read``), sorted; a link among them is refused
    (:func:`refuse_link`), as review refuses one: a linked run would be counted twice, a linked folder read from
    outside."""
    return [refuse_link(p, root) for p in sorted(folder.iterdir()) if not p.name.startswith(".") and read(p)]


def _collect_root(root: Path) -> list[SystemResults]:
    for name in ("results", "systems", "summary.json"):
        refuse_link(root / name, root)
    summary_energy, summary_note = summary_json_energy(root)
    out = []
    for system_dir in _entries(root / "results", root):
        name = system_dir.name
        desc_path = refuse_link(root / "systems" / f"{name}.json", root)
        desc = _read_system(desc_path)
        nodes = _count(desc, "number_of_nodes", desc_path)
        if nodes < 1:
            raise ResultsError(f"{desc_path}: number_of_nodes must be at least 1, got {nodes}")
        accelerators = _count(desc, "accelerators_per_node", desc_path) * nodes
        notes = [summary_note] if summary_note else []
        if not accelerators:
            host = "the host counts" if nodes == 1 else f"each of the {nodes} hosts counts"
            notes.append(f"CPU-only system (accelerators_per_node 0): {host} as 1 processor in per-accelerator time")
        benchmarks = []
        for bench_dir in _entries(system_dir, root):
            bench = _collect_benchmark(bench_dir, name, summary_energy.get(name, {}), notes)
            if bench is not None and (kept := interrupted_logs(root / INTERRUPTED / name / bench_dir.name)):
                bench = replace(bench, interrupted=kept)
            if bench is not None:
                benchmarks.append(bench)
        if not benchmarks:
            continue
        out.append(
            SystemResults(
                name=name,
                label=name,
                source=root,
                nodes=nodes,
                accelerators=accelerators,
                accelerator_model=str(desc.get("accelerator_model_name", "unknown")) if accelerators else "none",
                host_processor_model=str(desc.get("host_processor_model_name", "unknown")),
                benchmarks=benchmarks,
                notes=notes,
                description=desc,
            )
        )
    return out


def _collect_benchmark(
    bench_dir: Path, system: str, energy: dict[tuple[str, str], dict[str, Any]], notes: list[str]
) -> BenchmarkResults | None:
    key = bench_dir.name
    files = _result_files(bench_dir, key, notes)
    if not files:
        return None
    runs: list[RunResult] = []
    scale: str | None = None
    first_path: Path | None = None
    for index, path in files:
        run, run_scale = _read_run(path, index, key, system, notes, energy.get((key, path.name)))
        if scale is None:
            scale, first_path = run_scale, path
        elif run_scale != scale:
            raise ResultsError(
                f"{path} is a {run_scale}-scale run but {first_path} is {scale}-scale: results of two scales are "
                "never scored together; move one of them to another folder"
            )
        runs.append(run)
    assert scale is not None
    spec: BenchmarkSpec | None
    try:
        spec = registry.get_spec(key, scale)
        required, dropped = spec.runs_required, spec.runs_dropped
        target, target_text, spec_note = spec.target, spec.target_text, ""
    except TrainperfError:
        spec = None
        required, dropped = registry.mlperf_runs(key) if key in registry.BENCHMARKS else FALLBACK_RUNS
        target, target_text = None, "unknown"
        spec_note = (
            f"trainperf has no {scale} spec for {key!r}: scored with {required} runs required, "
            f"{dropped} dropped at each end; target unknown"
        )
    for run in runs:
        _check_qualities(run, spec)
    if spec is not None:
        runs = [_rederive(run, spec, key) for run in runs]
    runs = _count_copies_as_failed(runs, key)
    starts = [r.start_ms for r in runs]
    ruleset = rulesets.ruleset_of_results(bench_dir, key, starts, own=all(r.own_log for r in runs))
    runs = by_round_formula(runs, ruleset)
    score = score_results(
        [(r.success, r.minutes) for r in runs],
        runs_required=required,
        dropped=dropped,
        start_times=[r.start_ms for r in runs],
    )
    return BenchmarkResults(
        benchmark=key,
        scale=scale,
        runs=runs,
        score=score,
        target=target,
        target_text=target_text,
        runs_required=required,
        runs_dropped=dropped,
        spec_note=spec_note,
        round=rulesets.round_name(ruleset) if ruleset else "",
    )


def _result_files(bench_dir: Path, key: str, notes: list[str]) -> list[tuple[int, Path]]:
    """The result files and their run numbers. Two sets in one folder are refused; a published folder that numbers
    each job's runs (v4.0 smc-ac-power: ``result_5800-<id>_1.txt`` beside ``result_5797-<id>_1.txt``) with no more
    files than its round asks for is one set, as the official tools read it: runs numbered in name order."""
    files = sorted(
        (
            (int(m.group(1)), p)
            for p in _entries(bench_dir, bench_dir.parents[2], lambda p: bool(_RESULT_FILE.match(p.name)))
            if (m := _RESULT_FILE.match(p.name)) and p.is_file()
        ),
        key=lambda x: (x[0], x[1].name),
    )
    twice = [(a, b, i) for (i, a), (j, b) in itertools.pairwise(files) if i == j]
    if not twice:
        return files
    a, b, _ = twice[0]
    if key in registry.BENCHMARKS and len(files) > (need := registry.mlperf_runs(key)[0]):
        raise ResultsError(
            f"{bench_dir}: {a.name} and {b.name} are both run {twice[0][2]}, "
            f"and the folder holds {len(files)} result files where {key} needs {need}: one folder holds one set of "
            "runs, each result_<i>.txt once; move the other set to its own folder"
        )
    notes.append(f"{key}: result file names repeat a run number ({a.name}, {b.name}): runs numbered in name order")
    return list(enumerate(sorted((p for _, p in files), key=lambda p: p.name)))


def _count_copies_as_failed(runs: list[RunResult], key: str) -> list[RunResult]:
    """Each run that is a copy of an earlier one (:mod:`trainperf.distinct`, the rule ``review`` refuses) counted as
    failed, with a note naming the run it copies: one run scored as several buys a score."""
    copied = distinct.copies([(r.path.name, r.fingerprints) for r in runs])
    return [
        replace(r, reached_target=False, note=f"{r.path.name} of {key}: {distinct.copy_note(copied[r.path.name])}")
        if r.path.name in copied
        else r
        for r in runs
    ]


def _check_qualities(run: RunResult, spec: BenchmarkSpec | None) -> None:
    """Refuse a run with an evaluation no metric can take (:func:`trainperf.run_checks.impossible_quality`, the rule
    ``review`` applies): an accuracy of 1000 or 1e400 (infinity) would otherwise reach any target."""
    higher = spec.higher_is_better if spec is not None else None
    for value, line in zip(run.evaluations, run.evaluation_lines, strict=False):
        bad = impossible_quality(value, higher_is_better=higher)
        if bad is not None:
            scope = "0 to 1" if higher else "a finite number, 0 or more"
            raise ResultsError(
                f"{run.path}: eval_accuracy at line {line} is {bad:g}, not a possible "
                f"{spec.metric if spec is not None else 'quality'} value ({scope}); {RECORD_FIX}"
            )


def _rederive(run: RunResult, spec: BenchmarkSpec, key: str) -> RunResult:
    """The run with its success re-derived from its logged evaluations and the spec's target."""

    def reached(value: Any) -> bool:
        try:
            return bool(spec.reached(value))
        except (TypeError, ValueError, AttributeError):  # a value that is not a number or an object of numbers
            return False

    # The budget is progress, not minutes (the runner's rule): a run succeeds when one of its logged evaluations
    # reaches the target within the budget, however long the machine took to get there.
    over = first_past_budget(run.progress, spec.max_progress, spec.epoch_num_offset)
    if over is not None:
        note = (
            f"{run.path.name} of {key}: evaluated at epoch_num {over:g}, past the {spec.max_progress:g} {spec.unit} "
            "budget (timeline rule: the harness stops a run at its budget); counted as failed"
        )
        return replace(run, reached_target=False, note=note)
    run = replace(run, reached_target=any(reached(v) for v in run.evaluations))
    if run.status == "success" and not run.reached_target:
        best = _best(run.evaluations, spec)
        note = (
            f"{run.path.name} of {key}: run_stop says status 'success', but none of its "
            f"{len(run.evaluations)} eval_accuracy values reaches the target {spec.target_text}"
            f"{f' (best: {best:g})' if best is not None else ''}; counted as failed"
        )
        run = replace(run, note=note)
    return run


def _best(values: tuple[Any, ...], spec: BenchmarkSpec) -> float | None:
    heads = []
    for v in values:
        try:
            h = spec.headline(v)
        except (TypeError, ValueError, AttributeError):
            continue
        if math.isfinite(h):
            heads.append(h)
    if not heads:
        return None
    return max(heads) if spec.higher_is_better else min(heads)


def _read_run(
    path: Path, index: int, key: str, system: str, notes: list[str], summary_energy: dict[str, Any] | None
) -> tuple[RunResult, str]:
    try:
        logged = parse_run(path, evaluated_after_stop=registry.evaluated_after_run_stop())
        records = [rec for _, rec in logged.lines]
    except ResultsError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise ResultsError(
            f"{path}: malformed MLLOG record ({type(e).__name__}: {e}); it is not a usable result file"
        ) from None
    if logged.start_ms is None:
        raise ResultsError(
            f"{path} is not a run (no run_start): a result file holds one whole run; move it away to make the report"
        )
    incomplete = logged.status is None or logged.minutes is None
    if incomplete:
        # A log that ends before run_stop (a published Lenovo v2.0 unet3d run stops mid-block) is a run that did not
        # finish: not converged, as the official result_summarizer counts it. It can only lose: its evaluations are
        # not counted, and olympic scoring drops it as one of the slowest.
        last = max((_logged_ms(r) for r in records), default=logged.start_ms)
        logged = replace(logged, status="aborted", minutes=max(0, last - logged.start_ms) / 60000, evaluations=[])
        notes.append(f"{path.name} of {key} ends before run_stop: counted as a run that did not converge")
    if logged.benchmark is not None and logged.benchmark != key:
        raise ResultsError(f"{path} is a {logged.benchmark!r} run in the {key!r} folder: move it to its own folder")
    if logged.platform is not None and logged.platform != system:
        notes.append(f"{path.name} of {key} names platform {logged.platform!r}, not the folder's system {system!r}")
    if not isinstance(logged.scale, str) or logged.scale not in SCALES:
        raise ResultsError(f"{path}: trainperf_scale {logged.scale!r} is not one of {', '.join(SCALES)}")
    joules, note = read_energy(path, records, summary_energy)
    window = (power.first_ms(records, "run_start"), power.first_ms(records, "run_stop"))
    run = RunResult(
        index=index,
        path=path,
        seed=logged.seed if isinstance(logged.seed, int) else None,
        status=str(logged.status),
        minutes=logged.minutes,
        curve=logged.curve,
        energy_joules=joules,
        energy_note=note,
        power_window=window,
        start_ms=logged.start_ms,
        evaluations=tuple(logged.evaluations),
        evaluation_lines=tuple(logged.evaluation_lines),
        progress=own_progress(logged.lines),
        own_log=rulesets.is_trainperf_log(records),
        fingerprints=distinct.fingerprints(logged.lines),
    )
    return run, logged.scale


def _logged_ms(rec: dict[str, Any]) -> int:
    """A record's time_ms, or 0 when it is not a plausible time (the log's last time is only a lower bound)."""
    t = logged_ms(rec)
    return 0 if t is None else t


def _read_system(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ResultsError(
            f"{path}: system description missing; every results/<system>/ folder needs systems/<system>.json "
            f"(write one with `{shell_command('trainperf', 'system', '--system-name', path.stem, '-o', path)}`)"
        )
    try:
        doc = limits.read_json(path, limits.MAX_SYSTEM_BYTES)
    except limits.OverLimit as e:
        raise ResultsError(
            f"{path} {e}: refused; a system description is a flat object of a few KiB: write it again with "
            "`trainperf system`"
        ) from None
    except OSError as e:
        raise ResultsError(f"cannot read system description {path}: {e.strerror}") from None
    except ValueError as e:  # not JSON, or not UTF-8
        raise ResultsError(f"{path}: not valid JSON ({e}); fix it or write it again with `trainperf system`") from None
    if not isinstance(doc, dict):
        raise ResultsError(f"{path}: the top level must be a JSON object of field -> value")
    return doc


def _count(desc: dict[str, Any], name: str, path: Path) -> int:
    value = desc.get(name)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    # A JSON number with nothing after the point: MosaicML's published v2.0 systems write "number_of_nodes": 1.0
    if isinstance(value, float) and value.is_integer() and 0 <= value < 1e9:
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if name == "accelerators_per_node" and text.upper() in ("N/A", "NA", "NONE"):
            return 0
        if re.fullmatch(r"[0-9]{1,9}", text):  # ASCII digits: str.isdigit() also takes "²", which int() refuses
            return int(text)
    raise ResultsError(
        f'{path}: field {name!r} is {value!r}; it must be a whole number written in the digits 0-9, such as "1": '
        f"fix that field, or write the description again with `{shell_command('trainperf', 'system', '-o', path)}`"
    )


def _unique_labels(systems: list[SystemResults]) -> list[SystemResults]:
    names = Counter(s.name for s in systems)  # counted once: a count per system grew with the square of their number
    folders = Counter((s.name, s.source.name) for s in systems)
    out = []
    for s in systems:
        if names[s.name] == 1:
            out.append(s)
            continue
        where = s.source.name if folders[(s.name, s.source.name)] == 1 else str(s.source)
        out.append(replace(s, label=f"{s.name} ({where})"))
    return out


__all__ = ["collect", "result_roots", "SystemResults", "BenchmarkResults", "RunResult", "ENERGY_KEY", "FALLBACK_RUNS"]
