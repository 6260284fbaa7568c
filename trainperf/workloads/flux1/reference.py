"""The reference's preprocessed data: CC12M (training) and the COCO-2014 subset (validation) as the reference's
preprocessing leaves them (``scripts/preprocess_flux_dataset.py``: Hugging Face ``datasets``' ``save_to_disk``
folders), the empty encodings classifier-free dropout uses, and a tiny fixture in that layout.

``<data-dir>/flux1/reference/``::

    cc12m_preprocessed/     state.json, dataset_info.json, data-00000-of-000NN.arrow ...   1,099,776 samples
    coco_preprocessed/      the same layout, with a timestep column                       29,696 samples
    empty_encodings/        t5_empty.npy (1, 256, 4096) and clip_empty.npy (1, 768), float16

Each ``.arrow`` file is an Arrow IPC stream (as ``datasets``' ArrowWriter writes it), its files listed in order by
``state.json``'s ``_data_files``. A row holds ``__key__`` (string), ``t5_encodings`` (T5-XXL's last hidden state,
256 x 4,096), ``clip_encodings`` (CLIP ViT-L's pooled output, 768), ``mean`` and ``logvar`` (the FLUX autoencoder's
posterior of a 256 x 256 image, 16 x 32 x 32), each one ``.npy`` file in bytes holding the bf16 bits as uint16
(``serialize_numpy_array``), and ``timestep`` (int32; the validation sample's index k in 0..7, null in training).
Nothing is unpickled: ``np.load`` runs with ``allow_pickle=False``.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainperf.errors import DataError

TRAIN, VALIDATION, EMPTY = "cc12m_preprocessed", "coco_preprocessed", "empty_encodings"
T5_EMPTY, CLIP_EMPTY = "t5_empty.npy", "clip_empty.npy"
STATE, INFO = "state.json", "dataset_info.json"
ENCODINGS = ("t5_encodings", "clip_encodings", "mean", "logvar")
WHERE = "(mlcommons/training text_to_image README, 'Preprocessing': the preprocessed CC12M, COCO and empty encodings)"
MAX_JSON_BYTES = 16 * 2**20


@dataclass(frozen=True)
class Files:
    train: Path
    validation: Path
    empty: Path


def reference_dir(data_dir: Path) -> Path:
    return Path(data_dir) / "flux1" / "reference"


def find(data_dir: Path) -> Files:
    root = reference_dir(data_dir)
    if not root.is_dir():
        raise DataError(f"{root}: no flux1 reference data; place the preprocessed encodings there {WHERE}")
    files = Files(root / TRAIN, root / VALIDATION, root / EMPTY)
    for folder in (files.train, files.validation):
        if not (folder / STATE).is_file():
            raise DataError(f"{folder / STATE}: missing; {folder.name} must be a datasets save_to_disk folder {WHERE}")
    for name in (T5_EMPTY, CLIP_EMPTY):
        if not (files.empty / name).is_file():
            raise DataError(
                f"{files.empty / name}: missing; the empty encodings are part of the reference data {WHERE}"
            )
    return files


def arrow_files(folder: Path) -> list[Path]:
    """The Arrow files of a save_to_disk folder, in ``state.json``'s order."""
    state_path = folder / STATE
    if state_path.stat().st_size > MAX_JSON_BYTES:
        raise DataError(f"{state_path}: {state_path.stat().st_size} bytes; a datasets state.json is a few kB")
    try:
        entries = json.loads(state_path.read_text())["_data_files"]
        names = [e["filename"] for e in entries]
    except (ValueError, KeyError, TypeError) as e:
        raise DataError(f"{state_path}: not a datasets state.json (no _data_files[].filename: {e})") from None
    if not names or any(not isinstance(n, str) or "/" in n or n.startswith(".") for n in names):
        raise DataError(f"{state_path}: _data_files must name the folder's .arrow files, got {names!r}")
    paths = [folder / n for n in names]
    for p in paths:
        if not p.is_file():
            raise DataError(f"{p}: listed in {state_path} but missing; copy the folder again")
    return paths


def open_table(path: Path, *, validation: bool):
    """One Arrow stream file, memory-mapped (no encoding is read until a row is used), its columns checked."""
    import pyarrow as pa

    try:
        table = pa.ipc.open_stream(pa.memory_map(str(path))).read_all()
    except (pa.ArrowInvalid, OSError) as e:
        raise DataError(f"{path}: not an Arrow stream as datasets writes it ({e}); copy the folder again") from None
    need = {"__key__": pa.string(), **{c: pa.binary() for c in ENCODINGS}}
    if validation:
        need["timestep"] = pa.int32()
    for name, kind in need.items():
        if name not in table.column_names:
            raise DataError(f"{path}: no column {name!r} (columns {table.column_names}); not a flux1 encodings file")
        if not table.schema.field(name).type.equals(kind) and not (
            name == "timestep" and pa.types.is_integer(table.schema.field(name).type)
        ):
            raise DataError(f"{path}: column {name} is {table.schema.field(name).type}, not {kind}")
    return table


@dataclass(frozen=True)
class Encodings:
    """One split: its memory-mapped tables and, for validation, each sample's timestep index."""

    folder: Path
    paths: list[Path]
    tables: list
    starts: np.ndarray  # first row of each table
    timesteps: np.ndarray | None

    def __len__(self) -> int:
        return int(self.starts[-1])

    def locate(self, i: int) -> tuple[int, int]:
        t = int(np.searchsorted(self.starts, i, side="right")) - 1
        return t, i - int(self.starts[t])


def load(folder: Path, *, validation: bool) -> Encodings:
    """A split's tables, mapped; validation's timesteps read and checked (each an index 0..7)."""
    paths = arrow_files(folder)
    tables = [open_table(p, validation=validation) for p in paths]
    starts = np.concatenate([[0], np.cumsum([t.num_rows for t in tables])]).astype(np.int64)
    if starts[-1] == 0:
        raise DataError(f"{folder}: no rows; copy the preprocessed data again {WHERE}")
    steps = None
    if validation:
        parts = []
        for p, t in zip(paths, tables, strict=True):
            col = t.column("timestep")
            if col.null_count:
                raise DataError(f"{p}: timestep is empty (null) in {col.null_count} rows; validation rows carry 0..7")
            parts.append(col.to_numpy().astype(np.int64))
        steps = np.concatenate(parts)
        if steps.min() < 0 or steps.max() > 7:
            bad = int(steps.max() if steps.max() > 7 else steps.min())
            raise DataError(f"{folder}: timestep {bad}; a validation sample's timestep index is 0..7 (used as k/8)")
    return Encodings(folder, paths, tables, starts, steps)


# The parsed header of each distinct ``.npy`` header seen (its bytes -> dtype, shape, Fortran order): rows of one
# split share a few headers, and ``np.load`` parses each one anew (its header is a Python literal: about two thirds of
# a mini batch's read). At most HEADER_CACHE of them are kept.
_HEADERS: dict[bytes, tuple[np.dtype, tuple[int, ...], bool]] = {}
HEADER_CACHE = 256


def _cached(data: bytes) -> np.ndarray | None:
    """The array of ``data`` read with a header parsed before (the same bytes, the same values as ``np.load``), or
    None where its header is new or its payload is not the header's size (``np.load`` then reads it, or says why
    not)."""
    if len(data) < 10 or not data.startswith(b"\x93NUMPY"):
        return None
    n = 10 + int.from_bytes(data[8:10], "little") if data[6] == 1 else 12 + int.from_bytes(data[8:12], "little")
    head = _HEADERS.get(data[:n])
    if head is None:
        return None
    dtype, shape, fortran = head
    count = int(np.prod(shape, dtype=np.int64))
    if len(data) - n != count * dtype.itemsize:
        return None
    return np.frombuffer(data, dtype=dtype, count=count, offset=n).reshape(shape, order="F" if fortran else "C")


def _remember(data: bytes) -> None:
    """Keep ``data``'s header, parsed by numpy's own reader, for :func:`_cached`."""
    if len(_HEADERS) >= HEADER_CACHE:
        return
    f = io.BytesIO(data)
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    else:
        return
    if not dtype.hasobject:
        _HEADERS[data[: f.tell()]] = (dtype, tuple(shape), bool(fortran))


def decode(data: bytes, where: str, shape: tuple[int | None, ...]) -> np.ndarray:
    """One serialized array: a ``.npy`` of uint16 holding bf16 bits, of ``shape`` (None: any length). A header seen
    before is not parsed again (:func:`_cached`); the array is read-only."""
    arr = _cached(data)
    if arr is None:
        try:
            arr = np.load(io.BytesIO(data), allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise DataError(f"{where}: not a .npy array ({e}); the file is corrupt or not the reference's") from None
        _remember(data)
    if arr.dtype != np.uint16:
        raise DataError(f"{where}: dtype {arr.dtype}; the reference stores bf16 bits as uint16 (serialize_numpy_array)")
    if arr.ndim != len(shape) or any(s is not None and s != a for s, a in zip(shape, arr.shape, strict=False)):
        want = " x ".join("N" if s is None else str(s) for s in shape)
        raise DataError(f"{where}: shape {tuple(arr.shape)}, expected {want}")
    return arr


def rows(
    split: Encodings, indices: np.ndarray, *, t5_dim: int, clip_dim: int = 768, latent_channels: int = 16
) -> dict[str, np.ndarray]:
    """The encodings of ``indices`` stacked (uint16 bf16 bits; ``timestep`` as int64 for validation)."""
    shapes = {
        "t5_encodings": (None, t5_dim),
        "clip_encodings": (clip_dim,),
        "mean": (latent_channels, None, None),
        "logvar": (latent_channels, None, None),
    }
    out: dict[str, list[np.ndarray]] = {c: [] for c in ENCODINGS}
    for i in indices:
        t, r = split.locate(int(i))
        row = split.tables[t].slice(r, 1)
        key = row.column("__key__")[0].as_py()
        for c in ENCODINGS:
            out[c].append(decode(row.column(c)[0].as_py(), f"{split.paths[t]}: row {r} ({key!r}), {c}", shapes[c]))
    stacked = {}
    for c, arrays in out.items():
        if len({a.shape for a in arrays}) > 1:
            raise DataError(f"{split.folder}: {c} shapes differ between rows {sorted({a.shape for a in arrays})}")
        stacked[c] = np.stack(arrays)
    if stacked["mean"].shape != stacked["logvar"].shape or stacked["mean"].shape[-1] % 2:
        raise DataError(f"{split.folder}: mean {stacked['mean'].shape} and logvar must match, with even sides")
    if split.timesteps is not None:
        stacked["timestep"] = split.timesteps[np.asarray(indices, dtype=np.int64)]
    return stacked


def empty_encodings(folder: Path, *, t5_dim: int, clip_dim: int = 768) -> tuple[np.ndarray, np.ndarray]:
    """(T5, CLIP) encodings of the empty caption, as float32: ``t5_empty.npy[0]`` and ``clip_empty.npy[0]``."""
    out = []
    for name, tail in ((T5_EMPTY, (t5_dim,)), (CLIP_EMPTY, (clip_dim,))):
        path = folder / name
        try:
            arr = np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise DataError(f"{path}: not a .npy array ({e}); save_empty_encodings.py writes float16 arrays") from None
        if arr.ndim != len(tail) + 1 + (name == T5_EMPTY) or arr.shape[0] != 1 or arr.shape[-1] != tail[-1]:
            raise DataError(f"{path}: shape {arr.shape}; expected 1 x {'N x ' if name == T5_EMPTY else ''}{tail[-1]}")
        if not np.issubdtype(arr.dtype, np.floating):
            raise DataError(f"{path}: dtype {arr.dtype}; the empty encodings are float16")
        out.append(arr[0].astype(np.float32))
    return out[0], out[1]
