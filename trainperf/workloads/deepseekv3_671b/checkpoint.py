"""The starting checkpoint as the reference distributes it: DeepSeek-V3 in Hugging Face's layout (``config.json``,
safetensors shards, ``model.safetensors.index.json``; "deepseekv3_checkpoint_bf16", the reference's README, trained
50 iterations on the Llama 3.1 tokenizer's ids), which the reference converts to Megatron's format before its run
(``run_conversion.py``) and trainperf reads as it is, into the shared decoder, names mapped below. Nothing in it is
executed (``common/llm/hf_checkpoint.py``); :func:`check` compares every tensor's name and shape with the model's
before the clock starts, reading headers only.

The checkpoint's names and the decoder's (``L`` a layer; layer 61, after the 61 decoder layers, is the multi-token
prediction block ``mtp.``, whose ``enorm``, ``hnorm``, ``eh_proj`` and ``shared_head.norm`` are its own)::

    model.embed_tokens.weight, model.norm.weight, lm_head.weight        embedding.weight, norm.weight, output.weight
    L.input_layernorm / post_attention_layernorm                          attention_norm / ffn_norm
    L.self_attn.q_a_proj, q_a_layernorm, q_b_proj                         attention.q_a, q_norm, q_b
    L.self_attn.kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj      attention.kv_a, kv_norm, kv_b, out
    L.mlp.gate_proj + up_proj, down_proj (dense layers)                    feed_forward.gate_up (rows), .down
    L.mlp.gate.weight, gate.e_score_correction_bias                        feed_forward.router.weight, .expert_bias
    L.mlp.experts.<e>.gate_proj + up_proj, down_proj                       feed_forward.experts.gate_up[e] (transposed,
                                                                           columns), .down[e] (transposed)
    L.mlp.shared_experts.gate_proj + up_proj, down_proj                    feed_forward.shared.gate_up, .down

The prediction layer's own ``embed_tokens`` and ``shared_head.head``, where a checkpoint has them, are not read: the
reference's prediction layer shares the decoder's embedding and output layer (Megatron's MultiTokenPredictionBlock,
and the reference's deepseek_mtp_module_conversion.patch maps neither).
"""

from __future__ import annotations

from pathlib import Path

from trainperf.errors import DataError
from trainperf.workloads.common.llm.hf_checkpoint import (
    CONFIG,
    Checkpoint,
    check_config,
    check_tensors,
    locate,
    read_json,
    write,
)
from trainperf.workloads.common.llm.model import DecoderArgs

WHAT = "the benchmark's DeepSeek-V3 checkpoint (deepseekv3_checkpoint_bf16, the reference's README)"
IGNORED = ("embed_tokens.weight", "shared_head.head.weight")  # of the prediction layer: shared with the decoder
CONFIG_FIELDS = {  # config.json's keys (Hugging Face's DeepseekV3Config) and the flavour's values
    "hidden_size": lambda a: a.dim,
    "num_hidden_layers": lambda a: a.n_layers,
    "num_attention_heads": lambda a: a.n_heads,
    "intermediate_size": lambda a: a.ffn_dim,
    "moe_intermediate_size": lambda a: a.moe.expert_ffn_dim,
    "n_routed_experts": lambda a: a.moe.n_experts,
    "num_experts_per_tok": lambda a: a.moe.top_k,
    "n_group": lambda a: a.moe.n_groups,
    "topk_group": lambda a: a.moe.group_top_k,
    "first_k_dense_replace": lambda a: a.dense_layers,
    "q_lora_rank": lambda a: a.mla.q_lora_rank,
    "kv_lora_rank": lambda a: a.mla.kv_lora_rank,
    "qk_rope_head_dim": lambda a: a.mla.rope_head_dim,
    "qk_nope_head_dim": lambda a: a.mla.nope_head_dim,
    "v_head_dim": lambda a: a.mla.v_head_dim,
    "num_nextn_predict_layers": lambda a: a.mtp_layers,
}


def _layer(p: str, a: DecoderArgs, dense: bool) -> dict[str, tuple[int, ...]]:
    m, h = a.mla, a.n_heads
    assert m is not None and m.q_lora_rank is not None and a.moe is not None
    out = {
        f"{p}input_layernorm.weight": (a.dim,),
        f"{p}post_attention_layernorm.weight": (a.dim,),
        f"{p}self_attn.q_a_proj.weight": (m.q_lora_rank, a.dim),
        f"{p}self_attn.q_a_layernorm.weight": (m.q_lora_rank,),
        f"{p}self_attn.q_b_proj.weight": (h * m.qk_head_dim, m.q_lora_rank),
        f"{p}self_attn.kv_a_proj_with_mqa.weight": (m.kv_lora_rank + m.rope_head_dim, a.dim),
        f"{p}self_attn.kv_a_layernorm.weight": (m.kv_lora_rank,),
        f"{p}self_attn.kv_b_proj.weight": (h * (m.nope_head_dim + m.v_head_dim), m.kv_lora_rank),
        f"{p}self_attn.o_proj.weight": (a.dim, h * m.v_head_dim),
    }
    if dense:
        return out | _swiglu(f"{p}mlp.", a.dim, a.ffn_dim)
    e, f = a.moe.n_experts, a.moe.expert_ffn_dim
    out |= {f"{p}mlp.gate.weight": (e, a.dim), f"{p}mlp.gate.e_score_correction_bias": (e,)}
    for j in range(e):
        out |= _swiglu(f"{p}mlp.experts.{j}.", a.dim, f)
    return out | _swiglu(f"{p}mlp.shared_experts.", a.dim, a.moe.n_shared_experts * f)


def _swiglu(p: str, dim: int, ffn: int) -> dict[str, tuple[int, ...]]:
    return {f"{p}gate_proj.weight": (ffn, dim), f"{p}up_proj.weight": (ffn, dim), f"{p}down_proj.weight": (dim, ffn)}


def expected(a: DecoderArgs) -> dict[str, tuple[int, ...]]:
    """The checkpoint's tensor names and shapes for a decoder of these sizes."""
    out: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (a.vocab_size, a.dim)}
    for i in range(a.n_layers):
        out |= _layer(f"model.layers.{i}.", a, i < a.dense_layers)
    for k in range(a.mtp_layers):
        p = f"model.layers.{a.n_layers + k}."
        out |= _layer(p, a, False) | {f"{p}enorm.weight": (a.dim,), f"{p}hnorm.weight": (a.dim,)}
        out |= {f"{p}eh_proj.weight": (a.dim, 2 * a.dim), f"{p}shared_head.norm.weight": (a.dim,)}
    return out | {"model.norm.weight": (a.dim,), "lm_head.weight": (a.vocab_size, a.dim)}


_ATTENTION = {
    "attention_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attention.q_a.weight": "self_attn.q_a_proj.weight",
    "attention.q_norm.weight": "self_attn.q_a_layernorm.weight",
    "attention.q_b.weight": "self_attn.q_b_proj.weight",
    "attention.kv_a.weight": "self_attn.kv_a_proj_with_mqa.weight",
    "attention.kv_norm.weight": "self_attn.kv_a_layernorm.weight",
    "attention.kv_b.weight": "self_attn.kv_b_proj.weight",
    "attention.out.weight": "self_attn.o_proj.weight",
    "feed_forward.down.weight": "mlp.down_proj.weight",
    "feed_forward.router.weight": "mlp.gate.weight",
    "feed_forward.router.expert_bias": "mlp.gate.e_score_correction_bias",
    "feed_forward.shared.down.weight": "mlp.shared_experts.down_proj.weight",
    "enorm.weight": "enorm.weight",
    "hnorm.weight": "hnorm.weight",
    "eh_proj.weight": "eh_proj.weight",
    "norm.weight": "shared_head.norm.weight",
}
_FIXED = {
    "embedding.weight": "model.embed_tokens.weight",
    "norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_STACKED = {  # the decoder's tensor -> (checkpoint parts, concatenated along dim, per expert transposed)
    "feed_forward.gate_up.weight": (("mlp.gate_proj.weight", "mlp.up_proj.weight"), 0),
    "feed_forward.shared.gate_up.weight": (
        ("mlp.shared_experts.gate_proj.weight", "mlp.shared_experts.up_proj.weight"),
        0,
    ),
}


def _prefix_and_rest(ours: str, a: DecoderArgs) -> tuple[str, str]:
    if ours.startswith("mtp."):
        rest = ours.removeprefix("mtp.")
        return f"model.layers.{a.n_layers}.", rest.removeprefix("block.")
    layer, _, rest = ours.removeprefix("layers.").partition(".")
    return f"model.layers.{layer}.", rest


def read(ckpt: Checkpoint, ours: str, a: DecoderArgs, *, experts: slice | None = None):
    """The decoder's tensor ``ours`` (a parameter or the router's bias buffer), whole, read from the checkpoint; of
    an MoE layer's stacked experts, the ``experts`` (a rank's slice under expert parallelism) or all."""
    import torch

    if ours in _FIXED:
        return _get(ckpt, _FIXED[ours])
    p, rest = _prefix_and_rest(ours, a)
    if rest in _ATTENTION:
        return _get(ckpt, p + _ATTENTION[rest])
    if rest in _STACKED:
        parts, dim = _STACKED[rest]
        return torch.cat([_get(ckpt, p + n) for n in parts], dim)
    assert a.moe is not None
    chosen = range(a.moe.n_experts)[experts or slice(None)]
    if rest == "feed_forward.experts.gate_up":  # (experts, dim, 2 * ffn): each expert's gate and up, transposed
        return torch.stack(
            [
                torch.cat([_get(ckpt, f"{p}mlp.experts.{j}.{w}_proj.weight").T for w in ("gate", "up")], 1)
                for j in chosen
            ]
        )
    if rest == "feed_forward.experts.down":  # (experts, ffn, dim)
        return torch.stack([_get(ckpt, f"{p}mlp.experts.{j}.down_proj.weight").T for j in chosen])
    raise KeyError(f"deepseekv3_671b: no checkpoint tensor for {ours}")


def to_reference(tensors: dict, a: DecoderArgs) -> dict:
    """The inverse of :func:`read`: the decoder's tensors (its parameters and the routers' bias buffers, by the
    decoder's names) under the checkpoint's names, the fused and stacked ones split as the reference stores them."""
    out = {}
    for ours, t in tensors.items():
        if ours in _FIXED:
            out[_FIXED[ours]] = t
            continue
        p, rest = _prefix_and_rest(ours, a)
        if rest in _ATTENTION:
            out[p + _ATTENTION[rest]] = t
        elif rest in _STACKED:
            out |= dict(zip((p + n for n in _STACKED[rest][0]), t.chunk(2, _STACKED[rest][1]), strict=True))
        elif rest == "feed_forward.experts.gate_up":
            for j, each in enumerate(t):
                gate, up = each.chunk(2, 1)
                out |= {f"{p}mlp.experts.{j}.gate_proj.weight": gate.T, f"{p}mlp.experts.{j}.up_proj.weight": up.T}
        elif rest == "feed_forward.experts.down":
            out |= {f"{p}mlp.experts.{j}.down_proj.weight": each.T for j, each in enumerate(t)}
        else:
            raise KeyError(f"deepseekv3_671b: no checkpoint tensor for {ours}")
    return {n: t.contiguous() for n, t in out.items()}


def config_of(a: DecoderArgs) -> dict:
    """config.json of a checkpoint of these sizes (the keys :func:`check` compares)."""
    config = {"architectures": ["DeepseekV3ForCausalLM"], "vocab_size": a.vocab_size, "torch_dtype": "bfloat16"}
    return config | {key: ours(a) for key, ours in CONFIG_FIELDS.items()}


def _get(ckpt: Checkpoint, name: str):
    from safetensors import safe_open

    with safe_open(str(ckpt.files[name]), framework="pt") as f:
        return f.get_tensor(name)


def vocabulary_of(folder: Path, a: DecoderArgs, ids: int) -> DecoderArgs:
    """The flavour with the checkpoint's embedding rows (config.json's ``vocab_size``), which Megatron pads from the
    tokenizer's 128,256 ids to a multiple of 1,280 (129,280); never fewer rows than the tokenizer's ``ids``."""
    import dataclasses

    path = Path(folder) / CONFIG
    rows = read_json(path).get("vocab_size") if path.is_file() else None
    if rows is None:
        return a
    if not isinstance(rows, int) or isinstance(rows, bool) or rows < ids:
        raise DataError(f"{path}: vocab_size {rows!r}, fewer rows than the tokenizer's {ids} ids; give {WHAT}")
    return dataclasses.replace(a, vocab_size=rows)


def check(folder: Path, a: DecoderArgs) -> Checkpoint:
    """Untimed: the checkpoint holds exactly the tensors of a decoder of ``a`` (the prediction layer's copies of
    the embedding and output layer aside), in their shapes, and its config.json agrees (headers only)."""
    ckpt = locate(folder, WHAT)
    check_config(ckpt, {key: ours(a) for key, ours in CONFIG_FIELDS.items()}, f"give {WHAT}")
    check_tensors(ckpt, expected(a), fix=f"give {WHAT}", shape_fix=f"give {WHAT}", ignored=IGNORED)
    return ckpt


def write_smoke_fixture(root: Path) -> str:
    """llama31_8b's tiny C4-layout files in ``root`` and, in ``root/checkpoint``, a checkpoint of the ``debug``
    flavour (seeded weights, the fixture tokenizer's vocabulary) in the reference's Hugging Face layout."""
    import dataclasses

    import torch

    from trainperf.workloads.common.llm import tokenizer
    from trainperf.workloads.deepseekv3_671b.model import FLAVOURS
    from trainperf.workloads.llama31_8b import reference

    said = reference.write_smoke_fixture(root)
    vocab = tokenizer.load(Path(root) / reference.TOKENIZER).get_vocab_size()
    a = dataclasses.replace(FLAVOURS["debug"], vocab_size=vocab)
    torch.manual_seed(671)
    tensors = {
        name: (torch.randn(shape) * 0.02 if len(shape) > 1 else torch.ones(shape))
        for name, shape in expected(a).items()
    }
    write(Path(root) / "checkpoint", {n: t.to(torch.bfloat16) for n, t in tensors.items()}, config_of(a))
    return f"{said}; a {a.n_layers}-layer DeepSeek-V3-layout checkpoint in safetensors"
