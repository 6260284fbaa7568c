"""Megatron's indexed data set (``<prefix>.bin`` and ``<prefix>.idx``): the pre-tokenized form of C4 the LLM
references read (NeMo and Megatron-LM ``MMapIndexedDataset``, ``megatron/core/datasets/indexed_dataset.py``).

``.bin`` holds every sequence's tokens back to back; ``.idx`` is, little-endian:

=====================  =====================================================================
``MMIDIDX\\x00\\x00``    9-byte magic
``<Q`` version          1
``<B`` dtype code       1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64, 7 float32, 8 uint16
``<Q`` sequences        S
``<Q`` documents        D + 1
int32[S]                each sequence's length in tokens
int64[S]                each sequence's byte offset in ``.bin``
int64[D + 1]            document boundaries as sequence indices (0 first, S last)
=====================  =====================================================================

Written here rather than imported: the field's readers come with Megatron-Core or NeMo (a training framework each,
with their own torch and CUDA requirements), and the format is 40 lines. Files from elsewhere are hostile until
checked: every count and offset is checked against the file sizes before anything is read through it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from trainperf.errors import DataError
from trainperf.fileio import atomic_write_bytes

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32, 8: np.uint16}
_HEADER = struct.Struct("<9sQBQQ")
MAX_SEQUENCES = 2**32  # far above C4's 365 M documents; bounds what a crafted header can make us allocate


def paths(prefix: Path) -> tuple[Path, Path]:
    return Path(f"{prefix}.bin"), Path(f"{prefix}.idx")


def token_dtype(vocab_size: int) -> type:
    """Megatron's choice: uint16 for a vocabulary below 65,500 tokens, else int32."""
    return np.uint16 if vocab_size < 65500 else np.int32


def write(prefix: Path, documents: Sequence[Sequence[int]], *, vocab_size: int) -> None:
    """Write ``documents`` (one sequence each) as ``<prefix>.bin`` and ``<prefix>.idx`` (each atomically)."""
    dtype = np.dtype(token_dtype(vocab_size))
    code = next(c for c, t in DTYPES.items() if np.dtype(t) == dtype)
    lengths = np.array([len(d) for d in documents], dtype=np.int32)
    pointers = np.zeros(len(documents), dtype=np.int64)
    if len(documents) > 1:
        pointers[1:] = np.cumsum(lengths[:-1].astype(np.int64)) * dtype.itemsize
    flat = np.concatenate([np.asarray(d, dtype=np.int64) for d in documents]) if documents else np.zeros(0)
    if flat.size and (flat.min() < 0 or flat.max() >= vocab_size):
        raise ValueError(f"indexed data set {prefix}: a token id lies outside the vocabulary of {vocab_size}")
    docs = np.arange(len(documents) + 1, dtype=np.int64)
    bin_path, idx_path = paths(prefix)
    atomic_write_bytes(bin_path, flat.astype(dtype).tobytes())
    header = _HEADER.pack(MAGIC, VERSION, code, len(documents), len(docs))
    atomic_write_bytes(idx_path, header + lengths.tobytes() + pointers.tobytes() + docs.tobytes())


class IndexedDataset:
    """The sequences of one indexed data set, memory-mapped, every offset checked against the files."""

    def __init__(self, prefix: Path, *, vocab_size: int | None = None) -> None:
        self.prefix = Path(prefix)
        bin_path, idx_path = paths(self.prefix)
        for p in (bin_path, idx_path):
            if not p.is_file():
                raise DataError(f"{p}: missing; an indexed data set is a .bin and an .idx file with the same prefix")
        raw = idx_path.read_bytes()
        if len(raw) < _HEADER.size:
            raise DataError(f"{idx_path}: {len(raw)} bytes, shorter than the index header; the file is cut short")
        magic, version, code, n_seq, n_doc = _HEADER.unpack_from(raw)
        if magic != MAGIC or version != VERSION:
            raise DataError(f"{idx_path}: not a Megatron indexed data set (magic {magic!r}, version {version})")
        if code not in DTYPES:
            raise DataError(f"{idx_path}: unknown token dtype code {code} (known: {sorted(DTYPES)})")
        if not (0 < n_seq <= MAX_SEQUENCES and 2 <= n_doc <= n_seq + 1):
            raise DataError(f"{idx_path}: {n_seq} sequences in {n_doc - 1} documents is not a possible index")
        need = _HEADER.size + n_seq * (4 + 8) + n_doc * 8
        if len(raw) != need:
            raise DataError(f"{idx_path}: {len(raw)} bytes where its header announces {need}; the file is damaged")
        off = _HEADER.size
        self.lengths = np.frombuffer(raw, np.int32, n_seq, off)
        self.pointers = np.frombuffer(raw, np.int64, n_seq, off + 4 * n_seq)
        self.document_indices = np.frombuffer(raw, np.int64, n_doc, off + 12 * n_seq)
        self.dtype = np.dtype(DTYPES[code])
        size = bin_path.stat().st_size
        ends = self.pointers + self.lengths.astype(np.int64) * self.dtype.itemsize
        if (self.lengths < 0).any() or (self.pointers < 0).any() or ends.max() > size:
            raise DataError(f"{idx_path}: a sequence lies outside {bin_path} ({size} bytes); the pair does not match")
        docs = self.document_indices
        if docs[0] != 0 or docs[-1] != n_seq or (np.diff(docs) < 0).any():
            raise DataError(f"{idx_path}: the document boundaries are not in order from 0 to {n_seq}")
        self.tokens = np.memmap(bin_path, dtype=self.dtype, mode="r") if size else np.zeros(0, self.dtype)
        if vocab_size is not None and self.dtype.kind in "iu" and len(self.tokens):
            top = int(self.tokens.max())
            if top >= vocab_size or int(self.tokens.min()) < 0:
                raise DataError(f"{bin_path}: token id {top} lies outside the tokenizer's vocabulary of {vocab_size}")

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, i: int) -> np.ndarray:
        start = int(self.pointers[i]) // self.dtype.itemsize
        return np.asarray(self.tokens[start : start + int(self.lengths[i])])

    @property
    def total_tokens(self) -> int:
        return int(self.lengths.sum(dtype=np.int64))
