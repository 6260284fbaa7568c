"""A suite's output folder: what it holds, its lock, the partial files of the runs, the results stored and the
interrupted runs kept aside, and ``summary.json`` (the layout is described in :mod:`trainperf.harness.suite`)."""

from __future__ import annotations

import fcntl
import gc
import json
import os
import re
import secrets
import signal
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainperf.errors import ResultsError, RunFailed, RunInterrupted, TrainperfError
from trainperf.fileio import atomic_write_bytes, atomic_write_text, replace_durably
from trainperf.harness.mllog import RunLog
from trainperf.harness.runner import RunOutcome
from trainperf.results import INTERRUPTED, PICTURES, interrupted_logs, parse_run
from trainperf.scoring import Score, score_results
from trainperf.text import printable

SUITE_META = "trainperf.json"
LOCK_FILE = ".trainperf.lock"
_PARTIAL = re.compile(r"^\.result_\d+\.txt(\.[A-Za-z0-9-]+)?\.partial$")  # this suite's and older ones


@dataclass(kw_only=True)
class BenchmarkSummary:
    benchmark: str
    scale: str
    target: str
    runs: list[dict[str, Any]]
    score: Score
    interrupted: list[dict[str, Any]] = field(default_factory=list)  # kept aside, not results (see interrupted_runs)


def kind_of(dry_run: bool, smoke: bool = False) -> str:
    return "dry run" if dry_run else "smoke run" if smoke else "timed"


class ResultFolder:
    """The output folder of one suite on one system, as rank 0 writes it (on the other ranks nothing is written:
    ``is_main`` false).

    ``<out>/results/<system>/<benchmark>/result_<i>.txt`` are the finished runs; a run is logged into a new
    partial file and stored under its final name when it ends (:meth:`run`); an interrupted one goes to
    ``<out>/interrupted/<system>/<benchmark>/``.
    """

    def __init__(self, out: Path, system: str, *, is_main: bool) -> None:
        self.out, self.system, self.is_main = out, system, is_main

    def results(self, key: str) -> Path:
        return self.out / "results" / self.system / key

    def result(self, key: str, i: int) -> Path:
        return self.results(key) / f"result_{i}.txt"

    def aside(self, key: str) -> Path:
        return self.out / INTERRUPTED / self.system / key

    def prepare(self, key: str) -> None:
        """A benchmark's result folder made, without the partial files a killed suite left there."""
        if not self.is_main:
            return
        folder = self.results(key)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ResultsError(f"cannot make {folder}: {e.strerror or e}; choose another --out") from None
        remove_stale_partials(folder)

    def summary(self, key: str, spec: Any, scale: str, runs: list[dict[str, Any]]) -> BenchmarkSummary:
        score = score_results(
            [(r["status"] == "success", r["minutes"]) for r in runs],
            runs_required=spec.runs_required,
            dropped=spec.runs_dropped,
            start_times=[r.get("start_ms") for r in runs],
        )
        return BenchmarkSummary(
            benchmark=key,
            scale=scale,
            target=spec.target_text,
            runs=list(runs),
            score=score,
            interrupted=interrupted_runs(self.aside(key)),
        )

    def write_summary(self, summaries: list[BenchmarkSummary], *, quietly: bool = False) -> None:
        """``summary.json`` on rank 0; ``quietly``: on the way out of a failed or interrupted run (that run's own
        error is the one to report)."""
        if not self.is_main:
            return
        try:
            write_summary(self.out, self.system, summaries)
        except ResultsError:
            if not quietly:
                raise

    def run(
        self,
        key: str,
        i: int,
        execute: Callable[..., RunOutcome],
        stopped: Callable[[dict[str, Any] | None], None],
    ) -> dict[str, Any]:
        """Run ``i`` of ``key`` (``execute(log=...)``), logged into a fresh partial file and stored as
        ``result_<i>.txt`` when it ends; its record for the summary.

        A failed run is stored (a result: aborted, not converged) and an interrupted one kept aside; either way
        ``stopped`` hears it first (with the failed run's record) and the error that goes up says where the log
        is. Any other error removes the partial file.
        """
        final = self.result(key, i)
        partial = self.results(key) / f".result_{i}.txt.{os.getpid()}-{secrets.token_hex(4)}.partial"
        log = RunLog(partial if self.is_main else None)
        try:
            outcome = execute(log=log)
            log.close()  # flushed and fsynced; a ResultsError when its last lines could not be written
        except RunInterrupted as e:
            _close_quietly(log)
            if self.is_main:
                with _sigterm_held():
                    kept = keep_interrupted(partial, self.aside(key), i, key)
                    stopped(None)
                what = getattr(e, "what", "interrupted")
                raise RunInterrupted(
                    f"{key}: run {i} {what}; logged as aborted in {kept}, not counted (earlier results "
                    "stay; the same command resumes the suite and redoes this run; summary.json and the "
                    "report list it as interrupted)"
                ) from None
            raise
        except RunFailed as e:
            # A started run that failed is a result: aborted, counted as not converged (MLPerf).
            if self.is_main:
                with _sigterm_held():
                    try:
                        log.close()
                        store(partial, final)
                    except TrainperfError:
                        partial.unlink(missing_ok=True)
                        raise
                    stopped(run_record(e.outcome, final))
                raise RunFailed(
                    f"{e}; logged as aborted in {final} and counted as a run that did not converge. Fix the "
                    "cause and run the same command: the suite resumes with the next run",
                    e.outcome,
                    e.exit_code,
                ) from e.__cause__
            raise
        except BaseException:
            _close_quietly(log)
            if self.is_main:
                partial.unlink(missing_ok=True)
            raise
        record = run_record(outcome, final)
        if self.is_main:
            store(partial, final)
            if outcome.pictures is not None:
                record["pictures"] = str(self.store_pictures(key, i, outcome.pictures))
        gc.collect()  # free the run's model and data before the next run builds its own
        return record

    def pictures(self, key: str) -> Path:
        return self.out / PICTURES / self.system / key

    def store_pictures(self, key: str, i: int, png: bytes) -> Path:
        """What run ``i``'s model drew at each evaluation (:meth:`Workload.pictures`), beside the results:
        ``<out>/pictures/<system>/<benchmark>/result_<i>.png``, written atomically."""
        path = self.pictures(key) / f"result_{i}.png"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, png)
        except OSError as e:
            raise ResultsError(f"cannot write {path}: {e.strerror or e}; choose another --out") from None
        return path


@contextmanager
def _sigterm_held() -> Iterator[None]:
    """SIGTERM ignored while rank 0 writes a stopped run's result and ``summary.json``, then the handler back.

    The run has already failed or been interrupted and its error goes up next, so nothing is lost by not hearing
    the signal; what it would cut short is the summary. Under torchrun it comes right after a rank dies (torchrun
    stops the survivors with SIGTERM, and with SIGKILL only 30 s later), racing the survivor that is saying what
    became of the run.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def check_out_folder(out: Path, system: str, scale: str, dry_run: bool = False, smoke: bool = False) -> None:
    """The output folder must be writable and, if it holds results, hold this system's, scale's and kind's.

    A folder holds timed runs, dry runs or smoke runs, never two kinds: a dry or smoke run is never resumed
    as a result, and a timed run never reads a smoke fixture.
    """
    kind = kind_of(dry_run, smoke)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=out, prefix=".probe", delete=True)
        probe.close()
    except OSError as e:
        raise ResultsError(f"output folder {out} is not writable ({e.strerror}); choose another with --out") from None
    meta_path = out / SUITE_META
    if not meta_path.exists():
        try:
            meta = {"system": system, "scale": scale, "kind": kind}
            atomic_write_text(meta_path, json.dumps(meta, indent=2) + "\n")
        except OSError as e:
            raise ResultsError(
                f"cannot write {meta_path}: {e.strerror or e}; free space or choose another --out"
            ) from None
        return
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
        _refuse_shared_lock_file(fd, lock)  # before it is locked or written: it may be another file's second name
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


def _refuse_shared_lock_file(fd: int, lock: Path) -> None:
    """A lock file that is not a plain file of one name (a hard link to another file: writing the holder's process
    id into it would truncate that file) is refused, untouched."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        what = f"has {st.st_nlink} names (hard links)" if stat.S_ISREG(st.st_mode) else "is not a plain file"
        raise ResultsError(
            f"{printable(str(lock))} {what}: trainperf writes its process id into its lock file, which would change "
            "every file that shares it; remove that name (the other files keep their contents) or use another --out"
        )


def _lock_holder(fd: int) -> str:
    try:
        pid = int(os.pread(fd, 32, 0).decode("ascii").strip())
    except (OSError, ValueError, UnicodeDecodeError):
        return ""
    return f" (process {pid})"


def remove_stale_partials(folder: Path) -> None:
    """Partial run logs that a killed suite left (the lock is held, so no suite is writing them)."""
    for p in folder.iterdir():
        if _PARTIAL.match(p.name) and (p.is_symlink() or p.is_file()):
            p.unlink(missing_ok=True)


def store(partial: Path, final: Path) -> None:
    try:
        replace_durably(partial, final)
    except OSError as e:
        partial.unlink(missing_ok=True)
        raise ResultsError(
            f"cannot store the finished run as {final}: {e.strerror or e}; free space (or choose "
            "another --out) and run the same command again: this run is redone"
        ) from None


def keep_interrupted(partial: Path, folder: Path, i: int, key: str) -> Path:
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
    for p in interrupted_logs(folder):
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


def _close_quietly(log: RunLog) -> None:
    """Close a run's log on the way out of a failed run (the run's own error is the one to report)."""
    try:
        log.close()
    except ResultsError:
        pass


def run_record(outcome: RunOutcome, path: Path) -> dict[str, Any]:
    rec = asdict(outcome)
    del rec["pictures"]  # stored as its own file (ResultFolder.store_pictures)
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
