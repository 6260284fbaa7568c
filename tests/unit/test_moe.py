"""The mixture-of-experts layer the MoE benchmarks share: routing and top-k against a plain per-token loop, the
balancing loss and its gradient, the bias-based balancing, the dense decoder unchanged, and expert parallelism over
two processes against one."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from trainperf.workloads.common.llm.model import GPT_OSS_20B, Decoder, DecoderArgs, FeedForward, reference_tensor_names
from trainperf.workloads.common.llm.moe import MoE, MoEArgs, expert_load, switch_aux_loss, update_expert_bias

DIM = 16


def _layer(seed: int = 0, **kw) -> MoE:
    torch.manual_seed(seed)
    layer = MoE(DIM, MoEArgs(n_experts=4, top_k=2, expert_ffn_dim=8, **kw))
    for p in layer.parameters():
        torch.nn.init.normal_(p, 0.0, 0.3)
    return layer


def _plain(layer: MoE, x: torch.Tensor) -> torch.Tensor:
    """The same layer written the plain way: every token through its k experts, one at a time."""
    m, flat = layer.m, x.reshape(-1, x.shape[-1])
    logits = flat @ layer.router.weight.T
    choose = logits if m.score_function == "softmax" and not m.pre_softmax else logits.softmax(-1)
    if m.score_function == "sigmoid":
        choose = logits.sigmoid()
    if layer.router.expert_bias is not None:
        choose = choose + layer.router.expert_bias
    rows = []
    for i, token in enumerate(flat):
        top = choose[i].topk(m.top_k).indices
        if m.score_function == "softmax" and not m.pre_softmax:
            w = logits[i, top].softmax(-1)
        elif m.score_function == "softmax":
            w = logits[i].softmax(-1)[top]
        else:
            w = logits[i, top].sigmoid() / logits[i, top].sigmoid().sum()
        out = sum(
            wk * (F.silu(g) * u) @ layer.experts.down[e]
            for wk, e in zip(w * m.top_k_scaling, top.tolist(), strict=True)
            for g, u in [(token @ layer.experts.gate_up[e]).chunk(2)]
        )
        rows.append(out + (layer.shared(token) if layer.shared is not None else 0))
    return torch.stack(rows).view_as(x)


@pytest.mark.parametrize(
    "kw",
    [
        {},  # GPT-OSS: top-k of the logits, softmax over the chosen
        {"pre_softmax": True},
        {"score_function": "sigmoid", "top_k_scaling": 2.5, "n_shared_experts": 1},  # DeepSeek-V3's kind
        {"score_function": "sigmoid", "expert_bias_update_rate": 1e-3},
    ],
)
def test_routing_and_gradients_match_a_plain_per_token_loop(kw):
    layer = _layer(**kw)
    if layer.router.expert_bias is not None:
        layer.router.expert_bias.copy_(torch.tensor([0.5, 0.0, -0.5, 0.0]))  # changes the choice, not the weights
    x = torch.randn(2, 5, DIM, requires_grad=True)
    ours, theirs = layer(x), _plain(layer, x)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    grads = torch.autograd.grad(ours.square().sum(), [x, *layer.parameters()])
    again = torch.autograd.grad(theirs.square().sum(), [x, *layer.parameters()])
    for a, b in zip(grads, again, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)  # float32, sums in another order
    assert layer.tokens_per_expert.sum() == 2 * 5 * 2  # every token counted k times: dropless
    for dtype in (torch.bfloat16, torch.float32):  # mixed precision: the routing stays fp32, the output x's dtype
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = layer(x.detach().to(dtype))
        assert low.dtype == dtype and (low.float() - theirs).abs().max() < 0.1 * theirs.abs().max()


@pytest.mark.parametrize("path", ["grouped", "padded"])
def test_the_cpu_paths_of_the_experts_compute_what_the_loop_computes(path):
    """A CPU's two paths against the loop over experts (the path of other devices and dtypes), with an expert that got
    no token, which gets no gradient. ``grouped`` (fp32): one grouped product per matrix, the same outputs and
    gradients to the last bit. ``padded`` (bf16 autocast): every expert's rows padded with zero rows to one length, a
    multiple of PAD_ROWS, so that oneDNN builds kernels for a few shapes, not for every step's counts; run in fp32 it
    gives the loop's outputs and gradients to rounding (the padded products sum in another order)."""
    layer = _layer()
    x = torch.randn(11, DIM)
    counts = [4, 0, 5, 2]
    results = []
    for run in (getattr(layer.experts, path), layer.experts.looped):
        xi = x.clone().requires_grad_()
        out = run(xi, counts)
        grads = torch.autograd.grad(out.square().sum(), [xi, *layer.experts.parameters()])
        results.append((out, *grads))
    for a, b in zip(*results, strict=True):
        if path == "grouped":
            assert torch.equal(a, b)
        else:
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert not results[0][2][1].any() and not results[0][3][1].any()  # the idle expert's matrices get no gradient


def test_under_a_cpus_bf16_autocast_the_experts_run_padded(monkeypatch):
    """A bf16 step on a CPU takes the padded path (the loop's per-expert products would each be a new kernel shape),
    its products in bf16, and the layer agrees with the fp32 layer to bf16's precision."""
    layer = _layer()
    x = torch.randn(2, 7, DIM)
    taken = []
    padded = type(layer.experts).padded
    monkeypatch.setattr(type(layer.experts), "padded", lambda self, *a: taken.append(padded(self, *a)) or taken[-1])
    with torch.no_grad():
        full = layer(x)
        assert not taken  # fp32: the grouped products, as before
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = layer(x)
    assert [out.dtype for out in taken] == [torch.bfloat16]  # the experts' products in bf16
    assert (low.float() - full).abs().max() < 0.05 * full.abs().max()


def test_a_compiled_moe_layer_gives_the_eager_layers_outputs_without_recompiling():
    """``trainperf run --compile``: the experts' part runs outside the compiled graph (their row counts change every
    step and would make the compiler build a graph for each); the compiled layer computes the eager one's outputs
    and gradients, and a batch routed otherwise reuses the graphs already built."""
    import torch._dynamo

    torch._dynamo.reset()
    layer = _layer()
    compiled = torch.compile(layer)
    for seed in (1, 2):
        x = torch.randn(2, 6, DIM, generator=torch.Generator().manual_seed(seed))
        with torch._dynamo.config.patch(error_on_recompile=seed == 2):
            got = compiled(x)
        grads = torch.autograd.grad(got.square().sum(), list(layer.parameters()), allow_unused=True)
        want = layer(x)
        expected = torch.autograd.grad(want.square().sum(), list(layer.parameters()), allow_unused=True)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        for g, e in zip(grads, expected, strict=True):
            assert (g is None) == (e is None)
            if g is not None:
                torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5)  # the compiler sums in its own order


def test_the_auxiliary_loss_trains_the_router_without_entering_the_logged_loss():
    uniform = torch.full((1, 8, 4), 0.25)
    balanced = torch.tensor([[[0, 1], [2, 3], [0, 1], [2, 3]]])
    assert switch_aux_loss(uniform[:, :4], balanced, 2).item() == pytest.approx(1.0)  # balanced: 1
    skewed, scores = torch.tensor([[[0, 1]] * 4]), torch.tensor([[[0.5, 0.5, 0.0, 0.0]] * 4])
    assert switch_aux_loss(scores, skewed, 2).item() == pytest.approx(2.0)  # half the experts take all: 2
    for per_sequence in (False, True):
        layer = _layer(aux_loss_coeff=0.01, aux_loss_per_sequence=per_sequence)
        x = torch.randn(2, 5, DIM)
        out = layer(x)
        logits = x.view(-1, DIM) @ layer.router.weight.T
        seqs = logits.view(2, 5, 4) if per_sequence else logits.view(1, 10, 4)
        f = F.one_hot(seqs.topk(2).indices, 4).sum((1, 2)) / (seqs.shape[1] * 2)  # share of the choices
        expected = (4 * (f * seqs.softmax(-1).mean(1)).sum(-1)).mean()  # E * sum_e f_e P_e, mean over sequences
        torch.testing.assert_close(layer.router.aux_loss, expected)
        torch.testing.assert_close(out, _layer()(x), rtol=0, atol=0)  # same values as no loss
        (g_router,) = torch.autograd.grad(out.sum(), [layer.router.weight])
        layer(x)  # a fresh auxiliary loss: the plain loop has none, so the sum is the loss the gradient trains
        explicit = _plain(layer, x).sum() + 0.01 * layer.router.aux_loss
        (g_explicit,) = torch.autograd.grad(explicit, [layer.router.weight])
        torch.testing.assert_close(g_router, g_explicit, rtol=1e-4, atol=1e-6)
        (g_plain,) = torch.autograd.grad(_plain(layer, x).sum(), [layer.router.weight])
        assert not torch.allclose(g_router, g_plain, rtol=1e-4, atol=1e-6)  # the loss did reach the router
    layer.eval()
    layer(x)
    assert layer.router.aux_loss is None  # no balancing loss in evaluation


def test_bias_balancing_moves_toward_the_less_loaded_experts():
    torch.manual_seed(1)
    layer = _layer(score_function="sigmoid", expert_bias_update_rate=0.1)
    layer.tokens_per_expert.copy_(torch.tensor([10.0, 2.0, 4.0, 4.0]))
    layer.tokens_seen.copy_(torch.tensor([10.0, 2.0, 4.0, 4.0]))
    model = torch.nn.Sequential(layer)
    update_expert_bias(model)
    torch.testing.assert_close(layer.router.expert_bias, torch.tensor([-0.1, 0.1, 0.1, 0.1]))
    assert layer.tokens_per_expert.sum() == 0  # the counts restart each step
    assert expert_load(model) == [pytest.approx([0.5, 0.1, 0.2, 0.2])]  # the load reported keeps them to the evaluation
    assert "router.expert_bias" in layer.state_dict()  # saved with the model, as the reference's checkpoint holds it


def test_a_dense_flavour_builds_no_moe_parts_and_a_moe_flavour_does():
    """A flavour without ``MoEArgs`` is the dense decoder: SwiGLU blocks, no router and no experts (its logits are
    Hugging Face's Llama's: tests/unit/test_llm.py); the same sizes with ``MoEArgs`` put an MoE layer in every block."""
    args = DecoderArgs(dim=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=48, vocab_size=40, max_seq_len=16)
    dense = Decoder(args)
    assert all(isinstance(layer.feed_forward, FeedForward) for layer in dense.layers)
    assert not any("router" in n or "experts" in n for n, _ in dense.named_parameters())
    moe = Decoder(dataclasses.replace(args, moe=MoEArgs(n_experts=4, top_k=2, expert_ffn_dim=24)))
    assert all(isinstance(layer.feed_forward, MoE) for layer in moe.layers)
    assert any("router" in n for n, _ in moe.named_parameters()) and any(
        "experts" in n for n, _ in moe.named_parameters()
    )


def test_a_moe_decoder_trains_and_names_its_tensors():
    args = dataclasses.replace(GPT_OSS_20B, dim=32, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=50,
                               max_seq_len=16, moe=MoEArgs(n_experts=4, top_k=2, expert_ffn_dim=24))  # fmt: skip
    assert args.head_dim == 64  # GPT-OSS's heads of 64, wider than dim / heads
    torch.manual_seed(0)
    model = Decoder(args)
    assert model.layers[0].feed_forward.experts.down.std().item() < 0.008  # scaled like a residual writer
    tokens = torch.randint(0, 50, (2, 16))
    loss = F.cross_entropy(model(tokens).flatten(0, 1), tokens.flatten())
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())
    names = reference_tensor_names(model)
    assert "layers.1.feed_forward.experts.w2" in names and "layers.0.feed_forward.router.weight" in names
    assert len(names) == 3 + 2 * 10  # embedding, norm, output; each block: 2 norms, q k v o, router, w1 w3 w2
