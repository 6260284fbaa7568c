"""A rank killed mid-run under torchrun (two gloo ranks): the job ends within seconds, torchrun does not restart it,
the run in progress is logged aborted and counted as not converged, earlier results stay, and the output folder is
free for the next run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from untrusted import ORG, SYSTEM, write_log

import trainperf
from trainperf import dist, registry, seeds
from trainperf.contract.switches import Switches
from trainperf.harness.suite import hold_out_folder
from trainperf.results import parse_run

pytestmark = [pytest.mark.slow, pytest.mark.distributed]
START_TIMEOUT_S = 240  # three Python processes import torch on two shared cores
END_WITHIN_S = 30  # torchrun notices a dead worker within 0.1 s; the survivor stops at once


def _rank(pid: int, rank: str) -> psutil.Process | None:
    """The torchrun worker of ``rank`` under the process ``pid``."""
    for child in psutil.Process(pid).children(recursive=True):
        try:
            env = child.environ()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if env.get("RANK") == rank and "TORCHELASTIC_RUN_ID" in env:
            return child
    return None


def test_a_killed_rank_ends_the_job_and_keeps_earlier_results(tmp_path, data_dir):
    out = tmp_path / "out"
    results = out / "results" / SYSTEM / "resnet"
    # a finished earlier run of this system, made the way this command makes runs: resumed, not redone
    spec = registry.get_spec("resnet", "mini")
    made_here = {
        "trainperf_dry_run": False,
        "trainperf_smoke": False,
        "trainperf_overrides": {},
        "trainperf_target": spec.target_text,
        "trainperf_code": trainperf.code_hash(),
        "trainperf_seed_source": seeds.SOURCE_SYSTEM,
        "trainperf_precision": "auto",
        **Switches().as_logged(),  # no optimization switch
    }
    earlier = write_log(results / "result_0.txt", made_here)
    (out / "trainperf.json").write_text(json.dumps({"system": SYSTEM, "scale": "mini"}))
    before = earlier.read_bytes()
    cmd = [sys.executable, "-m", "trainperf", "run", "resnet", "--runs", "2", "--nproc", "2", "--out", str(out)]
    cmd += ["--system-name", SYSTEM, "--org", ORG, "--data-dir", str(data_dir), "--quiet"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PET_MAX_RESTARTS": "3"}  # the CLI's --max-restarts=0 wins
    job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and job.poll() is None:  # wait for run 1 to be on the clock
            partials = list(results.glob(".result_1.txt.*.partial"))
            if partials and "run_start" in partials[0].read_text(errors="replace"):
                break
            time.sleep(0.05)
        assert job.poll() is None, job.communicate()[0].decode(errors="replace")[-3000:]
        victim = _rank(job.pid, "1")
        assert victim is not None, "no rank 1 under torchrun"
        victim.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        output, _ = job.communicate(timeout=END_WITHIN_S + 30)
        ended = time.monotonic() - killed
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    text = output.decode(errors="replace")
    assert ended < END_WITHIN_S, text[-3000:]
    assert job.returncode == 1, text[-3000:]  # torchrun's exit code for a failed job
    assert not psutil.pid_exists(victim.pid) or victim.status() == psutil.STATUS_ZOMBIE
    assert "rank 0 of 2: " in text and "earlier results stay" in text, text[-3000:]  # the survivor's clear error
    assert "rank 1 of the torchrun job was ended by SIGKILL" in text and "Traceback" not in text, text[-3000:]
    assert "will restart worker group" not in text  # torchrun's words when it restarts
    # run 1 had started: it is a result, aborted, with its reason; no partial is left; the earlier run is untouched
    assert sorted(p.name for p in results.iterdir()) == ["result_0.txt", "result_1.txt"]
    failed = parse_run(results / "result_1.txt")
    assert failed.status == "aborted" and "ProcessGroupFailed" in (failed.abort_reason or ""), failed.abort_reason
    assert earlier.read_bytes() == before and parse_run(earlier).success
    summary = json.loads((out / "summary.json").read_text())["benchmarks"][0]
    assert [r["status"] for r in summary["runs"]] == ["success", "aborted"]
    with hold_out_folder(out):  # the lock went with the job: the same command can resume at once
        pass


def test_a_job_that_ends_well_exits_0_through_the_launcher(tmp_path):
    """The launcher (trainperf/launch.py) is torchrun itself when nothing fails: a two-rank dry run."""
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "trainperf",
        "run",
        "resnet",
        "--dry-run",
        "--nproc",
        "2",
        "--out",
        str(out),
        "--quiet",
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=START_TIMEOUT_S)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert len(list((out / "results").rglob("result_0.txt"))) == 1


@pytest.mark.parametrize(
    ("rank1", "code", "says"),
    [
        ("os.kill(os.getpid(), signal.SIGKILL)", 1, "rank 1 of the torchrun job was ended by SIGKILL"),
        ("sys.exit(2)", 2, ""),  # a rank's own error: it printed it, the launcher passes its exit code on
    ],
)
def test_the_launcher_tells_a_failed_job_in_one_line(tmp_path, rank1, code, says):
    """Two tiny workers (no training): rank 1 fails at once, rank 0 would wait a minute; torchrun ends both."""
    script = tmp_path / "worker.py"
    script.write_text(f"import os, signal, sys, time\nif os.environ['RANK'] == '1':\n    {rank1}\ntime.sleep(60)\n")
    cmd = [sys.executable, "-m", "trainperf.launch", "--standalone", "--nproc_per_node=2", "--max-restarts=0"]
    t0 = time.monotonic()
    r = subprocess.run([*cmd, str(script)], capture_output=True, text=True, timeout=120)
    assert time.monotonic() - t0 < 45  # rank 0 was stopped, not waited for
    assert r.returncode == code, r.stderr[-3000:]
    assert "Traceback" not in r.stderr and says in r.stderr, r.stderr[-3000:]


def test_torchrun_is_told_not_to_restart(monkeypatch):
    """A restarted worker group would redo the run with a new clock; torchrun also reads PET_MAX_RESTARTS."""
    from trainperf import cli

    seen = {}

    class FakeLauncher:
        def __init__(self, cmd, env):
            seen["cmd"], seen["env"] = cmd, env

        def wait(self, timeout=None):
            return 0

    monkeypatch.setattr(sys, "argv", ["trainperf", "run", "resnet", "--nproc", "2"])
    monkeypatch.setattr(subprocess, "Popen", FakeLauncher)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        assert cli._relaunch_with_torchrun(2, ["--standalone"], dist.STOP_FILE_ENV) == 0
    finally:
        signal.signal(signal.SIGTERM, previous)  # the launcher forwards SIGTERM to torchrun while it waits
    assert "--max-restarts=0" in seen["cmd"] and "--nproc" not in seen["cmd"] and "--standalone" in seen["cmd"]
    assert seen["env"][dist.STOP_FILE_ENV]  # where the ranks look for a SIGTERM sent to the job itself


def test_the_collective_timeout_comes_from_the_specs_or_the_environment(monkeypatch):
    from trainperf import dist
    from trainperf.errors import UsageError

    monkeypatch.delenv(dist.TIMEOUT_ENV, raising=False)
    assert dist.collective_timeout_s(1800.0) == 1800.0
    monkeypatch.setenv(dist.TIMEOUT_ENV, "45")
    assert dist.collective_timeout_s(1800.0) == 45.0
    for bad in ("0", "-3", "nan", "inf", "soon"):
        monkeypatch.setenv(dist.TIMEOUT_ENV, bad)
        with pytest.raises(UsageError, match=dist.TIMEOUT_ENV):
            dist.collective_timeout_s(1800.0)


def test_a_collective_that_lost_its_peer_is_told_apart_from_a_bug():
    from trainperf import dist

    lost = RuntimeError("[../third_party/gloo/gloo/transport/tcp/pair.cc:545] Read error: Connection reset by peer")
    assert dist.is_peer_failure(lost)
    assert not dist.is_peer_failure(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    from trainperf.errors import RunFailed

    try:  # what the runner raises when a collective fails mid-run: the peer's loss is its cause
        raise RunFailed("resnet: the run failed", None, 1) from lost
    except RunFailed as wrapped:
        assert dist.is_peer_failure(wrapped)
    try:
        raise RunFailed("resnet: the run failed", None, 1) from ValueError("a bug")
    except RunFailed as wrapped:
        assert not dist.is_peer_failure(wrapped)
    message = str(dist.peer_failure(dist.DistContext(rank=1, world_size=2), lost, 60.0))
    assert message.startswith("rank 1 of 2: a collective failed (") and "60 s collective timeout" in message
    assert "run the same command to resume" in message
