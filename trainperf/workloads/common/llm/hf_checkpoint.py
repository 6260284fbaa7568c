"""A Hugging Face model folder as the current round's references load their starting checkpoints: ``config.json``,
safetensors shards and ``model.safetensors.index.json`` (or one ``model.safetensors``).

Nothing in a checkpoint is executed: tensors are read from safetensors files (a header of names, dtypes and shapes,
then raw bytes); a PyTorch pickle (``pytorch_model.bin``, ``*.pt``) is refused; the index's file names must be plain
names of files in the folder. Each benchmark maps the names to its model's (llama2_70b_lora, deepseekv3_671b).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from trainperf.errors import DataError

CONFIG, INDEX, SINGLE = "config.json", "model.safetensors.index.json", "model.safetensors"
PICKLES = ("pytorch_model.bin", "pytorch_model-*.bin", "*.pt", "*.pth", "*.ckpt")
MAX_JSON_BYTES = 16 * 2**20  # the 70B's index is 60 kB
SAFE_FIX = (
    "trainperf reads safetensors only (a pickle can run code when loaded): convert the checkpoint on a machine you "
    "trust, e.g. transformers' model.save_pretrained(folder, safe_serialization=True)"
)


@dataclass(frozen=True)
class Checkpoint:
    folder: Path
    files: dict[str, Path]  # tensor name -> the safetensors file holding it


def read_json(path: Path) -> dict:
    if path.stat().st_size > MAX_JSON_BYTES:
        raise DataError(f"{path}: over {MAX_JSON_BYTES // 2**20} MiB, larger than any model's {path.name}")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(f"{path}: not JSON ({e}); copy the checkpoint's {path.name} again") from None
    if not isinstance(value, dict):
        raise DataError(f"{path}: expected a JSON object")
    return value


def locate(folder: Path, what: str) -> Checkpoint:
    """The checkpoint's safetensors files and which tensor each holds (from the index, or the one file's header)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"{folder}: no checkpoint; place {what} there")
    if not (folder / SINGLE).is_file() and not (folder / INDEX).is_file():
        pickles = [p.name for pattern in PICKLES for p in folder.glob(pattern)]
        if pickles:
            raise DataError(f"{folder / pickles[0]}: a PyTorch pickle, not safetensors; {SAFE_FIX}")
        raise DataError(f"{folder}: neither {INDEX} nor {SINGLE}; the checkpoint is a folder of safetensors")
    if (folder / INDEX).is_file():
        weight_map = read_json(folder / INDEX).get("weight_map")
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise DataError(f"{folder / INDEX}: no weight_map of tensor names to files")
        files = {}
        for name, file in weight_map.items():
            path = folder / file
            if Path(file).name != file or not file.endswith(".safetensors"):
                raise DataError(f"{folder / INDEX}: {name} lies in {file!r}, not a .safetensors file of the folder")
            files[name] = path
        return Checkpoint(folder, files)
    return Checkpoint(folder, {name: folder / SINGLE for name in header(folder / SINGLE)})


def header(path: Path) -> dict[str, tuple[int, ...]]:
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


def check_config(ckpt: Checkpoint, fields: dict[str, object], fix: str) -> None:
    """config.json (where the folder has one) agrees with the model on every key of ``fields`` it holds."""
    if not (ckpt.folder / CONFIG).is_file():
        return
    config = read_json(ckpt.folder / CONFIG)
    for key, ours in fields.items():
        if key in config and config[key] != ours:
            raise DataError(f"{ckpt.folder / CONFIG}: {key} {config[key]!r}, the model has {ours}; {fix}")


def check_tensors(
    ckpt: Checkpoint, want: dict[str, tuple[int, ...]], *, fix: str, shape_fix: str, ignored: tuple[str, ...] = ()
) -> None:
    """Headers only: the checkpoint holds exactly the tensors of ``want`` (names ending in ``ignored`` aside), each in
    its shape and in the file the index places it in."""
    missing = [n for n in want if n not in ckpt.files]
    if missing:
        raise DataError(
            f"{ckpt.folder}: no tensor {missing[0]} ({len(missing)} of the model's {len(want)} missing); {fix}"
        )
    extra = sorted(n for n in ckpt.files if n not in want and not n.endswith(ignored))
    if extra:
        raise DataError(f"{ckpt.folder}: tensor {extra[0]} is not part of the model; {fix}")
    for path in sorted(set(ckpt.files.values())):
        for name, shape in header(path).items():
            if name in want and shape != want[name]:
                raise DataError(
                    f"{path}: {name} has shape {list(shape)}, the model's is {list(want[name])}; {shape_fix}"
                )
            if name in want and ckpt.files[name] != path:
                raise DataError(f"{path}: holds {name}, which the index places in {ckpt.files[name].name}")


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
