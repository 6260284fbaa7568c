"""benchmarks/peers.py on two workloads with two steps: the table and the JSON a user reads, and that the
Hugging Face peer trains the same objective as trainperf's BERT."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

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


def test_the_gpt_oss_peer_has_the_mini_decoders_sizes_and_trains_the_same_objective(peers):
    """transformers' GptOssForCausalLM built from the mini flavour: the same matrices as trainperf's decoder (its
    parameters differ by GPT-OSS's attention sinks and router and expert biases alone), the same window, and its own
    shifted loss equal to the next-token cross-entropy of its logits."""
    from trainperf.workloads.common.llm.model import Decoder
    from trainperf.workloads.gpt_oss_20b.model import FLAVOURS

    args = FLAVOURS["mini"]
    torch.manual_seed(0)
    hf = peers.hf_gpt_oss(args).eval()
    c = hf.config
    assert (c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads, c.head_dim) == (
        192, 4, 6, 2, 32,
    )  # fmt: skip
    assert (c.num_local_experts, c.num_experts_per_tok, c.intermediate_size, c.vocab_size) == (8, 2, 256, 4096)
    assert c.layer_types == ["sliding_attention", "full_attention"] * 2 and c._attn_implementation == "eager"
    assert c.sliding_window == 33  # transformers counts the position itself: trainperf's 32 before it
    extras = 4 * (6 + 8 + 8 * (2 * 256 + 192))  # per layer: sinks, router bias, experts' biases
    ours = sum(p.numel() for p in Decoder(args).parameters())
    assert sum(p.numel() for p in hf.parameters()) == ours + extras
    batch = torch.randint(0, 4096, (2, 17))
    with torch.no_grad():
        logits = hf(input_ids=batch[:, :-1]).logits
        expected = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
        assert peers.hf_causal_loss(hf, batch) == pytest.approx(float(expected), rel=1e-5)
