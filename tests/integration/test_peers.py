"""benchmarks/peers.py on two workloads with two steps: the table and the JSON a user reads, and that the
Hugging Face peer trains the same objective as trainperf's BERT."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def peers():
    spec = importlib.util.spec_from_file_location("peers", ROOT / "benchmarks" / "peers.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["peers"] = module  # its dataclass looks its module up while the file runs
    spec.loader.exec_module(module)
    yield module
    del sys.modules["peers"]


def test_peers_table_and_json(peers, data_dir, tmp_path, capsys):
    out = tmp_path / "peers.json"
    assert peers.main(["dlrm", "bert", "--steps", "2", "--repeats", "1", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["repeats"] == 1 and list(doc["workloads"]) == ["dlrm", "bert"]
    table = capsys.readouterr().out.splitlines()
    assert "median of 1" in table[0] and table[1].split()[:5] == ["workload", "unit", "trainperf", "peer", "ratio"]
    for key, unit in (("dlrm", "samples/s"), ("bert", "tokens/s")):
        r = doc["workloads"][key]
        assert r["unit"] == unit and r["steps"] == 2 and r["batch"] and r["peer_name"]
        for side in ("trainperf", "peer"):
            assert len(r[side]["runs"]) == 1 and r[side]["median"] == r[side]["runs"][0] > 0
        assert r["ratio"] == pytest.approx(r["trainperf"]["median"] / r["peer"]["median"])
        [row] = [line for line in table if line.startswith(key + " ")]
        assert row.split()[1:5] == [
            unit,
            f"{r['trainperf']['median']:.1f}",
            f"{r['peer']['median']:.1f}",
            f"{r['ratio']:.2f}",
        ]


def test_unknown_benchmark_is_refused(peers, capsys):
    with pytest.raises(SystemExit) as e:
        peers.main(["resnet", "nope"])
    assert e.value.code == 2 and "unknown benchmark 'nope'" in capsys.readouterr().err


def test_hugging_face_peer_trains_the_same_loss(peers):
    from trainperf import registry
    from trainperf.dist import DistContext
    from trainperf.spec import RunConfig
    from trainperf.workloads.bert.model import pretraining_loss

    spec, recipe = registry.get_spec("bert", "mini"), registry.default_recipe("bert", "mini")
    w = registry.workload_class("bert")(
        spec, recipe, RunConfig(seed=3, dry_run=True), data_dir=ROOT, dist=DistContext()
    )
    batch = w.synthetic_batch()
    batch["masked_lm_positions"][:, -2:] = 0  # padded prediction slots count in neither loss
    torch.manual_seed(0)
    model = peers.HuggingFaceBert().eval()
    with torch.no_grad():
        assert peers.hf_loss(model, batch) == pytest.approx(float(pretraining_loss(model, batch)), rel=1e-5)
