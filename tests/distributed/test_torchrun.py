"""Two processes under torchrun on the CPU (gloo): DDP, a distributed sampler, rank-0 logging."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trainperf.results import read_mllog
from trainperf.rules.compliance import check_log

pytestmark = [pytest.mark.slow, pytest.mark.distributed]


def test_two_process_mini_resnet_run(tmp_path, data_dir):
    out = tmp_path / "out"
    r = subprocess.run(
        [sys.executable, "-m", "trainperf", "run", "resnet", "--nproc", "2", "--out", out, "--data-dir", data_dir],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    logs = list((out / "results").rglob("result_*.txt"))
    assert len(logs) == 1  # rank 0 alone writes
    records = {rec["key"]: rec for rec in read_mllog(logs[0])}
    assert records["trainperf_world_size"]["value"] == 2
    assert records["global_batch_size"]["value"] == 128  # 2 ranks x 64
    assert records["run_stop"]["metadata"]["status"] == "success"
    assert check_log(logs[0]).passed
