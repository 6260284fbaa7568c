"""A rank that leaves the process group stops the group's threads: a gloo thread still running at exit could end
the rank in ``std::terminate`` after its work was done (seen as a rare SIGABRT of rank 0 in CI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.distributed]
SCRIPT = Path(__file__).with_name("shutdown_threads.py")


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads thread names from /proc")
def test_leaving_the_group_stops_its_gloo_threads(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        str(SCRIPT),
        str(tmp_path),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for rank in (0, 1):
        names = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert not [n for n in names if "gloo" in n], f"rank {rank} still runs {names} after leaving the group"
