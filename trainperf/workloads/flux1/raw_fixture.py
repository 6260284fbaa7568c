"""A tiny raw-route data set in the reference's raw formats (``raw.py``, ``encoders.py``), for a smoke run and the
tests: CC12M rows as ``clean_cc12m.py`` saves them (a save_to_disk folder of Arrow streams: ``__key__``, ``txt``, the
original ``jpg`` and its 256 x 256 ``png``, each a datasets Image), COCO samples as ``coco_to_webdataset.py`` writes
them (tar shards of ``.png``, ``.txt``, ``.json`` with the timestep), and tiny random encoders of the widths the
transformer's ``debug`` and ``schnell`` flavours read (T5 4,096, CLIP pooled 768, 16 latent channels), saved by
``save_pretrained`` as safetensors, with tokenizers built offline by the ``tokenizers`` library. Nothing is
downloaded; the same files on every machine (fixed seeds)."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np

from trainperf.workloads.flux1 import encoders, flow, raw, reference

WORDS = ("a", "red", "blue", "green", "cat", "dog", "bird", "on", "the", "mat", "sofa", "grass", "photo", "of")
T5_SPECIALS = ("<pad>", "</s>", "<unk>")  # T5's ids 0, 1, 2
CLIP_SPECIALS = ("<|startoftext|>", "<|endoftext|>")
# the rest of a datasets state.json, as save_to_disk writes it
STATE_FIELDS = {"_fingerprint": "trainperf-fixture", "_format_columns": None, "_format_kwargs": {},
                "_format_type": None, "_output_all_columns": False, "_split": None}  # fmt: skip


def save_to_disk(folder: Path, table, features: dict, shards: int) -> None:
    """``table`` (a pyarrow table) as `datasets`' save_to_disk writes a folder: ``shards`` Arrow stream files,
    ``state.json`` listing them, ``dataset_info.json`` with ``features`` (this fixture's and fixture.py's)."""
    import pyarrow as pa

    folder.mkdir(parents=True, exist_ok=True)
    n = table.num_rows
    names = [f"data-{k:05d}-of-{shards:05d}.arrow" for k in range(shards)]
    for k, name in enumerate(names):
        lo, hi = n * k // shards, n * (k + 1) // shards
        with pa.OSFile(str(folder / name), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table.slice(lo, hi - lo))
    state = {"_data_files": [{"filename": name} for name in names], **STATE_FIELDS}
    (folder / reference.STATE).write_text(json.dumps(state, indent=2, sort_keys=True))
    (folder / reference.INFO).write_text(json.dumps({"features": features}, indent=2))


def captions(rng: np.random.Generator, n: int) -> list[str]:
    return [" ".join(["a", "photo", "of", "a", *rng.choice(WORDS, size=3)]) for _ in range(n)]


def image(rng: np.random.Generator, width: int, height: int, fmt: str) -> bytes:
    """A smooth random picture (a 4 x 4 grid of colours, bicubic-enlarged), encoded as ``fmt``."""
    from PIL import Image

    grid = Image.fromarray(rng.integers(0, 256, (4, 4, 3), dtype=np.uint8))
    buf = io.BytesIO()
    grid.resize((width, height), Image.Resampling.BICUBIC).save(buf, format=fmt)
    return buf.getvalue()


def write_cc12m(folder: Path, rng: np.random.Generator, n: int, *, shards: int = 2) -> None:
    """``n`` CC12M rows as clean_cc12m.py saves them: the original (here 320 x 256) and its 256 x 256 copy."""
    import pyarrow as pa

    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    schema = pa.schema([("__key__", pa.string()), ("txt", pa.string()), ("jpg", image_type), ("png", image_type)])
    size = raw.IMAGE_SIZE
    rows = {"__key__": [f"{i:09d}" for i in range(n)], "txt": captions(rng, n), "jpg": [], "png": []}
    for _ in range(n):
        rows["jpg"].append({"bytes": image(rng, size + 64, size, "JPEG"), "path": None})
        rows["png"].append({"bytes": image(rng, size, size, "PNG"), "path": None})
    features = {"__key__": {"dtype": "string", "_type": "Value"}, "txt": {"dtype": "string", "_type": "Value"},
                "jpg": {"_type": "Image"}, "png": {"_type": "Image"}}  # fmt: skip
    save_to_disk(folder, pa.table(rows, schema=schema), features, shards)


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def write_coco(folder: Path, rng: np.random.Generator, n: int, *, per_shard: int = 10) -> None:
    """``n`` COCO samples as coco_to_webdataset.py writes them (timesteps 0..7 in turn), ``per_shard`` a shard."""
    folder.mkdir(parents=True, exist_ok=True)
    texts = captions(rng, n)
    for shard in range(-(-n // per_shard)):
        with tarfile.open(folder / f"shard_{shard:05d}.tar", "w") as tar:
            for i in range(shard * per_shard, min(n, (shard + 1) * per_shard)):
                base = f"{100 + i:012d}"
                name = f"COCO_val2014_{base}.png"
                meta = {"id": str(100 + i), "caption": texts[i], "filename": name, "timestep": i % 8}
                _add(tar, f"{base}.png", image(rng, raw.IMAGE_SIZE, raw.IMAGE_SIZE, "PNG"))
                _add(tar, f"{base}.txt", texts[i].encode())
                _add(tar, f"{base}.json", json.dumps(meta, indent=2).encode())


def _byte_chars() -> list[str]:
    """GPT-2's printable stand-ins for the 256 bytes (the alphabet of CLIP's byte-level BPE)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    extra = iter(range(256, 512))
    return [chr(b if b in keep else next(extra)) for b in range(256)]


def write_tokenizers(t5: Path, clip: Path) -> tuple[int, int]:
    """A word-level T5 tokenizer (``tokenizer.json``: a Unigram over the fixture's words and letters, ``</s>`` after
    each caption) and a CLIP tokenizer of single bytes (``vocab.json``, ``merges.txt`` with no merges); their sizes."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    pieces = [(p, 0.0) for p in T5_SPECIALS] + [("▁" + w, -1.0) for w in WORDS]
    pieces += [(c, -5.0) for c in "abcdefghijklmnopqrstuvwxyz▁"]
    tok = Tokenizer(models.Unigram(pieces, unk_id=2, byte_fallback=False))
    tok.pre_tokenizer, tok.decoder = pre_tokenizers.Metaspace(), decoders.Metaspace()
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    tok.save(str(t5 / "tokenizer.json"))
    t5_config = {"tokenizer_class": "T5Tokenizer", "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>",
                 "extra_ids": 0, "model_max_length": 512}  # fmt: skip
    (t5 / "tokenizer_config.json").write_text(json.dumps(t5_config, indent=2))
    chars = _byte_chars()
    vocab = {c: i for i, c in enumerate([*chars, *(c + "</w>" for c in chars), *CLIP_SPECIALS])}
    (clip / "vocab.json").write_text(json.dumps(vocab))
    (clip / "merges.txt").write_text("#version: 0.2\n")
    bos, eos = CLIP_SPECIALS
    clip_config = {"tokenizer_class": "CLIPTokenizer", "bos_token": bos, "eos_token": eos, "pad_token": eos,
                   "unk_token": eos, "model_max_length": encoders.CLIP_LEN}  # fmt: skip
    (clip / "tokenizer_config.json").write_text(json.dumps(clip_config, indent=2))
    return len(pieces), len(vocab)


def write_encoders(root: Path, *, t5_dim: int = 4096, clip_dim: int = 768, latent_channels: int = 16) -> None:
    """Tiny random T5 encoder, CLIP text model and FLUX-configured autoencoder (four levels: 256 -> 32), drawn from
    a fixed seed (the caller's random state is left as it was), saved with their tokenizers under ``root``."""
    import torch
    from diffusers import AutoencoderKL
    from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

    t5_dir, clip_dir = root / encoders.T5, root / encoders.CLIP
    for d in (t5_dir, clip_dir):
        d.mkdir(parents=True, exist_ok=True)
    t5_vocab, clip_vocab = write_tokenizers(t5_dir, clip_dir)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(20260727)
        t5 = T5EncoderModel(T5Config(vocab_size=t5_vocab, d_model=t5_dim, d_kv=8, d_ff=16, num_layers=1, num_heads=2,
                                     feed_forward_proj="gated-gelu", relative_attention_num_buckets=8))  # fmt: skip
        eos = clip_vocab - 1
        clip = CLIPTextModel(CLIPTextConfig(vocab_size=clip_vocab, hidden_size=clip_dim, intermediate_size=32,
                                            num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=77,
                                            bos_token_id=eos - 1, eos_token_id=eos, pad_token_id=eos))  # fmt: skip
        blocks = 4  # FLUX's four levels: a 256 x 256 image to a 32 x 32 latent
        ae = AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * blocks,
                           up_block_types=("UpDecoderBlock2D",) * blocks, block_out_channels=(8,) * blocks,
                           layers_per_block=1, latent_channels=latent_channels, norm_num_groups=4,
                           sample_size=raw.IMAGE_SIZE, scaling_factor=flow.AE_SCALE, shift_factor=flow.AE_SHIFT,
                           use_quant_conv=False, use_post_quant_conv=False)  # fmt: skip
    with encoders.quietly():
        t5.save_pretrained(t5_dir)  # safetensors: transformers 5 writes no other format
        clip.save_pretrained(clip_dir)
        ae.save_pretrained(root / encoders.AUTOENCODER, safe_serialization=True)


def write_raw_fixture(root: Path, *, train: int = 8, validation: int = 16) -> str:
    """The raw route's layout in ``root`` (``<data-dir>/flux1/reference``): ``train`` CC12M rows, ``validation``
    COCO samples (timesteps 0..7 in turn) and the encoders; what was written, in words."""
    root = Path(root)
    rng = np.random.default_rng(2)
    write_cc12m(root / raw.TRAIN, rng, train)
    write_coco(root / raw.VALIDATION, rng, validation)
    write_encoders(root / raw.ENCODERS)
    return (
        f"{train} CC12M rows and {validation} COCO samples of 256 x 256 images and captions in the reference's raw "
        "formats, with tiny random T5 (width 4,096), CLIP (pooled 768) and autoencoder (16 channels) as safetensors"
    )
