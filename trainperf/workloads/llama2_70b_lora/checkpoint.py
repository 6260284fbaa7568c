"""The base model's checkpoint as the reference loads it: a Hugging Face model folder (``config.json``, safetensors
shards and ``model.safetensors.index.json``) of Llama 2 70B with fused query/key/value projections
(``Llama2-70b-fused-qkv-mlperf``, read by ``AutoModelForCausalLM.from_pretrained`` in the reference's
``scripts/utils.py``).

Nothing in a checkpoint is executed: tensors are read from safetensors files (a header of names, dtypes and shapes,
then raw bytes); a PyTorch pickle (``pytorch_model.bin``, ``*.pt``) is refused. :func:`check` compares every tensor's
name and shape with the model's before the clock starts, reading the headers only; :func:`full_tensor` reads one
tensor in the shape of the decoder's own (fused gate/up) parameter.

The reference's names and the decoder's (``trainperf/workloads/common/llm/model.py``)::

    model.embed_tokens.weight                    embedding.weight
    model.layers.<i>.input_layernorm.weight      layers.<i>.attention_norm.weight
    model.layers.<i>.self_attn.qkv_proj.weight   layers.<i>.attention.qkv.weight   (rows: queries, keys, values)
    model.layers.<i>.self_attn.o_proj.weight     layers.<i>.attention.out.weight
    model.layers.<i>.post_attention_layernorm    layers.<i>.ffn_norm.weight
    model.layers.<i>.mlp.gate_proj / up_proj     layers.<i>.feed_forward.gate_up.weight   (gate rows, then up rows)
    model.layers.<i>.mlp.down_proj.weight        layers.<i>.feed_forward.down.weight
    model.norm.weight, lm_head.weight            norm.weight, output.weight
"""

from __future__ import annotations

from pathlib import Path

from trainperf.workloads.common.llm.hf_checkpoint import (
    CONFIG,
    INDEX,
    Checkpoint,
    check_config,
    check_tensors,
    locate,
    write,
)
from trainperf.workloads.common.llm.model import DecoderArgs

# config.json's keys and the flavour's fields they must equal (Hugging Face's LlamaConfig names).
CONFIG_FIELDS = {
    "hidden_size": "dim",
    "num_hidden_layers": "n_layers",
    "num_attention_heads": "n_heads",
    "num_key_value_heads": "n_kv_heads",
    "intermediate_size": "ffn_dim",
    "vocab_size": "vocab_size",
}


def expected(a: DecoderArgs) -> dict[str, tuple[int, ...]]:
    """The reference checkpoint's tensor names and shapes for a decoder of these sizes."""
    qkv = (a.n_heads + 2 * a.n_kv_heads) * a.head_dim
    out: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (a.vocab_size, a.dim)}
    for i in range(a.n_layers):
        p = f"model.layers.{i}."
        out |= {
            f"{p}input_layernorm.weight": (a.dim,),
            f"{p}self_attn.qkv_proj.weight": (qkv, a.dim),
            f"{p}self_attn.o_proj.weight": (a.dim, a.dim),
            f"{p}post_attention_layernorm.weight": (a.dim,),
            f"{p}mlp.gate_proj.weight": (a.ffn_dim, a.dim),
            f"{p}mlp.up_proj.weight": (a.ffn_dim, a.dim),
            f"{p}mlp.down_proj.weight": (a.dim, a.ffn_dim),
        }
    return out | {"model.norm.weight": (a.dim,), "lm_head.weight": (a.vocab_size, a.dim)}


def reference_names(ours: str) -> list[str]:
    """The checkpoint tensors that make the decoder's parameter ``ours`` (a LoRA layer's ``base_layer`` is its
    base); [] for a parameter the checkpoint does not hold (the LoRA adapters)."""
    name = ours.replace(".base_layer.", ".")
    if "lora_" in name:
        return []
    fixed = {"embedding.weight": "model.embed_tokens.weight", "norm.weight": "model.norm.weight"}
    if name in fixed or name == "output.weight":
        return [fixed.get(name, "lm_head.weight")]
    layer, _, rest = name.removeprefix("layers.").partition(".")
    p = f"model.layers.{layer}."
    parts = {
        "attention_norm.weight": ["input_layernorm.weight"],
        "attention.qkv.weight": ["self_attn.qkv_proj.weight"],
        "attention.out.weight": ["self_attn.o_proj.weight"],
        "ffn_norm.weight": ["post_attention_layernorm.weight"],
        "feed_forward.gate_up.weight": ["mlp.gate_proj.weight", "mlp.up_proj.weight"],
        "feed_forward.down.weight": ["mlp.down_proj.weight"],
    }
    if rest not in parts:
        raise KeyError(f"llama2_70b_lora: no checkpoint tensor for the parameter {ours}")
    return [p + n for n in parts[rest]]


def config_of(a: DecoderArgs) -> dict:
    """config.json for a decoder of these sizes, in Hugging Face's LlamaConfig names."""
    return {
        "architectures": ["LlamaForCausalLM"],
        **{key: getattr(a, field) for key, field in CONFIG_FIELDS.items()},
        "rms_norm_eps": a.norm_eps,
        "rope_theta": a.rope_theta,
        "torch_dtype": "bfloat16",
    }


def to_reference(state: dict) -> dict:
    """The decoder's tensors (``state``: its names) under the reference's names (the gate/up matrix split in two)."""
    out = {}
    for ours, t in state.items():
        names = reference_names(ours)
        out |= dict(zip(names, t.chunk(len(names)), strict=True))
    return out


def check(folder: Path, args: DecoderArgs) -> Checkpoint:
    """Untimed: the checkpoint holds exactly the tensors of a decoder of ``args``, in their shapes (headers only)."""
    ckpt = locate(folder, "the reference's Llama2-70b-fused-qkv-mlperf")
    fields = {key: getattr(args, field) for key, field in CONFIG_FIELDS.items()}
    check_config(ckpt, fields, "give the Llama 2 70B checkpoint with fused qkv the reference uses")
    check_tensors(
        ckpt,
        expected(args),
        fix="the reference's checkpoint has fused qkv_proj tensors (Llama2-70b-fused-qkv-mlperf)",
        shape_fix="the checkpoint is of another model size",
        ignored=("rotary_emb.inv_freq",),
    )
    return ckpt


def full_tensor(ckpt: Checkpoint, ours: str):
    """The parameter ``ours`` of the decoder, read from the checkpoint (gate and up rows stacked), in its dtype."""
    import torch
    from safetensors import safe_open

    parts = []
    for name in reference_names(ours):
        with safe_open(str(ckpt.files[name]), framework="pt") as f:
            parts.append(f.get_tensor(name))
    return parts[0] if len(parts) == 1 else torch.cat(parts)


__all__ = [
    "CONFIG",
    "INDEX",
    "Checkpoint",
    "check",
    "config_of",
    "to_reference",
    "expected",
    "full_tensor",
    "locate",
    "reference_names",
    "write",
]
