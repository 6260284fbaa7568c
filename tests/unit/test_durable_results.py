"""Results survive concurrent suites, full disks and crashes: the output folder's lock, the run log's
creation and write errors, fsync around every rename, and names checked before anything is written."""

from __future__ import annotations

import errno
import os
import re
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import FakeWorkload

from trainperf import registry
from trainperf.cli import main
from trainperf.dist import DistContext
from trainperf.errors import ResultsError, UsageError
from trainperf.fileio import atomic_write_text
from trainperf.harness import mllog
from trainperf.harness.mllog import RunLog
from trainperf.harness.runner import RunObserver
from trainperf.harness.suite import LOCK_FILE, SuiteOptions, hold_out_folder, run_suite


@pytest.fixture(autouse=True)
def _fresh_fake():
    FakeWorkload.qualities = [0.5, 0.9]
    FakeWorkload.interrupt_at_step = None
    yield


def options(tmp_path: Path, **kw) -> SuiteOptions:
    base = dict(
        benchmarks=("resnet",), scale="mini", runs=1, out=tmp_path / "out", data_dir=tmp_path, system_name="test-system"
    )
    base.update(kw)
    return SuiteOptions(**base)


def result_dir(tmp_path: Path) -> Path:
    return tmp_path / "out" / "results" / "test-system" / "resnet"


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file's bytes, but the system description (rewritten by each suite, e.g. the CPU's clock)."""
    files = (p for p in sorted(folder.rglob("*")) if p.is_file() and p.parent.name != "systems")
    return {str(p.relative_to(folder)): p.read_bytes() for p in files}


# --- one suite at a time per output folder ------------------------------------------------------------------
def test_a_second_suite_on_the_same_folder_is_refused_while_the_first_runs(tmp_path, fake_registry):
    refused: list[ResultsError] = []

    def observer_for(key, i, n):  # called while the first suite holds the folder
        with pytest.raises(ResultsError) as err:
            run_suite(options(tmp_path, runs=2), DistContext())
        refused.append(err.value)
        return RunObserver()

    [summary] = run_suite(options(tmp_path, runs=2), DistContext(), observer_for=observer_for)
    assert len(refused) == 2 and [r["status"] for r in summary.runs] == ["success", "success"]
    text = str(refused[0])
    assert f"output folder {tmp_path / 'out'} is in use" in text and f"(process {os.getpid()})" in text
    assert "another trainperf run" in text and "another --out" in text
    [again] = run_suite(options(tmp_path, runs=2), DistContext())  # released when the suite ends
    assert [r["resumed"] for r in again.runs] == [True, True]


def test_a_folder_locked_by_another_process_is_refused_before_anything_is_written(tmp_path, fake_registry):
    out = tmp_path / "out"
    out.mkdir()
    holder = textwrap.dedent(
        f"""
        import fcntl, os, sys
        fd = os.open({str(out / LOCK_FILE)!r}, os.O_RDWR | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, b"%d\\n" % os.getpid())
        print("held", flush=True)
        sys.stdin.read()
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(ResultsError, match=rf"is in use: another trainperf run \(process {proc.pid}\)"):
            run_suite(options(tmp_path), DistContext())
        assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]  # no trainperf.json, systems/ or results/
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    run_suite(options(tmp_path), DistContext())  # the lock ends with its process
    assert (result_dir(tmp_path) / "result_0.txt").is_file()


def test_hold_out_folder_is_exclusive_within_one_process_too(tmp_path):
    with hold_out_folder(tmp_path / "out") as lock:
        assert lock == tmp_path / "out" / LOCK_FILE
        with pytest.raises(ResultsError, match="is in use"):
            with hold_out_folder(tmp_path / "out"):
                pass
    with hold_out_folder(tmp_path / "out"):
        pass


# --- run logs are created new, under a unique name, never through a link -------------------------------------
def test_a_run_log_is_never_an_existing_file_or_a_link(tmp_path):
    existing = tmp_path / "existing.txt"
    existing.write_text("a finished run\n")
    with pytest.raises(ResultsError, match="already exists"):
        RunLog(existing)
    assert existing.read_text() == "a finished run\n"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    for name, target in (("link.partial", victim), ("dangling.partial", tmp_path / "created-through-link")):
        (tmp_path / name).symlink_to(target)
        with pytest.raises(ResultsError, match=re.escape(str(tmp_path / name))):
            RunLog(tmp_path / name)
    assert victim.read_text() == "keep me\n" and not (tmp_path / "created-through-link").exists()


def test_partial_logs_have_unique_names_and_stale_ones_are_removed(tmp_path, fake_registry):
    folder = result_dir(tmp_path)
    folder.mkdir(parents=True)
    stale = [folder / ".result_0.txt.4242-deadbeef.partial", folder / ".result_1.txt.partial"]  # left by kills
    for p in stale:
        p.write_text(":::MLLOG half a run\n")
    seen: list[list[str]] = []

    def observer_for(key, i, n):
        seen.append(sorted(p.name for p in folder.iterdir() if p.name.endswith(".partial")))
        return RunObserver()

    run_suite(options(tmp_path, runs=2), DistContext(), observer_for=observer_for)
    pattern = re.compile(rf"^\.result_(\d)\.txt\.{os.getpid()}-[0-9a-f]{{8}}\.partial$")
    assert [len(names) for names in seen] == [1, 1]
    assert [pattern.match(names[0])[1] for names in seen] == ["0", "1"]
    assert sorted(p.name for p in folder.iterdir()) == ["result_0.txt", "result_1.txt"]


# --- a full disk stops the run at once ----------------------------------------------------------------
class _FullDisk:
    """A log file whose write (or flush) fails with ENOSPC at the first eval_accuracy line."""

    def __init__(self, real, fail_in: str, attempts: list[str]) -> None:
        self.real, self.fail_in, self.attempts, self.pending = real, fail_in, attempts, ""

    def write(self, text: str) -> int:
        self.attempts.append(text)
        self.pending += text
        if self.fail_in == "write":
            self._maybe_fail()
        return self.real.write(text)

    def flush(self) -> None:
        if self.fail_in == "flush":
            self._maybe_fail()
        self.real.flush()
        self.pending = ""

    def _maybe_fail(self) -> None:
        if '"key": "eval_accuracy"' in self.pending:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def fileno(self) -> int:
        return self.real.fileno()

    def close(self) -> None:
        self.real.close()


class _CountingWorkload(FakeWorkload):
    steps = 0

    def loss(self, model, batch):
        type(self).steps += 1
        return super().loss(model, batch)


@pytest.mark.parametrize("fail_in", ["write", "flush"])
def test_a_full_disk_stops_the_run_at_once_and_earlier_results_stay(tmp_path, fake_registry, monkeypatch, fail_in):
    run_suite(options(tmp_path), DistContext())
    before = snapshot(tmp_path / "out")
    attempts: list[str] = []
    real_open = mllog._open_log
    monkeypatch.setattr(mllog, "_open_log", lambda path: _FullDisk(real_open(path), fail_in, attempts))
    monkeypatch.setattr(registry, "workload_class", lambda key: _CountingWorkload)
    _CountingWorkload.steps = 0
    with pytest.raises(ResultsError) as err:
        run_suite(options(tmp_path, runs=2), DistContext())
    text = str(err.value)
    assert re.search(
        r"cannot write the run log .*/resnet/\.result_1\.txt\.[\w-]+\.partial: No space left on device", text
    )
    assert "free space" in text and "run the same command again" in text
    # stopped at the failed line: one epoch of 5 steps, not the 10 steps the run needs to reach its target;
    # nothing was written after the failed line (no complaint of mllog's, no run_stop)
    assert _CountingWorkload.steps == 5
    assert '"key": "eval_accuracy"' in attempts[-1] and not any('"run_stop"' in a for a in attempts)
    assert snapshot(tmp_path / "out") == before  # no partial file left, result_0 and the summary intact


# --- fsync before every rename, and the folder after ---------------------------------------------------------
@pytest.fixture
def fs_events(monkeypatch) -> list[tuple]:
    """(what, ...) for every fsync (of a 'file' or a 'dir', with its inode) and every os.replace, in order."""
    events: list[tuple] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        st = os.fstat(fd)
        events.append(("fsync", "dir" if stat.S_ISDIR(st.st_mode) else "file", st.st_ino))
        return real_fsync(fd)

    def replace(src, dst, **kw):
        events.append(("replace", os.stat(src).st_ino, Path(dst)))
        return real_replace(src, dst, **kw)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return events


def assert_durable_rename(events: list[tuple], final: Path) -> None:
    i = next(i for i, e in enumerate(events) if e[0] == "replace" and e[2] == final)
    inode = events[i][1]
    assert ("fsync", "file", inode) in events[:i], "the file is fsynced before it is renamed"
    assert ("fsync", "dir", final.parent.stat().st_ino) in events[i + 1 :], "its folder is fsynced after"


def test_atomic_write_fsyncs_the_file_before_the_rename_and_the_folder_after(tmp_path, fs_events):
    atomic_write_text(tmp_path / "summary.json", "{}\n")
    assert_durable_rename(fs_events, tmp_path / "summary.json")


def test_a_finished_run_is_fsynced_before_it_becomes_a_result_file(tmp_path, fake_registry, fs_events):
    run_suite(options(tmp_path), DistContext())
    assert_durable_rename(fs_events, result_dir(tmp_path) / "result_0.txt")
    assert_durable_rename(fs_events, tmp_path / "out" / "summary.json")


# --- names that become files and folders are checked before anything is written --------------------------
@pytest.mark.parametrize(
    "change, words",
    [
        ({"system_name": "../../x"}, "system name '../../x' is not a plain file name"),
        ({"system_name": ".hidden"}, "system name '.hidden'"),
        ({"system_name": "a/b"}, "system name 'a/b'"),
        ({"system_name": ""}, "system name ''"),
        ({"org": "../evil"}, "organization name '../evil' is not a plain folder name"),
        ({"org": "My Org"}, "organization name 'My Org'"),
    ],
)
def test_a_name_that_is_not_a_plain_file_name_is_refused_before_anything_is_written(
    tmp_path, fake_registry, change, words
):
    with pytest.raises(UsageError, match=re.escape(words)):
        run_suite(options(tmp_path, **change), DistContext())
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_cli_refuses_a_bad_system_name_before_writing(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", "resnet", "--out", str(out), "--system-name", "../../x"]) == 2
    assert "system name '../../x' is not a plain file name" in capsys.readouterr().err
    assert not out.exists() and not (tmp_path / "x").exists()
    assert main(["run", "resnet", "--out", str(out), "--org", "a/b"]) == 2
    assert "organization name 'a/b'" in capsys.readouterr().err and not out.exists()
