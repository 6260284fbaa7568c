"""A suite: N runs per benchmark with distinct logged seeds, result files, resume, scoring, summary.

Output layout (MLCommons): ``<out>/results/<system>/<benchmark>/result_<i>.txt`` and
``<out>/systems/<system>.json``, plus ``<out>/summary.json``. A run is written to a temporary file and
renamed when it ends, so a result file is always a whole run. A finished run is not redone (a result
file whose timing is impossible is refused, not resumed); a run interrupted with Ctrl-C is logged as
aborted, moved to ``<out>/interrupted/`` and redone next time. With more runs than the spec requires, the
score is that of the median window of consecutive runs (:mod:`trainperf.scoring`); ``summary.json`` names
that window (``window``, and ``in_window`` on each run) and still lists every run.

One suite at a time per output folder: the suite holds an exclusive lock on ``<out>/.trainperf.lock``
(``flock``) from start to end, and a second one on the same folder is refused at once. A run's log is a
new file with a unique name (``.result_<i>.txt.<pid>-<random>.partial``, never an existing file or a
link); a log line that cannot be written (a full disk) stops the suite at once and removes the partial
file; a finished log is fsynced before it is renamed into ``result_<i>.txt`` and its folder after. Partial
files that a killed suite left behind are removed when the next suite takes the lock. The system name
and the organization become file and folder names, so they are checked before anything is written.

A folder holds one kind of run: timed runs, dry runs or smoke runs (``kind`` in ``trainperf.json``). A smoke
suite writes its fixtures under ``<out>/smoke-data`` (:mod:`trainperf.harness.smoke`) and reads its data
there, whatever ``--data-dir`` says.
"""

from __future__ import annotations

import fcntl
import gc
import json
import os
import re
import secrets
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainperf import registry, seeds
from trainperf.contract import switches as switches_mod
from trainperf.contract.switches import Switches
from trainperf.dist import DistContext
from trainperf.errors import NotAvailableError, ResultsError, RunFailed, RunInterrupted, TrainperfError, UsageError
from trainperf.fileio import atomic_write_text, replace_durably
from trainperf.harness import smoke
from trainperf.harness.mllog import RunLog
from trainperf.harness.runner import RunObserver, RunOutcome, Submission, execute_run
from trainperf.results import first_values, parse_run, read_mllog
from trainperf.rules.closed import check_overrides
from trainperf.scoring import Score, score_results
from trainperf.spec import RunConfig

SUITE_META = "trainperf.json"
LOCK_FILE = ".trainperf.lock"
INTERRUPTED = "interrupted"  # <out>/interrupted/<system>/<benchmark>/result_<i>-<k>.txt
_INTERRUPTED_FILE = re.compile(r"^result_\d+-\d+\.txt$")
_PARTIAL = re.compile(r"^\.result_\d+\.txt(\.[A-Za-z0-9-]+)?\.partial$")  # this suite's and older ones


@dataclass(frozen=True, kw_only=True)
class SuiteOptions:
    benchmarks: tuple[str, ...]
    scale: str
    runs: int
    out: Path
    data_dir: Path
    seed: int | None = None  # None: each run's seed is drawn from the system's randomness; S: runs use S, S+1, ...
    division: str = "open"
    org: str = "trainperf-user"
    availability: str = "available"
    system_name: str | None = None
    overrides: tuple[tuple[str, Any], ...] = ()  # --set KEY=VALUE, checked against the division's rules
    dry_run: bool = False
    smoke: bool = False  # reference smoke runs on fixtures written under <out>/smoke-data
    drop_caches: bool = False
    precision: str = "auto"  # --precision: the training step's autocast (trainperf/harness/precision.py)
    switches: Switches = field(default_factory=Switches)  # --compile, --channels-last, ... (harness/switches.py)


@dataclass(kw_only=True)
class BenchmarkSummary:
    benchmark: str
    scale: str
    target: str
    runs: list[dict[str, Any]]
    score: Score
    interrupted: list[dict[str, Any]] = field(default_factory=list)  # kept aside, not results (see interrupted_runs)


def _kind(dry_run: bool, smoke: bool = False) -> str:
    return "dry run" if dry_run else "smoke run" if smoke else "timed"


def _check_out_folder(out: Path, system: str, scale: str, dry_run: bool = False, smoke: bool = False) -> None:
    """The output folder must be writable and, if it holds results, hold this system's, scale's and kind's.

    A folder holds timed runs, dry runs or smoke runs, never two kinds: a dry or smoke run is never resumed
    as a result, and a timed run never reads a smoke fixture.
    """
    kind = _kind(dry_run, smoke)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=out, prefix=".probe", delete=True)
        probe.close()
    except OSError as e:
        raise ResultsError(f"output folder {out} is not writable ({e.strerror}); choose another with --out") from None
    meta_path = out / SUITE_META
    if meta_path.exists():
        try:
            meta = json.loads(meta_path.read_text())
            other_system, other_scale = meta["system"], meta["scale"]
            other_kind = meta.get("kind", "timed")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            raise ResultsError(
                f"{meta_path} is unreadable or malformed; it is not a trainperf output folder, or "
                "it was damaged: choose another --out"
            ) from None
        if other_system != system:
            raise ResultsError(
                f"output folder {out} holds results of system {other_system!r}, but this run is on "
                f"{system!r}: results of two systems are never mixed in one run folder. Use another "
                f"--out, or --system-name {other_system} if this really is that machine"
            )
        if other_scale != scale:
            raise ResultsError(
                f"output folder {out} holds {other_scale}-scale results; this run is {scale}-scale: use another --out"
            )
        if other_kind != kind:
            raise ResultsError(
                f"output folder {out} holds {other_kind} results; "
                f"this one is a {'timed run' if kind == 'timed' else kind}: timed, dry and smoke "
                "runs never share a folder (a dry or smoke run is not a result): use another --out"
            )
    else:
        try:
            meta = {"system": system, "scale": scale, "kind": kind}
            atomic_write_text(meta_path, json.dumps(meta, indent=2) + "\n")
        except OSError as e:
            raise ResultsError(
                f"cannot write {meta_path}: {e.strerror or e}; free space or choose another --out"
            ) from None


@contextmanager
def hold_out_folder(out: Path) -> Iterator[Path]:
    """Hold the output folder's lock (``<out>/.trainperf.lock``, ``flock``) until the block ends.

    Refused at once, with a :class:`ResultsError`, when another suite holds it: two suites in one folder
    would write the same result files. The lock file stays (removing it would race a new suite); the
    lock ends with the process, however it ends.
    """
    lock = out / LOCK_FILE
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ResultsError(
            f"output folder {out} is not writable ({e.strerror or e}); choose another with --out"
        ) from None
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise ResultsError(
            f"output folder {out} is not writable (cannot open its lock file {lock}: {e.strerror or e}); "
            "choose another with --out"
        ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ResultsError(
                f"output folder {out} is in use: another trainperf run{_lock_holder(fd)} holds its lock {lock}. "
                "Two runs in one folder would overwrite each other's results: wait for that run to finish, "
                "or use another --out"
            ) from None
        except OSError as e:
            raise ResultsError(
                f"cannot lock the output folder {out} ({lock}: {e.strerror or e}); the file system may not "
                "support locks: use an --out on a local disk"
            ) from None
        try:  # who holds it, for the message of a refused run; not needed for the lock itself
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass
        yield lock
    finally:
        os.close(fd)  # releases the lock


def _lock_holder(fd: int) -> str:
    try:
        pid = int(os.pread(fd, 32, 0).decode("ascii").strip())
    except (OSError, ValueError, UnicodeDecodeError):
        return ""
    return f" (process {pid})"


def _remove_stale_partials(folder: Path) -> None:
    """Partial run logs that a killed suite left (the lock is held, so no suite is writing them)."""
    for p in folder.iterdir():
        if _PARTIAL.match(p.name) and (p.is_symlink() or p.is_file()):
            p.unlink(missing_ok=True)


def check_names(options: SuiteOptions) -> None:
    """The system name and the organization become file and folder names: plain names only."""
    from trainperf.system import check_org_name, check_system_name

    if options.system_name is not None:
        check_system_name(options.system_name)
    check_org_name(options.org)


def _resume_run(path: Path, system: str, scale: str, benchmark: str, expected: dict[str, Any]) -> dict[str, Any]:
    """A finished run read back, after checking it was made the way this suite would make it.

    ``expected`` maps logged keys to the values this suite would log (:func:`_expected_settings`); any
    difference refuses the resume with a message naming every difference.
    """
    try:
        logged = parse_run(path)
        first = first_values(read_mllog(path))
    except ResultsError as e:
        raise ResultsError(f"cannot resume from a finished run: {e}") from None
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise ResultsError(
            f"cannot resume from {path}: malformed MLLOG record ({type(e).__name__}: {e}); move it away to redo the run"
        ) from None
    if logged.status is None or logged.minutes is None:
        raise ResultsError(f"{path} is not a complete run (no run_start/run_stop): delete it to redo the run")
    if logged.platform != system:
        raise ResultsError(
            f"{path} was made on system {logged.platform!r}, not {system!r}: it does not belong in "
            "this folder; move it away or use another --out"
        )
    if logged.scale != scale or logged.benchmark != benchmark:
        raise ResultsError(f"{path} is a {logged.scale} {logged.benchmark} run, not {scale} {benchmark}")
    differences = [
        f"{_SETTING_NAMES.get(key, key)} {_shown(first.get(key, '(not logged)'))} (this run: {_shown(want)})"
        for key, want in expected.items()
        if _normalized(first.get(key, _MISSING)) != _normalized(want)
    ]
    if differences:
        raise ResultsError(
            f"cannot resume from {path}: it was made with " + "; ".join(differences) + ". Runs made with other "
            "settings or another version of the code are never scored together: repeat the original options, "
            "or use another --out for these ones"
        )
    return {
        "seed": logged.seed,
        "status": logged.status,
        "reason": logged.abort_reason or ("target" if logged.status == "success" else ""),
        "minutes": logged.minutes,
        "log": str(path),
        "resumed": True,
        "curve": logged.curve,
        "start_ms": logged.start_ms,
    }


_MISSING = object()
_SETTING_NAMES = {
    "submission_org": "organization (--org)",
    "trainperf_division": "division (--division)",
    "trainperf_dry_run": "dry run (--dry-run)",
    "trainperf_smoke": "smoke run (--smoke)",
    "trainperf_overrides": "overrides (--set)",
    "trainperf_target": "target",
    "trainperf_code": "trainperf code",
    "trainperf_seed_source": "seed source",
    "trainperf_precision": "precision (--precision)",
    **{switches_mod.LOG_KEYS[n]: f"{n.replace('_', ' ')} ({switches_mod.FLAGS[n]})" for n in switches_mod.NAMES},
    "seed": "seed (--seed)",
}


def _normalized(value: Any) -> Any:
    """A value as JSON reads it back (tuples become lists), so a logged value compares with a fresh one."""
    if value is _MISSING:
        return value
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _shown(value: Any) -> str:
    """A logged value in a message: printable characters only, cut short (a log can hold anything)."""
    text = ascii(value) if not isinstance(value, str) else ascii(value)[1:-1]
    return text if len(text) <= 80 else text[:76] + " ..."


def _expected_settings(options: SuiteOptions, spec: Any, seed: int | None) -> dict[str, Any]:
    """What a run of this suite logs about how it was made; resume compares a finished run's with these."""
    import trainperf

    expected: dict[str, Any] = {
        "submission_org": options.org,
        "trainperf_division": options.division,
        "trainperf_dry_run": options.dry_run,
        "trainperf_smoke": options.smoke,
        "trainperf_overrides": dict(options.overrides),
        "trainperf_target": spec.target_text,
        "trainperf_code": trainperf.code_hash(),
        "trainperf_seed_source": seeds.SOURCE_SYSTEM if seed is None else seeds.SOURCE_FIXED,
        "trainperf_precision": options.precision,
        **options.switches.as_logged(),
    }
    if seed is not None:
        expected["seed"] = seed
    return expected


def run_suite(
    options: SuiteOptions,
    dist: DistContext,
    *,
    observer_for: Any = None,
    announce: Callable[[str], None] | None = None,
) -> list[BenchmarkSummary]:
    """Run (or resume) every benchmark's runs; write result files and the summary on rank 0.

    Rank 0 holds the output folder's lock (:func:`hold_out_folder`) from before the first file is written
    until the summary is; names and rules are checked before that. ``announce`` hears what a user should
    know before the runs start (where a smoke suite wrote its fixtures).
    """
    check_names(options)
    check_kind(options)
    recipes = _checked_recipes(options)  # rules are checked before anything runs or is written
    with hold_out_folder(options.out) if dist.is_main else nullcontext():
        return _run_suite(options, dist, recipes, observer_for=observer_for, announce=announce)


def check_kind(options: SuiteOptions) -> None:
    """Every benchmark runs this kind of run at this scale: a smoke suite is a reference-scale check with a
    fixture for every benchmark, and never a dry run; a scale that only dry-runs yet takes only dry runs."""
    if not options.dry_run:
        for key in options.benchmarks:
            spec = registry.get_spec(key, options.scale)
            if spec.dry_run_only:
                raise NotAvailableError(
                    f"{key} is not available yet at the {options.scale} scale: {spec.dry_run_only}. Only a dry run "
                    "(--dry-run) checks it today"
                )
    if not options.smoke:
        return
    if options.dry_run:
        raise UsageError("--smoke and --dry-run are two different checks: choose one")
    if options.scale != "reference":
        raise UsageError(
            "--smoke checks the reference scale's data path on a tiny fixture; the mini scale already runs on "
            "its real data in minutes: use --scale reference --smoke, or a mini run"
        )
    smoke.check_available(options.benchmarks)


def _checked_recipes(options: SuiteOptions) -> dict[str, Any]:
    """Each benchmark's recipe with the overrides applied, after the division's rules allowed them."""
    overrides = dict(options.overrides)
    recipes = {}
    for key in options.benchmarks:
        default = registry.default_recipe(key, options.scale)
        check_overrides(
            key,
            options.scale,
            options.division,
            default.as_dict(),
            registry.benchmark(key).closed_rules.get(options.scale, {}),
            overrides,
        )
        recipes[key] = default.with_overrides(overrides)
    return recipes


def _run_suite(
    options: SuiteOptions,
    dist: DistContext,
    recipes: dict[str, Any],
    *,
    observer_for: Any,
    announce: Callable[[str], None] | None = None,
) -> list[BenchmarkSummary]:
    from trainperf.nodes import node_count
    from trainperf.system import SUBMISSION_STATUS, default_system_name, describe_system, write_system

    overrides = dict(options.overrides)
    nodes = node_count()  # torchrun's agents: the system is that many machines like this one
    system = options.system_name or default_system_name(nodes=nodes)
    if dist.is_main:
        _check_out_folder(options.out, system, options.scale, options.dry_run, options.smoke)
        desc = describe_system(
            org=options.org,
            # the system JSON carries the MLPerf division the logs declare: mini runs are MLPerf "open"
            division=options.division if options.scale == "reference" else "open",
            availability=options.availability,
            system_name=system,
            nodes=nodes,
        )
        write_system(desc, options.out / "systems" / f"{system}.json")
    data_dir = options.data_dir
    if options.smoke:
        data_dir = smoke.fixture_root(options.out)
        if dist.is_main:
            for key in options.benchmarks:
                folder, description = smoke.write_fixture(key, data_dir)
                if announce is not None:
                    announce(
                        f"{key} smoke run: fixture in the reference layout at {folder} ({description}); not a result"
                    )
    dist.barrier()
    submission = Submission(org=options.org, platform=system, status=SUBMISSION_STATUS[options.availability])
    summaries = []
    for key in options.benchmarks:
        spec = registry.get_spec(key, options.scale)
        cls = registry.workload_class(key)
        result_dir = options.out / "results" / system / key
        if dist.is_main:
            try:
                result_dir.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise ResultsError(f"cannot make {result_dir}: {e.strerror or e}; choose another --out") from None
            _remove_stale_partials(result_dir)
        runs: list[dict[str, Any]] = []
        for i in range(options.runs):
            final = result_dir / f"result_{i}.txt"
            fixed_seed = None if options.seed is None else options.seed + i
            resumed = None
            if dist.is_main and final.exists():
                expected = _expected_settings(options, spec, fixed_seed)
                resumed = _resume_run(final, system, options.scale, key, expected)
            resumed = dist.broadcast_object(resumed)
            if resumed is not None:
                runs.append(resumed)
                continue
            if fixed_seed is None:  # drawn on rank 0, the same on every rank
                seed, source = int(dist.broadcast_object(seeds.draw_seed())), seeds.SOURCE_SYSTEM
            else:
                seed, source = fixed_seed, seeds.SOURCE_FIXED
            config = RunConfig(
                seed=seed,
                seed_source=source,
                dry_run=options.dry_run,
                smoke=options.smoke,
                division=options.division,
                overrides=overrides,
                precision=options.precision,
                switches=options.switches,
            )
            partial = result_dir / f".result_{i}.txt.{os.getpid()}-{secrets.token_hex(4)}.partial"
            log = RunLog(partial if dist.is_main else None)
            observer = observer_for(key, i, options.runs) if observer_for else RunObserver()
            try:
                outcome = execute_run(
                    cls,
                    spec,
                    recipes[key],
                    config,
                    log=log,
                    submission=submission,
                    data_dir=data_dir,
                    dist=dist,
                    observer=observer,
                    drop_caches=options.drop_caches,
                )
                log.close()  # flushed and fsynced; a ResultsError when its last lines could not be written
            except RunInterrupted as e:
                _close_quietly(log)
                if dist.is_main:
                    kept = _keep_interrupted(partial, options.out / INTERRUPTED / system / key, i, key)
                    if kept is not None:
                        summaries.append(_summary(key, options, spec, runs, options.out / INTERRUPTED / system / key))
                        _write_summary_quietly(options.out, system, summaries)
                        what = getattr(e, "what", "interrupted")
                        raise RunInterrupted(
                            f"{key}: run {i} {what}; logged as aborted in {kept}, not counted (earlier results "
                            "stay; the same command resumes the suite and redoes this run; summary.json and the "
                            "report list it as interrupted)"
                        ) from None
                raise
            except RunFailed as e:
                # A started run that failed is a result: aborted, counted as not converged (MLPerf).
                if dist.is_main:
                    try:
                        log.close()
                        _store(partial, final)
                    except TrainperfError:
                        partial.unlink(missing_ok=True)
                        raise
                    runs.append(_run_record(e.outcome, final))
                    summaries.append(_summary(key, options, spec, runs, options.out / INTERRUPTED / system / key))
                    _write_summary_quietly(options.out, system, summaries)
                    raise RunFailed(
                        f"{e}; logged as aborted in {final} and counted as a run that did not converge. Fix the "
                        "cause and run the same command: the suite resumes with the next run",
                        e.outcome,
                        e.exit_code,
                    ) from e.__cause__
                raise
            except BaseException:
                _close_quietly(log)
                if dist.is_main:
                    partial.unlink(missing_ok=True)
                raise
            if dist.is_main:
                _store(partial, final)
            gc.collect()  # free the run's model and data before the next run builds its own
            runs.append(_run_record(outcome, final))
        summaries.append(_summary(key, options, spec, runs, options.out / INTERRUPTED / system / key))
        if dist.is_main:
            write_summary(options.out, system, summaries)
    return summaries


def _summary(key: str, options: SuiteOptions, spec: Any, runs: list[dict[str, Any]], aside: Path) -> BenchmarkSummary:
    score = score_results(
        [(r["status"] == "success", r["minutes"]) for r in runs],
        runs_required=spec.runs_required,
        dropped=spec.runs_dropped,
        start_times=[r.get("start_ms") for r in runs],
    )
    return BenchmarkSummary(
        benchmark=key,
        scale=options.scale,
        target=spec.target_text,
        runs=list(runs),
        score=score,
        interrupted=interrupted_runs(aside),
    )


def _store(partial: Path, final: Path) -> None:
    try:
        replace_durably(partial, final)
    except OSError as e:
        partial.unlink(missing_ok=True)
        raise ResultsError(
            f"cannot store the finished run as {final}: {e.strerror or e}; free space (or choose "
            "another --out) and run the same command again: this run is redone"
        ) from None


def _keep_interrupted(partial: Path, folder: Path, i: int, key: str) -> Path | None:
    """Move an interrupted run's log aside, under a name no earlier interruption of run ``i`` has."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        k = 1
        while (folder / f"result_{i}-{k}.txt").exists() or (folder / f"result_{i}-{k}.txt").is_symlink():
            k += 1
        kept = folder / f"result_{i}-{k}.txt"
        replace_durably(partial, kept)
        return kept
    except OSError as e:
        partial.unlink(missing_ok=True)
        raise ResultsError(
            f"{key}: run {i} was interrupted, and its log cannot be kept in {folder}: "
            f"{e.strerror or e}; earlier results stay, the same command resumes the suite"
        ) from None


def interrupted_runs(folder: Path) -> list[dict[str, Any]]:
    """The interrupted runs kept aside in ``folder`` (``result_<i>-<k>.txt``): they are not results, but
    they stay visible, so that a slow run is never silently redone."""
    found = []
    if not folder.is_dir():
        return found
    for p in sorted(folder.iterdir()):
        if not _INTERRUPTED_FILE.match(p.name) or not p.is_file() or p.is_symlink():
            continue
        try:
            logged = parse_run(p)
        except (TrainperfError, ValueError, TypeError, KeyError, AttributeError):
            found.append({"log": str(p), "seed": None, "minutes": None, "reason": "unreadable log"})
            continue
        found.append(
            {
                "log": str(p),
                "seed": logged.seed,
                "minutes": logged.minutes,
                "reason": logged.abort_reason or "interrupted",
            }
        )
    return found


def _write_summary_quietly(out: Path, system: str, summaries: list[BenchmarkSummary]) -> None:
    """The summary on the way out of a failed or interrupted run (that run's own error is the one to report)."""
    try:
        write_summary(out, system, summaries)
    except ResultsError:
        pass


def _close_quietly(log: RunLog) -> None:
    """Close a run's log on the way out of a failed run (the run's own error is the one to report)."""
    try:
        log.close()
    except ResultsError:
        pass


def _run_record(outcome: RunOutcome, path: Path) -> dict[str, Any]:
    rec = asdict(outcome)
    rec["log"] = str(path)
    rec["resumed"] = False
    return rec


def _window(s: BenchmarkSummary) -> dict[str, Any] | None:
    """The N consecutive runs that were scored: their result files, where they lie among all the runs."""
    if s.score.window is None:
        return None
    start, stop = s.score.window
    return {
        "runs": f"{start + 1}-{stop} of {s.score.runs}",  # positions in start order, counted from 1
        "windows": s.score.windows,
        "logs": [s.runs[i].get("log") for i in s.score.window_runs],
    }


def write_summary(out: Path, system: str, summaries: list[BenchmarkSummary]) -> Path:
    doc = {
        "system": system,
        "benchmarks": [
            {
                "benchmark": s.benchmark,
                "scale": s.scale,
                "target": s.target,
                "score_minutes": s.score.minutes,
                "score_label": s.score.label,
                "valid": s.score.valid,
                "note": s.score.note,
                "spread_minutes": s.score.spread,
                "window": _window(s),
                "runs": [{**r, "in_window": i in s.score.window_runs} for i, r in enumerate(s.runs)],
                "interrupted": s.interrupted,
            }
            for s in summaries
        ],
    }
    path = out / "summary.json"
    try:
        atomic_write_text(path, json.dumps(doc, indent=2) + "\n")
    except OSError as e:
        raise ResultsError(f"cannot write {path}: {e.strerror}") from None
    return path


__all__ = [
    "SuiteOptions",
    "BenchmarkSummary",
    "run_suite",
    "write_summary",
    "hold_out_folder",
    "check_names",
    "TrainperfError",
]
