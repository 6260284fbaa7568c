"""The LLM pieces the current round's benchmarks share: Megatron's indexed files (written, read, refused when
damaged), sequences packed across documents, and the decoder against Hugging Face's Llama of the same weights."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import torch

from trainperf.errors import DataError
from trainperf.workloads.common.llm import indexed
from trainperf.workloads.common.llm.model import (
    LLAMA31_8B,
    Decoder,
    DecoderArgs,
    RopeScaling,
    rope_frequencies,
    token_cross_entropy,
)
from trainperf.workloads.common.llm.packing import PackedSequences

DOCS = [[5, 6, 7], [8, 9], [10, 11, 12, 13, 14], [15], [16, 17, 18, 19]]


def test_indexed_files_read_back_what_was_written(tmp_path):
    indexed.write(tmp_path / "d", DOCS, vocab_size=100)
    raw = (tmp_path / "d.idx").read_bytes()
    assert raw[:9] == b"MMIDIDX\x00\x00" and struct.unpack_from("<QBQQ", raw, 9) == (1, 8, 5, 6)  # uint16
    ds = indexed.IndexedDataset(tmp_path / "d", vocab_size=100)
    assert len(ds) == 5 and [list(ds[i]) for i in range(5)] == DOCS and ds.total_tokens == 15
    big = indexed.write(tmp_path / "w", [[70000, 1]], vocab_size=128256)
    assert big is None and indexed.IndexedDataset(tmp_path / "w").dtype == np.int32


@pytest.mark.parametrize(
    "damage, says",
    [
        (lambda idx, b: idx.write_bytes(b"GARBAGE!!" + idx.read_bytes()[9:]), "not a Megatron indexed data set"),
        (lambda idx, b: idx.write_bytes(idx.read_bytes()[:-8]), "announces"),
        (lambda idx, b: b.write_bytes(b.read_bytes()[:6]), "lies outside"),
        (lambda idx, b: idx.write_bytes(idx.read_bytes()[:20]), "shorter than the index header"),
        (lambda idx, b: b.unlink(), "missing"),
    ],
)
def test_a_damaged_pair_is_refused_naming_the_file(tmp_path, damage, says):
    indexed.write(tmp_path / "d", DOCS, vocab_size=100)
    damage(tmp_path / "d.idx", tmp_path / "d.bin")
    with pytest.raises(DataError, match=says) as e:
        indexed.IndexedDataset(tmp_path / "d", vocab_size=100)
    assert str(tmp_path / "d") in str(e.value)


def test_tokens_outside_the_vocabulary_are_refused(tmp_path):
    indexed.write(tmp_path / "d", DOCS, vocab_size=100)
    with pytest.raises(DataError, match="outside the tokenizer's vocabulary of 12"):
        indexed.IndexedDataset(tmp_path / "d", vocab_size=12)


def test_packed_samples_span_documents_and_share_one_token(tmp_path):
    indexed.write(tmp_path / "d", DOCS, vocab_size=100)
    ds = indexed.IndexedDataset(tmp_path / "d")
    packed = PackedSequences(ds, seq_len=4)
    flat = [t for d in DOCS for t in d]
    assert len(packed) == (len(flat) - 1) // 4 == 3
    for i in range(len(packed)):
        assert list(packed.sample(i)) == flat[4 * i : 4 * i + 5]
    shuffled = PackedSequences(ds, seq_len=4, order=np.array([4, 3, 2, 1, 0]))
    assert list(shuffled.sample(0)) == [16, 17, 18, 19, 15]
    with pytest.raises(IndexError):
        packed.sample(3)


def test_rope_frequencies_are_llama_3_1s():
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config = LlamaConfig(
        hidden_size=4096, num_attention_heads=32, rope_theta=500_000.0, max_position_embeddings=131072,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192},
    )  # fmt: skip
    theirs, _ = ROPE_INIT_FUNCTIONS["llama3"](config, "cpu")
    torch.testing.assert_close(rope_frequencies(LLAMA31_8B), theirs.float(), rtol=1e-5, atol=0)
    plain = DecoderArgs(dim=64, n_layers=1, n_heads=4, n_kv_heads=2, ffn_dim=32, vocab_size=10, max_seq_len=8)
    assert not torch.allclose(rope_frequencies(plain), rope_frequencies(LLAMA31_8B)[:8])


def _hf_copy(model: Decoder):
    """Hugging Face's LlamaForCausalLM with the decoder's weights (the fused projections split back)."""
    import transformers

    a = model.args
    hf = transformers.LlamaForCausalLM(
        transformers.LlamaConfig(
            vocab_size=a.vocab_size, hidden_size=a.dim, intermediate_size=a.ffn_dim, num_hidden_layers=a.n_layers,
            num_attention_heads=a.n_heads, num_key_value_heads=a.n_kv_heads, max_position_embeddings=a.max_seq_len,
            rms_norm_eps=a.norm_eps, rope_theta=a.rope_theta, tie_word_embeddings=False,
        )
    ).eval()  # fmt: skip
    q, kv = a.n_heads * a.head_dim, a.n_kv_heads * a.head_dim
    with torch.no_grad():
        hf.model.embed_tokens.weight.copy_(model.embedding.weight)
        hf.model.norm.weight.copy_(model.norm.weight)
        hf.lm_head.weight.copy_(model.output.weight)
        for ours, theirs in zip(model.layers, hf.model.layers, strict=True):
            wq, wk, wv = ours.attention.qkv.weight.split([q, kv, kv])
            attn = theirs.self_attn
            for dst, src in ((attn.q_proj, wq), (attn.k_proj, wk), (attn.v_proj, wv)):
                dst.weight.copy_(src)
            theirs.self_attn.o_proj.weight.copy_(ours.attention.out.weight)
            gate, up = ours.feed_forward.gate_up.weight.chunk(2)
            theirs.mlp.gate_proj.weight.copy_(gate)
            theirs.mlp.up_proj.weight.copy_(up)
            theirs.mlp.down_proj.weight.copy_(ours.feed_forward.down.weight)
            theirs.input_layernorm.weight.copy_(ours.attention_norm.weight)
            theirs.post_attention_layernorm.weight.copy_(ours.ffn_norm.weight)
    return hf


def test_the_decoder_computes_what_hugging_faces_llama_computes():
    torch.manual_seed(0)
    args = DecoderArgs(dim=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=96, vocab_size=50, max_seq_len=32)
    model = Decoder(args).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 1:
                p.uniform_(0.5, 1.5)  # norms away from 1, so that their weights count
    tokens = torch.randint(0, 50, (3, 32))
    with torch.no_grad():
        torch.testing.assert_close(model(tokens), _hf_copy(model)(input_ids=tokens).logits, rtol=1e-4, atol=1e-4)


def test_initialization_and_checkpointing():
    torch.manual_seed(0)
    args = DecoderArgs(dim=256, n_layers=8, n_heads=4, n_kv_heads=4, ffn_dim=512, vocab_size=300, max_seq_len=16)
    model = Decoder(args)
    assert model.embedding.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert model.layers[0].feed_forward.down.weight.std().item() == pytest.approx(0.02 / 4, rel=0.05)  # sqrt(2*8)
    assert model.layers[0].attention.out.weight.std().item() == pytest.approx(0.02 / 4, rel=0.05)
    tokens = torch.randint(0, 300, (2, 16))
    plain = torch.nn.functional.cross_entropy(model(tokens).flatten(0, 1), tokens.flatten())
    plain.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    import dataclasses

    model.args = dataclasses.replace(args, checkpoint_activations=True)
    again = torch.nn.functional.cross_entropy(model(tokens).flatten(0, 1), tokens.flatten())
    again.backward()
    for a, b in zip(grads, [p.grad for p in model.parameters()], strict=True):
        torch.testing.assert_close(a, b)
    with pytest.raises(ValueError, match="split into"):
        DecoderArgs(dim=60, n_layers=1, n_heads=8, n_kv_heads=2, ffn_dim=8, vocab_size=8, max_seq_len=8)
    assert RopeScaling().factor == 8.0


def test_the_learning_rate_follows_the_reference_schedule():
    from trainperf.workloads.llama31_8b import REFERENCE_RECIPE
    from trainperf.workloads.llama31_8b.workload import lr_policy

    f = lr_policy(REFERENCE_RECIPE)  # 16 warm-up steps, cosine to 0.1x over 1,200,000 - 16
    assert f(0) == pytest.approx(1 / 17) and f(16) == pytest.approx(1.0)
    assert f(16 + (1_200_000 - 16) // 2) == pytest.approx(0.55, abs=1e-6)
    assert f(1_200_000) == pytest.approx(0.1) and f(2_000_000) == pytest.approx(0.1)
    assert REFERENCE_RECIPE.opt_end_learning_rate == pytest.approx(0.1 * REFERENCE_RECIPE.opt_base_learning_rate)


def test_a_sliding_window_layer_sees_the_window_and_no_further():
    from trainperf.workloads.common.llm.model import Attention

    args = DecoderArgs(dim=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=8, vocab_size=10, max_seq_len=12,
                       sliding_window=3, window_layers=(1, 0))  # fmt: skip
    assert [args.window(i) for i in range(4)] == [3, None, 3, None]
    torch.manual_seed(0)
    windowed, full = Attention(args, 3), Attention(args)
    full.load_state_dict(windowed.state_dict())
    model = Decoder(args)
    cos, sin = model.rope_cos[:12], model.rope_sin[:12]
    x = torch.randn(1, 12, 32, requires_grad=True)
    (g,) = torch.autograd.grad(windowed(x, cos, sin)[0, 9].sum(), [x])
    seen = g[0].abs().sum(-1) > 0
    assert seen.tolist() == [False] * 6 + [True] * 4 + [False] * 2  # itself and the 3 before it
    torch.testing.assert_close(windowed(x, cos, sin)[:, :4], full(x, cos, sin)[:, :4])  # within the window: the same
    assert model.layers[0].attention.window == 3 and model.layers[1].attention.window is None


def test_the_compiled_cross_entropy_is_the_cross_entropy():
    """``trainperf run --compile`` computes the decoders' loss through torch.compile: the same mean fp32
    cross-entropy (a -100 label ignored) and the same gradient as the eager function, from bf16 logits too."""
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 11, (2, 5), generator=g)
    labels[1, 3] = -100
    for dtype in (torch.float32, torch.bfloat16):
        logits = torch.randn(2, 5, 11, generator=g).to(dtype)
        results = []
        for compiled in (False, True):
            x = logits.clone().requires_grad_()
            loss = token_cross_entropy(x, labels, compiled=compiled)
            results.append((loss, torch.autograd.grad(loss, x)[0]))
        (eager, eager_grad), (fused, fused_grad) = results
        assert eager.dtype == fused.dtype == torch.float32
        torch.testing.assert_close(fused, eager)
        torch.testing.assert_close(fused_grad, eager_grad)
        assert not eager_grad[1, 3].any()  # the ignored position
        assert float(eager) == pytest.approx(
            float(torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), labels.flatten()))
        )
