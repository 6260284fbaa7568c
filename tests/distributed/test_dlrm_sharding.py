"""dlrm's model-parallel tables: sharded training on 2 and 3 gloo ranks steps exactly like one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainperf.workloads.dlrm.sharding import assign_tables
from trainperf.workloads.dlrm.workload import FLAVOURS

pytestmark = [pytest.mark.distributed]
SCRIPT = Path(__file__).with_name("dlrm_steps.py")


def _steps(out: Path, nproc: int, scale: str) -> list[float]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    cmd = [str(SCRIPT), str(out), scale]
    if nproc > 1:
        cmd = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", *cmd]
    r = subprocess.run([sys.executable, *cmd], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["world_size"] == nproc
    return doc["logits"]


@pytest.mark.parametrize(("scale", "nproc"), [("mini", 2), ("mini", 3), ("reference", 2)])
def test_sharded_steps_equal_one_process(tmp_path, scale, nproc):
    one = _steps(tmp_path / "one.json", 1, scale)
    many = _steps(tmp_path / "many.json", nproc, scale)
    assert len(one) == 10 and len(set(one)) > 1
    assert many == pytest.approx(one, rel=1e-9, abs=1e-12)  # float64 (dlrm_steps.py): the sums reorder only


def test_tables_are_spread_by_rows():
    sizes = FLAVOURS["reference"].model.table_sizes
    owned = assign_tables(sizes, 8)
    assert sorted(f for t in owned for f in t) == list(range(26))
    rows = [sum(sizes[f] for f in t) for t in owned]
    assert max(rows) == max(sizes)  # the 8 largest tables (each about 40 M rows or less) land on 8 ranks
    assert assign_tables(sizes, 1) == [list(range(26))]
