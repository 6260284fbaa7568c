"""The reference's raw data: the CC12M subset and the COCO-2014 subset as images and captions, before any encoder has
run, as the reference's scripts leave them (mlcommons/training text_to_image README, "CC12M dataset" and "COCO-2014
subset"; the encoders that read them are ``encoders.py``'s).

``<data-dir>/flux1/reference/``::

    cc12m_disk/    state.json, dataset_info.json, data-00000-of-000NN.arrow ...   1,099,776 samples
    coco/          shard_00000.tar ... (webdataset: <id>.png, <id>.txt, <id>.json)   29,696 samples
    encoders/t5/ encoders/clip/ encoders/autoencoder/                                 (encoders.py)

``cc12m_disk`` is what ``scripts/clean_cc12m.py`` saves (``datasets``' ``save_to_disk``, Arrow streams as in
``reference.py``): a row holds ``__key__``, ``txt`` (the caption) and the image, in ``png`` (the 256 x 256
bicubic-resized, centre-cropped copy the script adds) or else ``jpg``, each a ``datasets`` Image (a struct whose
``bytes`` hold the encoded file) or plain bytes. ``coco`` is what ``scripts/coco_to_webdataset.py`` writes: tar files
of 256 x 256 PNGs, each with its caption (``.txt``) and a ``.json`` whose ``timestep`` (0..7) is the sample's
validation timestep. Members are read at their offsets in the tar file: nothing is extracted and nothing unpickled.
"""

from __future__ import annotations

import io
import json
import math
import tarfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainperf.errors import DataError
from trainperf.workloads.flux1 import reference

TRAIN, VALIDATION, ENCODERS = "cc12m_disk", "coco", "encoders"
IMAGE_SIZE = 256  # flux_schnell_mlperf.toml [training] img_size
IMAGE_COLUMNS = ("png", "jpg")  # flux_dataset.py: "png" if "png" in sample else "jpg"
IMAGE_SUFFIXES = ("png", "jpg", "jpeg")
WHERE = "(mlcommons/training text_to_image README: clean_cc12m.py writes cc12m_disk, coco_to_webdataset.py writes coco)"
MAX_JSON_BYTES = 1 << 16  # a sample's metadata: a few lines


@dataclass(frozen=True)
class Files:
    train: Path
    validation: Path
    encoders: Path


def present(data_dir: Path) -> bool:
    """Whether the raw route's training folder is there (``data_route=auto`` then reads it)."""
    return (reference.reference_dir(data_dir) / TRAIN / reference.STATE).is_file()


def find(data_dir: Path) -> Files:
    """The raw route's folders, checked: a missing one is named with the script that writes it."""
    root = reference.reference_dir(data_dir)
    files = Files(root / TRAIN, root / VALIDATION, root / ENCODERS)
    if not (files.train / reference.STATE).is_file():
        raise DataError(
            f"{files.train / reference.STATE}: missing; the raw route reads CC12M as clean_cc12m.py saves it {WHERE} "
            f"(or place the preprocessed encodings there and use data_route=preprocessed)"
        )
    if not shards(files.validation):
        raise DataError(f"{files.validation}: no .tar shards; the raw route reads COCO as webdataset shards {WHERE}")
    return files


def shards(folder: Path) -> list[Path]:
    """A webdataset folder's tar files, in name order (as ``load_dataset("webdataset", data_dir=...)`` lists them)."""
    return sorted(folder.glob("*.tar")) if folder.is_dir() else []


# --- CC12M: a save_to_disk folder of images and captions ----------------------------------------------------
def _image_column(table, path: Path) -> str:
    import pyarrow as pa

    for name in IMAGE_COLUMNS:
        if name in table.column_names:
            kind = table.schema.field(name).type
            if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
                return name
            if pa.types.is_struct(kind) and kind.get_field_index("bytes") >= 0:
                return name
            raise DataError(f"{path}: column {name} is {kind}; an image is a datasets Image (struct with bytes)")
    raise DataError(f"{path}: no image column ({' or '.join(IMAGE_COLUMNS)}; columns {table.column_names}) {WHERE}")


def open_images(path: Path):
    """One Arrow stream of CC12M rows, memory-mapped, its columns checked; (table, image column)."""
    import pyarrow as pa

    try:
        table = pa.ipc.open_stream(pa.memory_map(str(path))).read_all()
    except (pa.ArrowInvalid, OSError) as e:
        raise DataError(f"{path}: not an Arrow stream as datasets writes it ({e}); copy the folder again") from None
    for name in ("__key__", "txt"):
        kind = table.schema.field(name).type if name in table.column_names else None
        if kind is None or not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            raise DataError(f"{path}: no text column {name!r} (columns {table.column_names}) {WHERE}")
    return table, _image_column(table, path)


@dataclass(frozen=True)
class Images:
    """The training split: its mapped tables, each table's image column, and where each table starts."""

    folder: Path
    paths: list[Path]
    tables: list
    columns: list[str]
    starts: np.ndarray
    timesteps: None = None

    def __len__(self) -> int:
        return int(self.starts[-1])

    def sample(self, i: int) -> tuple[bytes, str, str]:
        """(encoded image, caption, where) of sample ``i``."""
        t = int(np.searchsorted(self.starts, i, side="right")) - 1
        r = i - int(self.starts[t])
        row = self.tables[t].slice(r, 1)
        key = row.column("__key__")[0].as_py()
        image = row.column(self.columns[t])[0].as_py()
        if isinstance(image, dict):
            image = image.get("bytes")
        where = f"{self.paths[t]}: row {r} ({key!r})"
        if not image:
            raise DataError(f"{where}: no image bytes (an Image stored by path only is not read)")
        return image, row.column("txt")[0].as_py() or "", where


def load_images(folder: Path) -> Images:
    paths = reference.arrow_files(folder)
    opened = [open_images(p) for p in paths]
    starts = np.concatenate([[0], np.cumsum([t.num_rows for t, _ in opened])]).astype(np.int64)
    if starts[-1] == 0:
        raise DataError(f"{folder}: no rows {WHERE}")
    return Images(folder, paths, [t for t, _ in opened], [c for _, c in opened], starts)


# --- COCO: webdataset tar shards -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Member:
    path: Path
    offset: int
    size: int

    def read(self, limit: int | None = None) -> bytes:
        if limit is not None and self.size > limit:
            raise DataError(f"{self.path}: a member at byte {self.offset} is {self.size} bytes, more than {limit}")
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read(self.size)
        if len(data) != self.size:
            raise DataError(f"{self.path}: truncated at byte {self.offset}; copy the shard again")
        return data


def _index(path: Path) -> dict[str, dict[str, Member]]:
    """A tar shard's samples: key (the name before its first dot, as webdataset groups them) -> suffix -> member."""
    samples: dict[str, dict[str, Member]] = {}
    try:
        with tarfile.open(path, "r:") as tar:
            for m in tar:
                if not m.isfile():
                    continue
                folder, _, base = m.name.rpartition("/")
                stem, dot, suffix = base.partition(".")
                if dot:
                    key = f"{folder}/{stem}" if folder else stem
                    samples.setdefault(key, {})[suffix.lower()] = Member(path, m.offset_data, m.size)
    except (tarfile.TarError, OSError) as e:
        raise DataError(f"{path}: not a tar file ({e}); copy the shard again {WHERE}") from None
    return samples


@dataclass(frozen=True)
class Shards:
    """The validation split: each sample's image, caption and key, and its timestep index (0..7)."""

    folder: Path
    keys: list[str]
    members: list[dict[str, Member]]
    timesteps: np.ndarray

    def __len__(self) -> int:
        return len(self.keys)

    def sample(self, i: int) -> tuple[bytes, str, str]:
        m = self.members[i]
        image = next(m[s] for s in IMAGE_SUFFIXES if s in m)
        return image.read(), m["txt"].read(MAX_JSON_BYTES).decode("utf-8"), f"{image.path}: {self.keys[i]!r}"


def _timestep(meta: Member, where: str) -> int:
    try:
        value = json.loads(meta.read(MAX_JSON_BYTES))["timestep"]
    except (ValueError, KeyError, TypeError) as e:
        raise DataError(f"{where}.json: no timestep ({e}); coco_to_webdataset.py writes one a sample") from None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 7:
        raise DataError(f"{where}.json: timestep {value!r}; a validation sample's timestep index is 0..7")
    return value


def load_shards(folder: Path) -> Shards:
    """Every shard indexed (names and offsets only), each sample's parts and timestep read and checked."""
    keys, members, steps = [], [], []
    for path in shards(folder):
        for key, parts in _index(path).items():
            where = f"{path}: sample {key!r}"
            lacking = [p for p in ("txt", "json") if p not in parts]
            if not any(s in parts for s in IMAGE_SUFFIXES):
                lacking.append("png")
            if lacking:
                raise DataError(f"{where}: no {', '.join('.' + p for p in lacking)}; a sample has .png, .txt, .json")
            keys.append(key)
            members.append(parts)
            steps.append(_timestep(parts["json"], f"{path}: {key}"))
    if not keys:
        raise DataError(f"{folder}: no samples in its .tar shards {WHERE}")
    return Shards(folder, keys, members, np.asarray(steps, dtype=np.int64))


# --- images --------------------------------------------------------------------------------------------------
def pixels(data: bytes, where: str, size: int = IMAGE_SIZE) -> np.ndarray:
    """An encoded image as the reference's data processor makes it (``_process_cc12m_image``): the shorter side
    resized to ``size`` (Pillow's default filter) and the longer cropped to it where it is not ``size`` x ``size``
    already, then RGB; uint8, channels first (the encoder scales it to [-1, 1])."""
    from PIL import Image, UnidentifiedImageError

    try:
        img = Image.open(io.BytesIO(data))
        img.load()
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as e:
        raise DataError(f"{where}: not an image ({e})") from None
    width, height = img.size
    if (width, height) != (size, size):
        if width >= height:  # the reference's arithmetic, float ceil included
            w, h = math.ceil(size / height * width), size
        else:
            w, h = size, math.ceil(size / width * height)
        img = img.resize((w, h))
        left, top = (w - size) // 2, (h - size) // 2  # the reference crops at a random offset
        img = img.crop((left, top, left + size, top + size))
    if img.mode != "RGB":
        img = img.convert("RGB")
    return np.asarray(img, dtype=np.uint8).transpose(2, 0, 1)


def batch(split: Images | Shards, indices: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """The images (B, 3, 256, 256) uint8 and captions of ``indices``."""
    images, captions = [], []
    for i in indices:
        data, caption, where = split.sample(int(i))
        images.append(pixels(data, where))
        captions.append(caption)
    return np.stack(images), captions
