"""DeepSeek-V3's pieces of the shared decoder, each against an independent statement of what the reference computes:
group-limited routing, YaRN frequencies and scale, multi-head latent attention with interleaved rotary pairs, the
multi-token prediction loss; its checkpoint mapping, schedule and closed rules."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch
import torch.nn.functional as F

from trainperf.errors import DataError, RuleError
from trainperf.rules.closed import check_overrides
from trainperf.workloads.common.llm.mla import MultiLatentAttention, softmax_scale
from trainperf.workloads.common.llm.model import Decoder
from trainperf.workloads.common.llm.moe import MoEArgs, group_limited_topk
from trainperf.workloads.common.llm.rope import YarnScaling, frequencies
from trainperf.workloads.deepseekv3_671b import BENCHMARK, REFERENCE_RECIPE, checkpoint
from trainperf.workloads.deepseekv3_671b.model import DEEPSEEK_V3, FLAVOURS
from trainperf.workloads.deepseekv3_671b.workload import lr_policy


def test_group_limited_routing_chooses_only_within_the_best_groups():
    m = MoEArgs(n_experts=8, top_k=4, expert_ffn_dim=4, score_function="sigmoid", n_groups=4, group_top_k=2)
    scores = torch.tensor([[0.9, 0.0, 0.8, 0.85, 0.1, 0.1, 0.7, 0.75]])
    # groups (0,1) (2,3) (4,5) (6,7) scored by their 2 best: 0.9, 1.65, 0.2, 1.45 -> groups 1 and 3 are kept
    assert sorted(group_limited_topk(scores, m)[0].tolist()) == [2, 3, 6, 7]
    assert sorted(group_limited_topk(scores, dataclasses.replace(m, n_groups=1, group_top_k=1))[0].tolist()) == [
        0,
        2,
        3,
        7,
    ]
    with pytest.raises(ValueError, match="groups"):
        dataclasses.replace(m, n_groups=3)


def test_yarn_frequencies_and_scale_are_deepseeks():
    y = YarnScaling()
    dim, base = 64, 10_000.0
    ours = frequencies(dim, base, y).double()
    plain = 1.0 / base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)

    def correction(rot):  # DeepSeek-V3's yarn_find_correction_dim
        return dim * math.log(4096 / (rot * 2 * math.pi)) / (2 * math.log(base))

    low, high = math.floor(correction(32)), math.ceil(correction(1))
    for i in range(dim // 2):
        ramp = min(max((i - low) / (high - low), 0.0), 1.0)
        assert ours[i].item() == pytest.approx(plain[i].item() * (1 - ramp) + plain[i].item() / 40 * ramp, rel=1e-6)
    assert ours[0] == pytest.approx(plain[0].item()) and ours[-1] == pytest.approx(plain[-1].item() / 40, rel=1e-6)
    mla = DEEPSEEK_V3.mla
    assert softmax_scale(mla, y) == pytest.approx((0.1 * math.log(40) + 1) ** 2 / math.sqrt(192))


def _naive_mla(att: MultiLatentAttention, x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """Head by head, rotating the interleaved pairs (2i, 2i+1) by position x frequency i (Hugging Face's layout)."""
    m, h = att.m, att.n_heads
    b, t, _ = x.shape
    q = att.q_b(att.q_norm(att.q_a(x))).view(b, t, h, -1)
    latent, k_pe = att.kv_a(x).split([m.kv_lora_rank, m.rope_head_dim], -1)
    kv = att.kv_b(att.kv_norm(latent)).view(b, t, h, -1)
    angles = torch.arange(t)[:, None] * freqs[None, :]  # (t, rope/2)

    def rot(v):  # v (..., t, rope) interleaved pairs
        a, c = v[..., 0::2], v[..., 1::2]
        cos, sin = angles.cos(), angles.sin()
        return torch.stack((a * cos - c * sin, c * cos + a * sin), -1).flatten(-2)

    outs = []
    for head in range(h):
        qh = torch.cat((q[:, :, head, : m.nope_head_dim], rot(q[:, :, head, m.nope_head_dim :])), -1)
        kh = torch.cat((kv[:, :, head, : m.nope_head_dim], rot(k_pe)), -1)
        vh = kv[:, :, head, m.nope_head_dim :]
        logits = qh @ kh.transpose(1, 2) * att.scale
        logits = logits.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        outs.append(torch.softmax(logits, -1) @ vh)
    return att.out(torch.cat(outs, -1))


def test_latent_attention_is_per_head_attention_with_interleaved_rotary_pairs():
    torch.manual_seed(0)
    a = FLAVOURS["debug"]
    att = MultiLatentAttention(a.dim, a.n_heads, a.mla, norm_eps=a.norm_eps, yarn=a.rope_scaling)
    x = torch.randn(2, 7, a.dim)
    freqs = frequencies(a.mla.rope_head_dim, a.rope_theta, a.rope_scaling)
    angles = torch.outer(torch.arange(7.0), freqs)
    ours = att(x, angles.cos(), angles.sin())
    torch.testing.assert_close(ours, _naive_mla(att, x, freqs), rtol=1e-4, atol=1e-5)


def test_multi_token_prediction_predicts_the_token_after_next():
    torch.manual_seed(1)
    a = dataclasses.replace(FLAVOURS["debug"], vocab_size=50)
    model = Decoder(a)
    tokens = torch.randint(0, 50, (2, 9))
    logits, mtp = model(tokens[:, :-1], tokens[:, 1:])
    torch.testing.assert_close(logits, model(tokens[:, :-1]))  # the prediction layer leaves the logits alone
    h = model.norm(_hidden(model, tokens[:, :-1]))
    m = model.mtp(h, model.embedding(tokens[:, 1:]), lambda block, y: block(y, *_rope(model, 8)))
    want = F.cross_entropy(model.output(m[:, :-1]).flatten(0, 1), tokens[:, 2:].flatten())
    torch.testing.assert_close(mtp, want)


def _rope(model, t):
    return model.rope_cos[:t], model.rope_sin[:t]


def _hidden(model, tokens):
    x = model.embedding(tokens)
    for layer in model.layers:
        x = layer(x, *_rope(model, tokens.shape[1]))
    return x


def test_the_checkpoint_maps_onto_every_tensor_of_the_decoder(tmp_path):
    a = dataclasses.replace(FLAVOURS["debug"], vocab_size=40)
    want = checkpoint.expected(a)
    torch.manual_seed(2)
    tensors = {n: torch.randn(s) for n, s in want.items()} | {"model.layers.2.embed_tokens.weight": torch.zeros(40, 64)}
    checkpoint.write(tmp_path / "ck", tensors, {"n_routed_experts": 8, "first_k_dense_replace": 1})
    ck = checkpoint.check(tmp_path / "ck", a)  # the prediction layer's own embedding copy is allowed and not read
    with torch.device("meta"):
        model = Decoder(a)
    for name, p in [*model.named_parameters(), *model.named_buffers()]:
        if name.endswith("weight") or name.endswith(("expert_bias", "gate_up", "down")):
            assert tuple(checkpoint.read(ck, name, a).shape) == tuple(p.shape), name
    gate_up = checkpoint.read(ck, "layers.1.feed_forward.experts.gate_up", a)
    torch.testing.assert_close(gate_up[3][:, :32], tensors["model.layers.1.mlp.experts.3.gate_proj.weight"].T)
    torch.testing.assert_close(gate_up[3][:, 32:], tensors["model.layers.1.mlp.experts.3.up_proj.weight"].T)
    assert torch.equal(
        checkpoint.read(ck, "mtp.block.attention.kv_b.weight", a), tensors["model.layers.2.self_attn.kv_b_proj.weight"]
    )
    assert torch.equal(checkpoint.read(ck, "mtp.norm.weight", a), tensors["model.layers.2.shared_head.norm.weight"])
    bias = checkpoint.read(ck, "layers.1.feed_forward.router.expert_bias", a)
    assert torch.equal(bias, tensors["model.layers.1.mlp.gate.e_score_correction_bias"])


def test_a_checkpoint_of_another_model_is_refused_by_name(tmp_path):
    a = dataclasses.replace(FLAVOURS["debug"], vocab_size=40)
    want = checkpoint.expected(a)
    tensors = {n: torch.zeros(s) for n, s in want.items()}
    tensors["model.layers.0.self_attn.o_proj.weight"] = torch.zeros(64, 8)
    checkpoint.write(tmp_path / "ck", tensors, {})
    with pytest.raises(DataError, match=r"o_proj.weight has shape \[64, 8\]"):
        checkpoint.check(tmp_path / "ck", a)
    cfg = tmp_path / "ck" / checkpoint.CONFIG
    cfg.write_text(json.dumps({"n_routed_experts": 256}))
    with pytest.raises(DataError, match="n_routed_experts 256, the model has 8"):
        checkpoint.check(tmp_path / "ck", a)
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "pytorch_model.bin").write_bytes(b"PK")
    with pytest.raises(DataError, match="pickle"):
        checkpoint.check(tmp_path / "p", a)


def test_the_schedule_is_megatrons():
    f = lr_policy(REFERENCE_RECIPE)
    assert [f(s) for s in range(5)] == [0.0, 0.25, 0.5, 0.75, 1.0]  # from 0, the base rate at step 4
    assert 0.99999 < f(5) < 1.0 and f(12_000) == pytest.approx(1e-8 / 2.4e-5)
    assert REFERENCE_RECIPE.opt_learning_rate_decay_steps == 11_996 and REFERENCE_RECIPE.opt_end_learning_rate == 1e-8


def test_closed_rules_take_a_batch_from_15360_with_its_learning_rate():
    def closed(**kw):
        rules = BENCHMARK.closed_rules["reference"]
        check_overrides("deepseekv3_671b", "reference", "closed", REFERENCE_RECIPE.as_dict(), rules, kw)

    closed(global_batch_size=15360, opt_base_learning_rate=2.4e-5 * math.sqrt(15360 / 16384))
    with pytest.raises(RuleError, match="sqrt"):
        closed(global_batch_size=15360)  # the 16,384 batch's rate at another batch
    with pytest.raises(RuleError, match=">= 15360"):
        closed(global_batch_size=8192, opt_base_learning_rate=2.4e-5 * math.sqrt(0.5))
    with pytest.raises(RuleError, match="fixed"):
        closed(opt_learning_rate_warmup_steps=8)


def test_a_decoder_written_in_the_reference_layout_reads_back_unchanged(tmp_path):
    a = dataclasses.replace(FLAVOURS["debug"], vocab_size=40)
    torch.manual_seed(3)
    model = Decoder(a)
    state = {n: p.detach() for n, p in model.named_parameters()}
    state |= {n: torch.randn(b.shape) for n, b in model.named_buffers() if n.endswith("router.expert_bias")}
    tensors = checkpoint.to_reference(state, a)
    assert {n: tuple(t.shape) for n, t in tensors.items()} == checkpoint.expected(a)  # every name, no other
    checkpoint.write(tmp_path / "ck", tensors, checkpoint.config_of(a))
    ck = checkpoint.check(tmp_path / "ck", a)
    for name, t in state.items():
        assert torch.equal(checkpoint.read(ck, name, a), t), name


def test_the_mini_schedule_warms_up_from_0_and_ends_with_the_budget():
    r = BENCHMARK.recipes["mini"]
    f = lr_policy(r)
    assert [f(s) for s in range(5)] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert r.opt_learning_rate_decay_steps == 296 and f(296) == pytest.approx(1e-8 / r.opt_base_learning_rate)
    assert r.max_steps * r.global_batch_size == BENCHMARK.specs["mini"].budget(r)  # the cosine ends with the budget


def test_the_mini_closed_rules_take_any_batch_with_the_formulas_learning_rate():
    r = BENCHMARK.recipes["mini"]

    def closed(**kw):
        check_overrides("deepseekv3_671b", "mini", "closed", r.as_dict(), BENCHMARK.closed_rules["mini"], kw)

    closed(global_batch_size=64, opt_base_learning_rate=r.opt_base_learning_rate * math.sqrt(2))
    with pytest.raises(RuleError, match="sqrt"):
        closed(global_batch_size=64)
    with pytest.raises(RuleError, match="fixed"):
        closed(decay_total_steps=600)
