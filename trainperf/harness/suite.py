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
"""

from __future__ import annotations

import fcntl
import gc
import json
import os
import re
import secrets
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trainperf import registry
from trainperf.dist import DistContext
from trainperf.errors import ResultsError, RunInterrupted, TrainperfError
from trainperf.fileio import atomic_write_text, replace_durably
from trainperf.harness.mllog import RunLog
from trainperf.harness.runner import RunObserver, RunOutcome, Submission, execute_run
from trainperf.results import parse_run
from trainperf.rules.closed import check_overrides
from trainperf.scoring import Score, score_results
from trainperf.spec import RunConfig

SUITE_META = "trainperf.json"
LOCK_FILE = ".trainperf.lock"
_PARTIAL = re.compile(r"^\.result_\d+\.txt(\.[A-Za-z0-9-]+)?\.partial$")  # this suite's and older ones


@dataclass(frozen=True, kw_only=True)
class SuiteOptions:
    benchmarks: tuple[str, ...]
    scale: str
    runs: int
    out: Path
    data_dir: Path
    seed: int = 1
    division: str = "open"
    org: str = "trainperf-user"
    availability: str = "available"
    system_name: str | None = None
    overrides: tuple[tuple[str, Any], ...] = ()  # --set KEY=VALUE, checked against the division's rules
    dry_run: bool = False
    drop_caches: bool = False


@dataclass(kw_only=True)
class BenchmarkSummary:
    benchmark: str
    scale: str
    target: str
    runs: list[dict[str, Any]]
    score: Score


def _check_out_folder(out: Path, system: str, scale: str) -> None:
    """The output folder must be writable and, if it holds results, hold this system's and scale's."""
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
        except (OSError, ValueError, KeyError, TypeError):
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
    else:
        try:
            atomic_write_text(meta_path, json.dumps({"system": system, "scale": scale}, indent=2) + "\n")
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


def _resume_run(path: Path, system: str, scale: str, benchmark: str) -> dict[str, Any]:
    try:
        logged = parse_run(path)
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
    return {
        "seed": logged.seed,
        "status": logged.status,
        "minutes": logged.minutes,
        "log": str(path),
        "resumed": True,
        "curve": logged.curve,
        "start_ms": logged.start_ms,
    }


def run_suite(
    options: SuiteOptions,
    dist: DistContext,
    *,
    observer_for: Any = None,
) -> list[BenchmarkSummary]:
    """Run (or resume) every benchmark's runs; write result files and the summary on rank 0.

    Rank 0 holds the output folder's lock (:func:`hold_out_folder`) from before the first file is written
    until the summary is; names and rules are checked before that.
    """
    check_names(options)
    recipes = _checked_recipes(options)  # rules are checked before anything runs or is written
    with hold_out_folder(options.out) if dist.is_main else nullcontext():
        return _run_suite(options, dist, recipes, observer_for=observer_for)


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
    options: SuiteOptions, dist: DistContext, recipes: dict[str, Any], *, observer_for: Any
) -> list[BenchmarkSummary]:
    from trainperf.system import SUBMISSION_STATUS, default_system_name, describe_system, write_system

    overrides = dict(options.overrides)
    system = options.system_name or default_system_name(nodes=1)
    if dist.is_main:
        _check_out_folder(options.out, system, options.scale)
        desc = describe_system(
            org=options.org,
            # the system JSON carries the MLPerf division the logs declare: mini runs are MLPerf "open"
            division=options.division if options.scale == "reference" else "open",
            availability=options.availability,
            system_name=system,
        )
        write_system(desc, options.out / "systems" / f"{system}.json")
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
            resumed = None
            if dist.is_main and final.exists():
                resumed = _resume_run(final, system, options.scale, key)
            resumed = dist.broadcast_object(resumed)
            if resumed is not None:
                runs.append(resumed)
                continue
            seed = options.seed + i
            config = RunConfig(seed=seed, dry_run=options.dry_run, division=options.division, overrides=overrides)
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
                    data_dir=options.data_dir,
                    dist=dist,
                    observer=observer,
                    drop_caches=options.drop_caches,
                )
                log.close()  # flushed and fsynced; a ResultsError when its last lines could not be written
            except RunInterrupted:
                _close_quietly(log)
                if dist.is_main:
                    kept = options.out / "interrupted" / system / key / f"result_{i}.txt"
                    try:
                        kept.parent.mkdir(parents=True, exist_ok=True)
                        replace_durably(partial, kept)
                    except OSError as e:
                        partial.unlink(missing_ok=True)
                        raise ResultsError(
                            f"{key}: run {i} was interrupted, and its log cannot be kept in {kept}: "
                            f"{e.strerror or e}; earlier results stay, the same command resumes the suite"
                        ) from None
                    raise RunInterrupted(
                        f"{key}: run {i} interrupted by the user; logged as aborted in {kept}, not counted "
                        "(earlier results stay; the same command resumes the suite)"
                    ) from None
                raise
            except BaseException:
                _close_quietly(log)
                if dist.is_main:
                    partial.unlink(missing_ok=True)
                raise
            if dist.is_main:
                try:
                    replace_durably(partial, final)
                except OSError as e:
                    partial.unlink(missing_ok=True)
                    raise ResultsError(
                        f"cannot store the finished run as {final}: {e.strerror or e}; free space (or choose "
                        "another --out) and run the same command again: this run is redone"
                    ) from None
            gc.collect()  # free the run's model and data before the next run builds its own
            runs.append(_run_record(outcome, final))
        score = score_results(
            [(r["status"] == "success", r["minutes"]) for r in runs],
            runs_required=spec.runs_required,
            dropped=spec.runs_dropped,
            start_times=[r.get("start_ms") for r in runs],
        )
        summaries.append(
            BenchmarkSummary(benchmark=key, scale=options.scale, target=spec.target_text, runs=runs, score=score)
        )
        if dist.is_main:
            write_summary(options.out, system, summaries)
    return summaries


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
