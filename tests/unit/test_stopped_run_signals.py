"""A stopped run's result and summary are written whole even when SIGTERM comes while they are written: under
torchrun it follows a dead rank within a poll, racing the surviving rank 0 that is saying what became of the run."""

from __future__ import annotations

import json
import os
import signal

import pytest

from trainperf.errors import ProcessGroupFailed, RunFailed, RunInterrupted
from trainperf.harness.result_folder import ResultFolder
from trainperf.harness.runner import RunOutcome


def _outcome() -> RunOutcome:
    return RunOutcome(
        benchmark="resnet", scale="mini", seed=1, status="aborted", reason="ProcessGroupFailed",
        minutes=0.1, unit="epochs", progress=0.5, quality=0.1,
    )  # fmt: skip


@pytest.fixture
def torchrun_sigterm():
    """The rank's SIGTERM handler as under torchrun: the signal raises (trainperf.dist.stop_on_sigterm)."""

    def stop(signum: int, frame: object) -> None:
        raise ProcessGroupFailed("rank 0 of 2: stopped by torchrun (SIGTERM)")

    previous = signal.signal(signal.SIGTERM, stop)
    yield stop
    signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize("stops", ["failed", "interrupted"])
def test_sigterm_while_the_summary_is_written_does_not_cut_it_short(tmp_path, torchrun_sigterm, stops):
    folder = ResultFolder(tmp_path, "sys", is_main=True)
    folder.prepare("resnet")

    def execute(log):
        log.event("run_start")
        if stops == "failed":
            raise RunFailed("resnet: the run failed (ProcessGroupFailed: peer gone)", _outcome())
        raise RunInterrupted("interrupted")

    def stopped(record):
        os.kill(os.getpid(), signal.SIGTERM)  # torchrun's SIGTERM, in the middle of the summary
        (tmp_path / "summary.json").write_text(json.dumps({"record": record is not None}))

    with pytest.raises(RunFailed if stops == "failed" else RunInterrupted):
        folder.run("resnet", 1, execute, stopped)
    assert json.loads((tmp_path / "summary.json").read_text()) == {"record": stops == "failed"}
    assert signal.getsignal(signal.SIGTERM) is torchrun_sigterm  # the rank hears the next one again
    if stops == "failed":
        assert folder.result("resnet", 1).exists()
    assert not list(folder.results("resnet").glob("*.partial"))
