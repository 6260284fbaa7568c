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


def _as_transformers(ours: dict[str, torch.Tensor], args) -> dict[str, torch.Tensor]:
    """trainperf's decoder tensors under the names and layout of transformers' DeepseekV3ForCausalLM: the checkpoint's
    (deepseekv3_671b's ``to_reference``, DeepSeek-V3's Hugging Face layout), each layer's experts stacked as
    transformers 5 keeps them (gate and up rows concatenated)."""
    from trainperf.workloads.deepseekv3_671b.checkpoint import to_reference

    named = to_reference(ours, args)
    out = {n: t for n, t in named.items() if ".mlp.experts." not in n}
    for i in range(args.dense_layers, args.n_layers):
        p, e = f"model.layers.{i}.mlp.experts.", range(args.moe.n_experts)
        out[p + "gate_up_proj"] = torch.stack(
            [torch.cat([named[f"{p}{j}.{w}_proj.weight"] for w in ("gate", "up")]) for j in e]
        )
        out[p + "down_proj"] = torch.stack([named[f"{p}{j}.down_proj.weight"] for j in e])
    return out


def test_the_deepseek_peer_has_the_mini_decoders_sizes_and_computes_the_same_function(peers):
    """transformers' DeepseekV3ForCausalLM built from the mini flavour: the same sizes and parameter count as
    trainperf's decoder; given trainperf's weights (a group scored by its 2 best experts, transformers' fixed rule, so
    that both routers choose alike; the experts' biases set), the same logits; its own loss the next-token
    cross-entropy of its logits."""
    import dataclasses

    from trainperf.workloads.common.llm.model import Decoder
    from trainperf.workloads.deepseekv3_671b.model import FLAVOURS

    args = FLAVOURS["mini"]
    torch.manual_seed(0)
    hf = peers.hf_deepseek(args)
    c = hf.config
    assert (c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.q_lora_rank, c.kv_lora_rank) == (
        192, 4, 6, 96, 64,
    )  # fmt: skip
    assert (c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim, c.first_k_dense_replace, c.intermediate_size) == (
        32, 16, 32, 1, 512,
    )  # fmt: skip
    assert (c.n_routed_experts, c.num_experts_per_tok, c.moe_intermediate_size, c.n_shared_experts) == (8, 2, 128, 1)
    assert (c.n_group, c.topk_group, c.routed_scaling_factor, c.norm_topk_prob, c.vocab_size) == (4, 2, 2.5, True, 4096)
    assert c.rope_parameters["rope_theta"] == 10_000.0 and c.rms_norm_eps == 1e-6 and not c.tie_word_embeddings
    ours = sum(p.numel() for p in Decoder(args).parameters())
    assert sum(p.numel() for p in hf.parameters()) == ours == 4_356_928  # the README's count

    moe = dataclasses.replace(args.moe, top_k=4)  # 4 of 8 experts, 2 of 4 groups: a group scored by its best 2
    same_rule = dataclasses.replace(args, moe=moe, n_layers=2)
    torch.manual_seed(1)
    decoder = Decoder(same_rule).eval()
    decoder.layers[1].feed_forward.router.expert_bias.copy_(torch.randn(8) * 0.1)
    hf = peers.hf_deepseek(same_rule).eval()
    hf.load_state_dict(_as_transformers(decoder.state_dict(), same_rule))  # strict: every tensor, none left over
    batch = torch.randint(0, 4096, (2, 33))
    with torch.no_grad():
        logits = hf(input_ids=batch[:, :-1]).logits
        torch.testing.assert_close(logits, decoder(batch[:, :-1]), rtol=1e-4, atol=1e-4)
        expected = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
        assert peers.hf_causal_loss(hf, batch) == pytest.approx(float(expected), rel=1e-5)


def test_a_decoder_transformers_deepseek_cannot_express_is_refused(peers):
    from trainperf.workloads.deepseekv3_671b.model import FLAVOURS as DEEPSEEK
    from trainperf.workloads.gpt_oss_20b.model import FLAVOURS as GPT_OSS

    deepseek_config = sys.modules["peers_llm"].deepseek_config
    with pytest.raises(ValueError, match="no multi-head latent attention .*softmax scores .*no shared expert"):
        deepseek_config(GPT_OSS["mini"])
    with pytest.raises(ValueError, match="1 multi-token prediction layer"):
        deepseek_config(DEEPSEEK["671B"])


def test_the_deepseek_row(peers, data_dir, tmp_path, capsys):
    """deepseekv3_671b's row: trainperf's mini step (its starting checkpoint loaded) beside transformers' DeepSeek-V3
    of the same parameter count, in tokens/s."""
    out = tmp_path / "peers.json"
    assert peers.main(["deepseekv3_671b", "--steps", "2", "--repeats", "1", "--json", str(out)]) == 0
    r = json.loads(out.read_text())["workloads"]["deepseekv3_671b"]
    assert r["unit"] == "tokens/s" and r["batch"] == "32 x 128 tokens" and "DeepseekV3ForCausalLM" in r["peer_name"]
    assert r["note"] == "parameters: trainperf 4,356,928, peer 4,356,928"
    assert r["trainperf"]["median"] > 0 and r["peer"]["median"] > 0
    [row] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("deepseekv3_671b ")]
    assert row.split()[1:5] == [
        "tokens/s",
        f"{r['trainperf']['median']:.1f}",
        f"{r['peer']['median']:.1f}",
        f"{r['ratio']:.2f}",
    ]


def test_the_flux_peer_has_the_minis_sizes_and_trains_the_same_objective(peers):
    """diffusers' FluxTransformer2DModel built from the mini flavour has trainperf's parameter count, and the loss the
    peer computes as diffusers' FLUX examples do (posterior sample, scheduler sigmas, packing, unpacking) equals
    trainperf's rectified flow (flow.py) on the same draws: the same posterior noise, noise and timesteps."""
    from trainperf.workloads.flux1 import flow, mini
    from trainperf.workloads.flux1 import model as flux_model

    args = flux_model.FLAVOURS["mini"]
    torch.manual_seed(0)
    hf = peers.diffusers_flux(args).eval()
    assert sum(p.numel() for p in hf.parameters()) == sum(p.numel() for p in flux_model.build(args).parameters())
    assert sum(p.numel() for p in hf.parameters()) == 1_810_096  # the spec's count
    n, shape = 3, (3, 12, 16, 16)
    batch = {
        "t5": torch.randn(n, 8, 64).bfloat16(),
        "clip": torch.randn(n, 64).bfloat16(),
        "mean": torch.rand(shape).bfloat16(),
        "logvar": torch.full(shape, mini.LOGVAR + 8).bfloat16(),  # a wide posterior: its draw shows in the loss
    }
    loss = peers.diffusers_flow_loss(mini.SHIFT, mini.SCALE, mini.BLOCK, torch.Generator().manual_seed(5))
    with torch.no_grad():
        got = float(loss(hf, batch))
        g = torch.Generator().manual_seed(5)
        eps, noise, u = torch.randn(shape, generator=g), torch.randn(shape, generator=g), torch.rand(n, generator=g)
        t = 1 - (u * 1000).long() / 1000  # the scheduler's sigma at the drawn index: 1, 0.999, ..., 0.001
        b = {k: v.float() for k, v in batch.items()}
        x0 = flow.latent(b["mean"], b["logvar"], eps, mini.SHIFT, mini.SCALE)
        pred = flow.predict(hf, flow.noised(x0, noise, t), t, b["t5"], b["clip"])
        expected = float(flow.sample_losses(pred, flow.velocity(x0, noise)).mean())
    assert got == pytest.approx(expected, rel=1e-5)
    assert expected > 0.5  # the model's output is not zero: the prediction takes part


def test_the_flux1_row(peers, data_dir, tmp_path, capsys, monkeypatch):
    """flux1's row: trainperf's mini step beside diffusers' FLUX training of the same parameter count, in samples/s;
    here both sides under bf16 autocast, which the title and the JSON say."""
    out = tmp_path / "peers.json"
    for side in ("trainperf", "peer"):
        monkeypatch.setitem(peers.PRECISION, side, "fp32")  # restored after the test
    argv = ["flux1", "--steps", "2", "--repeats", "1", "--json", str(out), "--precision", "bf16"]
    assert peers.main([*argv, "--peer-precision", "bf16"]) == 0
    doc = json.loads(out.read_text())
    assert doc["precision"] == {"trainperf": "bf16", "peer": "bf16"}
    r = doc["workloads"]["flux1"]
    assert r["unit"] == "samples/s" and r["batch"] == "32 latents 12 x 16 x 16" and "diffusers" in r["peer_name"]
    assert r["note"] == "parameters: trainperf 1,810,096, peer 1,810,096"
    assert r["trainperf"]["median"] > 0 and r["peer"]["median"] > 0
    printed = capsys.readouterr().out
    assert "trainperf (bf16) beside a straightforward peer (bf16)" in printed
    [row] = [line for line in printed.splitlines() if line.startswith("flux1 ")]
    assert row.split()[1:5] == ["samples/s", f"{r['trainperf']['median']:.1f}", f"{r['peer']['median']:.1f}",
                                f"{r['ratio']:.2f}"]  # fmt: skip
