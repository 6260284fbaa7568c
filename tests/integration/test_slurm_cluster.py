"""The script `trainperf slurm` writes, submitted to a real Slurm cluster (scripts/slurm_cluster.sh).

The cluster runs on this machine: two nodes where network namespaces can be made (root), else one. Where Slurm
cannot start at all the tests are skipped with the script's reason; with TRAINPERF_REQUIRE_SLURM=1 (CI) that
is a failure instead, so a cluster that stopped starting is never a silent pass.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainperf.cli import main
from trainperf.results import read_mllog

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "slurm_cluster.sh"
START_TIMEOUT_S = 900  # installing the Debian packages on a fresh machine included
JOB_TIMEOUT_S = 300  # a mini dlrm run is about 20 s on two nodes of the 2-core machine
FINISHED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL"}

pytestmark = [pytest.mark.slow, pytest.mark.distributed]


class Cluster:
    def __init__(self, directory: Path) -> None:
        self.env = {
            **os.environ,
            "SLURM_CONF": str(directory / "slurm.conf"),
            # the jobs run this checkout's trainperf with this interpreter (sbatch exports the environment)
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
        }
        self.nodes = len(self.run("sinfo", "-h", "-N", "-o", "%N").split())

    def run(self, *cmd: str, cwd: Path | None = None) -> str:
        r = subprocess.run(cmd, capture_output=True, text=True, env=self.env, cwd=cwd, timeout=60)
        assert r.returncode == 0, f"{' '.join(cmd)}: {r.stderr}"
        return r.stdout

    def job(self, job_id: str) -> dict[str, str]:
        line = self.run("scontrol", "show", "job", "-o", job_id)
        return dict(re.findall(r"(\w+)=(\S*)", line))

    def wait(self, job_id: str, out_file: Path) -> dict[str, str]:
        deadline = time.monotonic() + JOB_TIMEOUT_S
        while (job := self.job(job_id))["JobState"] not in FINISHED or self.run("squeue", "-h", "-j", job_id):
            if time.monotonic() > deadline:
                self.run("scancel", job_id)
                pytest.fail(f"job {job_id} still {job['JobState']} after {JOB_TIMEOUT_S}s:\n{_tail(out_file)}")
            time.sleep(0.5)
        return job


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:] if path.exists() else f"({path} not written)"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if not SCRIPT.exists():
        pytest.fail(f"{SCRIPT} is missing")
    directory = tmp_path_factory.mktemp("slurm")
    env = {**os.environ, "TRAINPERF_SLURM_DIR": str(directory)}
    r = subprocess.run(
        ["bash", str(SCRIPT), "start", "2"], capture_output=True, text=True, env=env, timeout=START_TIMEOUT_S
    )
    try:
        if r.returncode == 3:  # Slurm cannot start here: say why
            reason = (r.stderr.strip().splitlines() or ["no reason given"])[-1]
            if os.environ.get("TRAINPERF_REQUIRE_SLURM") == "1":
                pytest.fail(f"TRAINPERF_REQUIRE_SLURM=1 and {reason}")
            pytest.skip(reason)
        assert r.returncode == 0, r.stderr
        yield Cluster(directory)
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop"], env=env, timeout=120, capture_output=True)


SEED = 100003  # a calibration seed that reaches the target (dlrm's README), as in the mini dlrm end-to-end test


def _submit(cluster: Cluster, tmp_path: Path, data_dir: Path, *slurm_args: str, runs: int = 1) -> tuple[str, Path]:
    script = tmp_path / "job.sbatch"
    out = tmp_path / "results"
    run_args = ["--scale", "mini", "--runs", str(runs), "--out", str(out), "--seed", str(SEED)]
    run_args += ["--data-dir", str(data_dir)]
    assert main(["slurm", "dlrm", *slurm_args, "-o", str(script), "--", *run_args]) == 0
    job_id = cluster.run("sbatch", "--parsable", str(script), cwd=tmp_path).strip().split(";")[0]
    return job_id, out


def _value(records: list[dict], key: str):
    return next(rec["value"] for rec in records if rec["key"] == key)


def test_the_job_runs_on_every_node_and_writes_one_checked_result(cluster, tmp_path, data_dir, capsys):
    n = cluster.nodes
    job_id, out = _submit(cluster, tmp_path, data_dir, "--nodes", str(n), "--time", "10")
    job = cluster.wait(job_id, tmp_path / f"trainperf-dlrm-{job_id}.out")
    log = _tail(tmp_path / f"trainperf-dlrm-{job_id}.out")
    assert (job["JobState"], job["ExitCode"]) == ("COMPLETED", "0:0"), log
    assert job["NumNodes"] == str(n)
    [result] = out.glob("results/*/dlrm/result_*.txt")  # one result folder, one run
    [system] = out.glob("systems/*.json")
    assert result.parent.parent.name == system.stem and system.stem.endswith(f"_n{n}")
    assert json.loads(system.read_text())["number_of_nodes"] == str(n)
    lines = read_mllog(result)
    assert [e["key"] for e in lines].count("run_start") == 1  # the ranks agree: one clock, one run
    assert _value(lines, "trainperf_world_size") == n
    assert lines[-1]["key"] == "run_stop" and lines[-1]["metadata"]["status"] == "success"
    record = _value(lines, "trainperf_slurm_job")
    assert (record["job_id"], record["node_list"], record["nodes"]) == (job_id, job["NodeList"], str(n))
    capsys.readouterr()
    assert main(["check", str(result)]) == 0, capsys.readouterr()


def test_a_cancelled_job_keeps_its_run_aside_as_aborted(cluster, tmp_path, data_dir):
    job_id, out = _submit(cluster, tmp_path, data_dir, "--nodes", str(cluster.nodes), "--time", "10")
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while not any('"run_start"' in p.read_text(errors="replace") for p in out.glob("results/*/dlrm/.result_*")):
        assert time.monotonic() < deadline, _tail(tmp_path / f"trainperf-dlrm-{job_id}.out")
        assert cluster.job(job_id)["JobState"] in {"PENDING", "RUNNING", "CONFIGURING"}, cluster.job(job_id)
        time.sleep(0.2)
    cluster.run("scancel", job_id)  # mid-run: the clock has started
    job = cluster.wait(job_id, tmp_path / f"trainperf-dlrm-{job_id}.out")
    log = _tail(tmp_path / f"trainperf-dlrm-{job_id}.out")
    assert job["JobState"] == "CANCELLED"
    assert not list(out.glob("results/*/dlrm/result_*.txt")), log  # not a result: the run is redone
    [kept] = out.glob("interrupted/*/dlrm/result_0-*.txt")
    lines = read_mllog(kept)
    assert _value(lines, "trainperf_abort_reason") == "terminated (SIGTERM)"
    assert lines[-1]["key"] == "run_stop" and lines[-1]["metadata"]["status"] == "aborted"
    summary = json.loads((out / "summary.json").read_text())
    assert [r["reason"] for s in summary["benchmarks"] for r in s["interrupted"]] == ["terminated (SIGTERM)"], log


def test_an_array_gathers_one_run_per_task_in_one_folder(cluster, tmp_path, data_dir):
    job_id, out = _submit(cluster, tmp_path, data_dir, "--nodes", "1", "--array", runs=2)
    for task in (0, 1):
        job = cluster.wait(f"{job_id}_{task}", tmp_path / f"trainperf-dlrm-{job_id}_{task}.out")
        assert job["JobState"] == "COMPLETED", _tail(tmp_path / f"trainperf-dlrm-{job_id}_{task}.out")
    results = sorted(out.glob("results/*/dlrm/result_*.txt"))
    assert [p.name for p in results] == ["result_0.txt", "result_1.txt"]
    tasks = [_value(read_mllog(p), "trainperf_slurm_job") for p in results]
    assert [(t["array_job_id"], t["array_task_id"]) for t in tasks] == [(job_id, "0"), (job_id, "1")]
    assert [_value(read_mllog(p), "seed") for p in results] == [SEED, SEED + 1]  # run i of the suite
