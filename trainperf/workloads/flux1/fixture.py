"""A tiny flux1 data set in the reference's own layouts and shapes, for a smoke run and the tests.

The preprocessed route (``reference.py``): datasets-style save_to_disk folders of Arrow streams whose rows hold
``.npy`` bytes of bf16 bits, as the reference's ``preprocess_flux_dataset.py`` writes them, and float16 empty
encodings as ``save_empty_encodings.py`` writes them. The values are random (no encoder runs here); the shapes are the
reference's: T5 256 x 4,096, CLIP 768, posterior 16 x 32 x 32 (a 256 x 256 image).

The raw route (``raw.py``, ``encoders.py``; ``raw_fixture.py`` writes it): images and captions as the reference's
``clean_cc12m.py`` and ``coco_to_webdataset.py`` leave them, and tiny random encoders of the reference's widths."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from trainperf.workloads.flux1 import reference

T5_LEN, T5_DIM, CLIP_DIM, LATENT = 256, 4096, 768, (16, 32, 32)


def to_npy_bytes(values: np.ndarray) -> bytes:
    """float values -> the reference's serialization: bf16 bits as a uint16 ``.npy`` (round to nearest even)."""
    import torch

    bits = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32)).to(torch.bfloat16).view(torch.uint16)
    buf = io.BytesIO()
    np.save(buf, bits.numpy())
    return buf.getvalue()


def encoding_rows(rng: np.random.Generator, n: int, *, timesteps: bool, t5_len: int = T5_LEN) -> dict[str, list]:
    """``n`` rows of random encodings (timestep indices 0..7 in turn where asked)."""
    rows: dict[str, list] = {"__key__": [], "t5_encodings": [], "clip_encodings": [], "mean": [], "logvar": []}
    for i in range(n):
        rows["__key__"].append(f"{i:09d}")
        rows["t5_encodings"].append(to_npy_bytes(0.1 * rng.standard_normal((t5_len, T5_DIM))))
        rows["clip_encodings"].append(to_npy_bytes(rng.standard_normal(CLIP_DIM)))
        rows["mean"].append(to_npy_bytes(rng.standard_normal(LATENT)))
        rows["logvar"].append(to_npy_bytes(rng.uniform(-8.0, -4.0, LATENT)))
    if timesteps:
        rows["timestep"] = [i % 8 for i in range(n)]
    return rows


def write_split(folder: Path, rows: dict[str, list], *, shards: int = 2) -> None:
    """A save_to_disk folder of the preprocessed encodings (``raw_fixture.save_to_disk``)."""
    import pyarrow as pa

    from trainperf.workloads.flux1.raw_fixture import save_to_disk

    fields = [("__key__", pa.string())] + [(c, pa.binary()) for c in reference.ENCODINGS]
    if "timestep" in rows:
        fields.append(("timestep", pa.int32()))
    table = pa.table({name: rows[name] for name, _ in fields}, schema=pa.schema(fields))
    features = {name: {"dtype": str(kind), "_type": "Value"} for name, kind in fields}
    save_to_disk(folder, table, features, shards)


def write_empty(folder: Path, rng: np.random.Generator) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / reference.T5_EMPTY, (0.1 * rng.standard_normal((1, T5_LEN, T5_DIM))).astype(np.float16))
    np.save(folder / reference.CLIP_EMPTY, rng.standard_normal((1, CLIP_DIM)).astype(np.float16))


def write_smoke_fixture(root: Path, *, train: int = 8, validation: int = 16) -> str:
    """Both routes' layouts in ``root`` (read as ``<data-dir>/flux1/reference``; ``data_route=auto`` reads the
    preprocessed one): ``train`` CC12M-style rows, ``validation`` COCO-style rows (timesteps 0..7 in turn) and the
    empty encodings; the same counts of images and captions and the raw route's encoders."""
    from trainperf.workloads.flux1 import raw_fixture

    root = Path(root)
    raw = raw_fixture.write_raw_fixture(root, train=train, validation=validation)
    rng = np.random.default_rng(1)
    write_split(root / reference.TRAIN, encoding_rows(rng, train, timesteps=False))
    write_split(root / reference.VALIDATION, encoding_rows(rng, validation, timesteps=True))
    write_empty(root / reference.EMPTY, rng)
    return (
        f"preprocessed CC12M and COCO in the reference's Arrow layout ({train} + {validation} rows of random "
        "encodings: T5 256 x 4,096, CLIP 768, posterior 16 x 32 x 32) and the empty encodings; for data_route=raw, "
        + raw
    )
