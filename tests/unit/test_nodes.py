"""Node options of `trainperf run` (torchrun's c10d rendezvous) and `trainperf slurm`'s sbatch script."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from trainperf import nodes, slurm
from trainperf.cli import main
from trainperf.errors import UsageError


def test_one_node_stays_standalone():
    args = nodes.torchrun_node_args(nproc=2, nnodes=1, node_rank=None, rdzv_endpoint=None, rdzv_id=None)
    assert args == ["--standalone", "--nproc_per_node=2"]


def test_several_nodes_use_the_c10d_rendezvous():
    args = nodes.torchrun_node_args(nproc=4, nnodes=2, node_rank=1, rdzv_endpoint="node001:29500", rdzv_id="job7")
    assert args == [
        "--nnodes=2",
        "--node-rank=1",
        "--nproc_per_node=4",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=node001:29500",
        "--rdzv-id=job7",
    ]


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"nnodes": 1, "node_rank": 0}, "only mean something with --nnodes"),
        ({"nnodes": 2, "rdzv_endpoint": "h:1"}, "needs --node-rank"),
        ({"nnodes": 2, "node_rank": 0}, "needs --rdzv-endpoint"),
        ({"nnodes": 2, "node_rank": 2, "rdzv_endpoint": "h:1"}, "outside 0..1"),
        ({"nnodes": 2, "node_rank": 0, "rdzv_endpoint": "h"}, "HOST:PORT"),
        ({"nnodes": 2, "node_rank": 0, "rdzv_endpoint": "h:70000"}, "HOST:PORT"),
        ({"nnodes": 2, "node_rank": 0, "rdzv_endpoint": "h:1", "rdzv_id": "a b"}, "--rdzv-id"),
        ({"nnodes": 0}, "--nnodes must be at least 1"),
    ],
)
def test_inconsistent_node_options_are_refused(kwargs, words):
    full = {"nproc": 1, "nnodes": 1, "node_rank": None, "rdzv_endpoint": None, "rdzv_id": None, **kwargs}
    with pytest.raises(UsageError, match=words):
        nodes.torchrun_node_args(**full)


def test_run_refuses_a_node_rank_without_nodes_before_starting(tmp_path, capsys):
    code = main(["run", "resnet", "--node-rank", "1", "--out", str(tmp_path / "out")])
    assert code == 2 and "--nnodes" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_node_of_a_process_comes_from_torchrun(monkeypatch):
    monkeypatch.delenv("GROUP_WORLD_SIZE", raising=False)
    monkeypatch.delenv("GROUP_RANK", raising=False)
    assert (nodes.node_count(), nodes.node_rank()) == (1, 0)
    monkeypatch.setenv("GROUP_WORLD_SIZE", "4")
    monkeypatch.setenv("GROUP_RANK", "3")
    assert (nodes.node_count(), nodes.node_rank()) == (4, 3)


def _script(tmp_path, *extra: str) -> str:
    path = tmp_path / "job.sbatch"
    assert main(["slurm", "resnet", "--nodes", "4", "--gpus-per-node", "8", "-o", str(path), *extra]) == 0
    return path.read_text()


def test_sbatch_script_launches_one_agent_per_node(tmp_path):
    text = _script(tmp_path, "--time", "01:00:00", "--", "--scale", "mini", "--out", "res dir", "--seed", "3")
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    for directive in ("--nodes=4", "--ntasks-per-node=1", "--gpus-per-node=8", "--time=01:00:00"):
        assert f"#SBATCH {directive}" in lines
    assert 'nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST")' in lines
    [srun] = [line for line in lines if line.startswith("srun ")]
    assert srun.startswith("srun --nodes=4 --ntasks-per-node=1 ")
    assert "trainperf run resnet --scale mini --out" in srun and "--seed 3" in srun
    assert "--nnodes 4 --nproc 8" in srun  # one process per GPU
    assert '--node-rank "$SLURM_NODEID"' in srun and '--rdzv-endpoint "$TRAINPERF_RDZV_ENDPOINT"' in srun
    assert 'TRAINPERF_RDZV_ENDPOINT="$first_node:29500"' in text


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_accepts_the_script_and_each_node_runs_the_same_command(tmp_path):
    text = _script(tmp_path, "--", "--out", "it's here", "--seed", "5")
    path = tmp_path / "job.sbatch"
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
    # run it with fake Slurm commands: srun runs its command once per node with that node's SLURM_NODEID
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "scontrol").write_text("#!/bin/bash\nprintf 'gpu17\\ngpu18\\ngpu19\\ngpu20\\n'\n")
    (fake / "srun").write_text(
        '#!/bin/bash\nwhile [[ $1 == --* ]]; do shift; done\nfor n in 0 1 2 3; do SLURM_NODEID=$n "$@"; done\n'
    )
    (fake / "trainperf").write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    for f in fake.iterdir():
        f.chmod(0o755)
    env = {"PATH": f"{fake}:/usr/bin:/bin", "SLURM_JOB_NODELIST": "gpu[17-20]", "SLURM_JOB_ID": "42"}
    r = subprocess.run(["bash", str(path)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    runs = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(runs) == 4
    for n, argv in enumerate(runs):
        assert argv[:6] == ["run", "resnet", "--out", "it's here", "--seed", "5"]
        tail = argv[6:]
        assert tail[tail.index("--node-rank") + 1] == str(n)
        assert tail[tail.index("--rdzv-endpoint") + 1] == "gpu17:29500"
        assert tail[tail.index("--rdzv-id") + 1] == "trainperf-42"
    assert text.count("srun ") == 1  # one step: srun starts every node


def test_slurm_writes_the_system_for_n_nodes(tmp_path, capsys):
    _script(tmp_path)  # exit code 0: the official system_desc_checker found no problem
    assert "problems" not in capsys.readouterr().out
    desc = json.loads((tmp_path / "job.sbatch.system.json").read_text())
    assert desc["number_of_nodes"] == "4" and desc["accelerators_per_node"] == "8"
    assert desc["system_name"].endswith("_n4")


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--", "--nnodes", "2"], "set by the sbatch script"),
        (["--", "--node-rank=1"], "set by the sbatch script"),
        (["--", "--runs", "x"], "--runs"),  # the run's own parser refuses it
        (["--nproc-per-node", "9"], "more than --gpus-per-node"),
        (["--time", "soon"], "--time"),
    ],
)
def test_slurm_refuses_bad_options_before_writing(tmp_path, capsys, extra, words):
    path = tmp_path / "job.sbatch"
    code = main(["slurm", "resnet", "--nodes", "2", "--gpus-per-node", "8", "-o", str(path), *extra])
    assert code == 2 and words in capsys.readouterr().err
    assert not path.exists()


def test_render_refuses_bad_numbers():
    with pytest.raises(UsageError, match="--nodes"):
        slurm.render(benchmarks=["resnet"], run_args=[], nodes=0, nproc_per_node=1, gpus_per_node=0)
    with pytest.raises(UsageError, match="--port"):
        slurm.render(benchmarks=["resnet"], run_args=[], nodes=2, nproc_per_node=1, gpus_per_node=0, port=0)


def test_one_node_job_runs_standalone_without_a_rendezvous(tmp_path):
    path = tmp_path / "job.sbatch"
    assert main(["slurm", "dlrm", "--nodes", "1", "-o", str(path)]) == 0
    [srun] = [line for line in path.read_text().splitlines() if line.startswith("srun ")]
    assert "--nnodes 1" in srun and "--node-rank" not in srun and "--rdzv-endpoint" not in srun


def test_slurm_options_of_a_cluster_user_are_rendered(tmp_path):
    text = _script(
        tmp_path,
        *("--dependency", "afterok:1234", "--container-image", "nvcr.io#nvidia/pytorch:24.09-py3"),
        *("--container-mounts", "/data:/data,/results:/results"),
    )
    lines = text.splitlines()
    assert "#SBATCH --dependency=afterok:1234" in lines
    [srun] = [line for line in lines if line.startswith("srun ")]
    assert "--container-image=nvcr.io#nvidia/pytorch:24.09-py3" in srun
    assert "--container-mounts=/data:/data,/results:/results" in srun
    assert subprocess.run(["bash", "-n", str(tmp_path / "job.sbatch")]).returncode == 0


def test_an_array_has_one_task_per_run_each_resuming_the_runs_before_it(tmp_path):
    text = _script(tmp_path, "--array", "--", "--runs", "5")
    assert "#SBATCH --array=0-4%1" in text.splitlines()  # one task at a time, into the same folder
    assert "#SBATCH --output=%x-%A_%a.out" in text.splitlines()
    path = tmp_path / "job.sbatch"
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "scontrol").write_text("#!/bin/bash\nprintf 'gpu1\\n'\n")
    (fake / "srun").write_text('#!/bin/bash\nwhile [[ $1 == --* ]]; do shift; done\nSLURM_NODEID=0 "$@"\n')
    (fake / "trainperf").write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    for f in fake.iterdir():
        f.chmod(0o755)
    env = {
        "PATH": f"{fake}:/usr/bin:/bin",
        "SLURM_JOB_NODELIST": "gpu1",
        "SLURM_JOB_ID": "9",
        "SLURM_ARRAY_TASK_ID": "3",
    }
    r = subprocess.run(["bash", str(path)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    argv = json.loads(r.stdout)
    assert argv[len(argv) - 1 - argv[::-1].index("--runs") + 1] == "4"  # the last --runs wins: task 3 adds run 3


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--dependency", "after ok"], "--dependency"),
        (["--container-image", "img; rm -rf /"], "--container-image"),
        (["--container-mounts", "/a:/a"], "needs --container-image"),
        (["--array", "--", "--runs", "0"], "--runs"),
    ],
)
def test_slurm_refuses_bad_cluster_options(tmp_path, capsys, extra, words):
    path = tmp_path / "job.sbatch"
    assert main(["slurm", "dlrm", "--nodes", "2", "-o", str(path), *extra]) == 2
    assert words in capsys.readouterr().err and not path.exists()


def test_the_slurm_job_of_a_run_comes_from_its_variables():
    assert nodes.slurm_job({}, sacct=False) is None
    env = {
        "SLURM_JOB_ID": "12",
        "SLURM_JOB_NODELIST": "node[1-2]",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_ARRAY_TASK_ID": "x y",
    }
    job = nodes.slurm_job(env, sacct=False)
    assert job == {
        "job_id": "12",
        "node_list": "node[1-2]",
        "nodes": "2",
        "source": "environment",
    }  # bad value left out


def test_sacct_fills_what_the_variables_lack(tmp_path, monkeypatch):
    fake = tmp_path / "sacct"
    fake.write_text("#!/bin/bash\necho '12|node[1-2]|gpu|proj7|clusterA'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    job = nodes.slurm_job({"SLURM_JOB_ID": "12", "SLURM_JOB_PARTITION": "main"})
    assert job == {
        "job_id": "12",
        "partition": "main",
        "node_list": "node[1-2]",
        "account": "proj7",
        "cluster": "clusterA",
        "source": "sacct",
    }
