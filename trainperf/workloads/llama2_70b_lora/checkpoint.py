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

import json
from dataclasses import dataclass
from pathlib import Path

from trainperf.errors import DataError
from trainperf.workloads.common.llm.model import DecoderArgs

CONFIG, INDEX, SINGLE = "config.json", "model.safetensors.index.json", "model.safetensors"
PICKLES = ("pytorch_model.bin", "pytorch_model-*.bin", "*.pt", "*.pth", "*.ckpt")
MAX_JSON_BYTES = 16 * 2**20  # the 70B's index is 60 kB
SAFE_FIX = (
    "trainperf reads safetensors only (a pickle can run code when loaded): convert the checkpoint on a machine you "
    "trust, e.g. transformers' model.save_pretrained(folder, safe_serialization=True)"
)
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


@dataclass(frozen=True)
class Checkpoint:
    folder: Path
    files: dict[str, Path]  # tensor name -> the safetensors file holding it


def _json(path: Path) -> dict:
    if path.stat().st_size > MAX_JSON_BYTES:
        raise DataError(f"{path}: over {MAX_JSON_BYTES // 2**20} MiB, larger than any model's {path.name}")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(f"{path}: not JSON ({e}); copy the checkpoint's {path.name} again") from None
    if not isinstance(value, dict):
        raise DataError(f"{path}: expected a JSON object")
    return value


def locate(folder: Path) -> Checkpoint:
    """The checkpoint's safetensors files and which tensor each holds (from the index, or the one file's header)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"{folder}: no base model checkpoint; place the reference's Llama2-70b-fused-qkv-mlperf there")
    if not (folder / SINGLE).is_file() and not (folder / INDEX).is_file():
        pickles = [p.name for pattern in PICKLES for p in folder.glob(pattern)]
        if pickles:
            raise DataError(f"{folder / pickles[0]}: a PyTorch pickle, not safetensors; {SAFE_FIX}")
        raise DataError(f"{folder}: neither {INDEX} nor {SINGLE}; the base checkpoint is a folder of safetensors")
    if (folder / INDEX).is_file():
        weight_map = _json(folder / INDEX).get("weight_map")
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise DataError(f"{folder / INDEX}: no weight_map of tensor names to files")
        files = {}
        for name, file in weight_map.items():
            path = folder / file
            if Path(file).name != file or not file.endswith(".safetensors"):
                raise DataError(f"{folder / INDEX}: {name} lies in {file!r}, not a .safetensors file of the folder")
            files[name] = path
        return Checkpoint(folder, files)
    return Checkpoint(folder, {name: folder / SINGLE for name in _header(folder / SINGLE)})


def _header(path: Path) -> dict[str, tuple[int, ...]]:
    """Names and shapes of a safetensors file's tensors (its header only: no tensor is read)."""
    from safetensors import safe_open

    if not path.is_file():
        raise DataError(f"{path}: missing; the checkpoint's index names it")
    with path.open("rb") as f:
        head = f.read(8)
    if head[:2] == b"PK" or head[:1] == b"\x80":
        raise DataError(f"{path}: a PyTorch pickle (zip or pickle stream) named .safetensors; {SAFE_FIX}")
    try:
        with safe_open(str(path), framework="pt") as f:
            return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118 (safe_open is no dict)
    except Exception as e:  # safetensors raises its own SafetensorError for a damaged header
        raise DataError(f"{path}: not a safetensors file ({e}); copy the checkpoint again") from None


def check(folder: Path, args: DecoderArgs) -> Checkpoint:
    """Untimed: the checkpoint holds exactly the tensors of a decoder of ``args``, in their shapes (headers only)."""
    ckpt = locate(folder)
    if (ckpt.folder / CONFIG).is_file():
        config = _json(ckpt.folder / CONFIG)
        for key, field in CONFIG_FIELDS.items():
            if key in config and config[key] != getattr(args, field):
                raise DataError(
                    f"{ckpt.folder / CONFIG}: {key} {config[key]!r}, the model has {getattr(args, field)}; "
                    "give the Llama 2 70B checkpoint with fused qkv the reference uses"
                )
    want = expected(args)
    missing = [n for n in want if n not in ckpt.files]
    if missing:
        raise DataError(
            f"{ckpt.folder}: no tensor {missing[0]} ({len(missing)} of the model's {len(want)} missing); "
            "the reference's checkpoint has fused qkv_proj tensors (Llama2-70b-fused-qkv-mlperf)"
        )
    extra = sorted(n for n in ckpt.files if n not in want and not n.endswith("rotary_emb.inv_freq"))
    if extra:
        raise DataError(f"{ckpt.folder}: tensor {extra[0]} is not part of the model; give the reference's checkpoint")
    for path in sorted(set(ckpt.files.values())):
        for name, shape in _header(path).items():
            if name in want and shape != want[name]:
                raise DataError(
                    f"{path}: {name} has shape {list(shape)}, the model's is {list(want[name])}; the checkpoint is "
                    "of another model size"
                )
            if name in want and ckpt.files[name] != path:
                raise DataError(f"{path}: holds {name}, which the index places in {ckpt.files[name].name}")
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


def write(folder: Path, tensors: dict, config: dict, *, shards: int = 2) -> None:
    """A checkpoint folder in the reference's layout (``config.json``, ``shards`` safetensors files and the index);
    ``tensors`` by the reference's names. For fixtures and tests."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    names = list(tensors)
    weight_map = {}
    for k in range(shards):
        file = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n].contiguous() for n in names[k::shards]}
        save_file(part, str(folder / file), metadata={"format": "pt"})
        weight_map |= dict.fromkeys(part, file)
    (folder / INDEX).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}, indent=1), encoding="utf-8")
    (folder / CONFIG).write_text(json.dumps(config, indent=1), encoding="utf-8")
