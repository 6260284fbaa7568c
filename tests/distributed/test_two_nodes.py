"""Two "nodes" on one machine: two torchrun agents meet on loopback (c10d rendezvous, gloo) and train mini resnet to
its target; the log passes the official checker and carries the clock skew between the nodes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from trainperf.results import read_mllog
from trainperf.rules.compliance import check_log

pytestmark = [pytest.mark.slow, pytest.mark.distributed]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_nodes_on_loopback_reach_the_target(tmp_path, data_dir):
    endpoint = f"127.0.0.1:{_free_port()}"
    out = tmp_path / "out"

    def node(rank: int) -> subprocess.Popen:
        return subprocess.Popen(
            # a calibration seed that reached the target (README), so the test does not depend on a drawn seed
            [sys.executable, "-m", "trainperf", "run", "resnet", "--seed", "100010", "--out", str(out)]
            + ["--data-dir", str(data_dir), "--nnodes", "2", "--node-rank", str(rank), "--rdzv-endpoint", endpoint],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    agents = [node(0), node(1)]
    try:
        outputs = [a.communicate(timeout=600)[0] for a in agents]
    finally:
        for a in agents:
            a.kill()
    assert [a.returncode for a in agents] == [0, 0], "\n".join(o[-3000:] for o in outputs)
    [log] = list((out / "results").rglob("result_*.txt"))  # rank 0 alone writes
    assert log.parent.parent.name.endswith("_n2")  # the system: two machines like this one
    records = {rec["key"]: rec for rec in read_mllog(log)}
    assert records["trainperf_world_size"]["value"] == 2
    assert records["run_stop"]["metadata"]["status"] == "success"
    skew = records["trainperf_clock_skew_ms"]
    assert [n["node"] for n in skew["metadata"]["nodes"]] == [0, 1]
    assert 0 <= skew["value"] <= skew["metadata"]["bound_ms"]  # one machine, one clock: well within the bound
    res = check_log(log)
    assert res.passed, res.problems
    [system] = list((out / "systems").glob("*.json"))
    assert json.loads(system.read_text())["number_of_nodes"] == "2"
