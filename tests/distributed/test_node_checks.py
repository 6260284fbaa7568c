"""Two processes posing as two nodes (gloo, one machine): the clock skew between nodes is measured, logged and
bounded; the nodes' energy readings are summed with each host counted once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.distributed]
SCRIPT = Path(__file__).with_name("node_checks.py")


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("nodes") / "found.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(SCRIPT), str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return json.loads(out.read_text())


def test_one_clock_shows_no_skew(found):
    value, meta = found["same_clock"]
    assert [n["node"] for n in meta["nodes"]] == [0, 1]
    assert meta["nodes"][0]["offset_ms"] == 0.0
    assert abs(meta["nodes"][1]["offset_ms"]) <= meta["nodes"][1]["uncertainty_ms"] + 0.01  # the truth is 0
    assert value < 50 and meta["bound_ms"] == 100.0


def test_a_clock_500_ms_ahead_is_measured_and_refused(found):
    value, meta = found["shifted"]
    node1 = meta["nodes"][1]
    assert abs(node1["offset_ms"] - 500.0) <= node1["uncertainty_ms"] + 0.01
    assert value > 100.0
    assert "node 1" in found["refused"] and "100 ms" in found["refused"] and "chrony" in found["refused"]


def test_energy_of_two_hosts_is_their_sum(found):
    rec = found["two_hosts"]
    assert rec["energy_joules"] == pytest.approx(140.0)
    assert len(rec["energy_sources"]) == 2 and "2 host(s) metered by 2" in rec["energy_note"]


def test_two_agents_on_one_host_count_it_once(found):
    rec = found["one_host"]
    assert rec["energy_joules"] == pytest.approx(100.0)  # rank 0's reading of host-0, not 100 + 40
    assert "1 host(s) metered by 2" in rec["energy_note"]


def test_a_host_not_measured_leaves_the_job_not_measured(found):
    rec = found["unmeasured"]
    assert rec["energy_joules"] is None
    assert rec["energy_note"].startswith("not measured") and "no RAPL here" in rec["energy_note"]
