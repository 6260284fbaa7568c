"""How ``trainperf.launch`` tells a failed torchrun job: which rank's failure is the cause, and the exit code."""

from __future__ import annotations

import os
import signal

import pytest
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

from trainperf import launch


def _failed(*failures: tuple[int, int, int]) -> ChildFailedError:
    """A ``ChildFailedError`` whose ranks ended with (rank, exit code, timestamp); a negative code is a signal."""
    table = {}
    for rank, exitcode, timestamp in failures:
        f = ProcessFailure(local_rank=rank, pid=1000 + rank, exitcode=exitcode, error_file="/nonexistent")
        f.timestamp = timestamp  # torchrun stamps a failure in whole seconds when its poll sees it
        table[rank] = f
    return ChildFailedError("trainperf", table)


@pytest.mark.parametrize(
    ("failures", "code", "says"),
    [
        # a killed rank and its survivor's ProcessGroupFailed (exit 2) seen in the same poll: the kill is the cause
        (((0, 2, 100), (1, -9, 100)), 1, "rank 1 of the torchrun job was ended by SIGKILL"),
        # a killed rank, then the survivor stopped by torchrun's closing SIGTERM (kept for its bookkeeping)
        (((1, -9, 100), (0, -15, 100)), 1, "rank 1 of the torchrun job was ended by SIGKILL"),
        (((0, -15, 100), (1, -9, 100)), 1, "rank 1 of the torchrun job was ended by SIGKILL"),
        # a rank's own error first: its exit code, nothing added; torchrun's SIGTERM to the others is no cause,
        # nor a SIGKILL 30 s later to one that did not stop
        (((1, 2, 100), (0, -15, 100)), 2, ""),
        (((1, 2, 100), (0, -9, 131)), 2, ""),
        (((0, 2, 101), (1, 1, 100)), 1, ""),
        (((0, 2, 100),), 2, ""),
        # a rank ended by a SIGTERM that was not torchrun's
        (((0, -15, 100),), 1, "rank 0 of the torchrun job was ended by SIGTERM"),
    ],
)
def test_the_cause_of_a_failed_job(monkeypatch, capsys, failures, code, says):
    def run(_args):
        raise _failed(*failures)

    monkeypatch.setattr("torch.distributed.run.run", run)
    assert launch.main(["--standalone", "--nproc_per_node=2", "x.py"]) == code
    err = capsys.readouterr().err
    assert (says in err) if says else err == ""


@pytest.mark.parametrize("asked", [True, False])
def test_a_rank_tells_a_stopped_job_from_a_failed_rank(tmp_path, monkeypatch, asked):
    """SIGTERM to the job (kill, scancel) leaves the launcher's stop file: the run is kept aside as on one process;
    torchrun's own SIGTERM after another rank failed leaves none: the run fails (counted, aborted)."""
    from trainperf import dist
    from trainperf.errors import ProcessGroupFailed, Terminated

    stop_file = tmp_path / "stop"
    if asked:
        stop_file.touch()
    monkeypatch.setenv(dist.STOP_FILE_ENV, str(stop_file))
    monkeypatch.setattr(dist, "STOP_FILE_WAIT_S", 0.1)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        dist.stop_on_sigterm(dist.DistContext(rank=1, world_size=2))
        with pytest.raises(Terminated if asked else ProcessGroupFailed):
            os.kill(os.getpid(), signal.SIGTERM)
            signal.sigtimedwait([], 0.5)  # the handler runs in the main thread at the next bytecode
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_job_sent_sigterm_exits_without_a_traceback(monkeypatch):
    from torch.distributed.elastic.multiprocessing.api import SignalException

    def run(_args):
        raise SignalException("Process 1 got signal: 15", sigval=signal.SIGTERM)

    monkeypatch.setattr("torch.distributed.run.run", run)
    assert launch.main(["--standalone", "-m", "trainperf"]) == 143
