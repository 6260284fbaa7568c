"""bert's data: the MLPerf reference's packed HDF5 pretraining examples, read with h5py, and writers of that layout.

One HDF5 file holds N examples as six datasets (the reference's ``hdf5`` form of Wikipedia 2020-01-01):

==========================  ======================  ==============================================
field                       shape                   meaning
==========================  ======================  ==============================================
``input_ids``               (N, max_seq_length)     token ids, [CLS] A [SEP] B [SEP], 0-padded
``input_mask``              (N, max_seq_length)     1 on real tokens, 0 on padding
``segment_ids``             (N, max_seq_length)     0 for [CLS] A [SEP], 1 for B [SEP]
``masked_lm_positions``     (N, max_predictions)    positions of the masked tokens, 0-padded
``masked_lm_ids``           (N, max_predictions)    the original tokens there, 0-padded
``next_sentence_labels``    (N,) or (N, 1)          1: B is a random segment, 0: B follows A
==========================  ======================  ==============================================

A padded prediction slot has position 0 (the [CLS] token is never masked), as the reference's loader reads it.
Every reader checks fields, shapes, kinds and value ranges and raises :class:`~trainperf.errors.DataError`
naming the file and the field. The mini corpus and the reference smoke fixture are written in this same
layout (:func:`write_examples`), so the mini scale reads through the reference's loader.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainperf.errors import DataError

FIELDS = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "masked_lm_positions",
    "masked_lm_ids",
    "next_sentence_labels",
)
SEQ_FIELDS = ("input_ids", "input_mask", "segment_ids")
PRED_FIELDS = ("masked_lm_positions", "masked_lm_ids")
PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)


@dataclass
class Examples:
    """Pretraining examples in memory (numpy arrays of the file's integer kinds)."""

    input_ids: np.ndarray
    input_mask: np.ndarray
    segment_ids: np.ndarray
    masked_lm_positions: np.ndarray
    masked_lm_ids: np.ndarray
    next_sentence_labels: np.ndarray

    def __len__(self) -> int:
        return len(self.input_ids)

    def take(self, idx: np.ndarray | slice) -> Examples:
        return Examples(*(getattr(self, f)[idx] for f in FIELDS))

    @property
    def seq_length(self) -> int:
        return self.input_ids.shape[1]

    @classmethod
    def concat(cls, parts: Sequence[Examples]) -> Examples:
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in FIELDS))


def _open(path: Path):
    import h5py

    try:
        return h5py.File(path, "r")
    except FileNotFoundError:
        raise DataError(f"{path} is missing") from None
    except OSError as e:
        raise DataError(
            f"{path} is not a readable HDF5 file ({str(e).split('(')[0].strip()}): it is corrupt or truncated; "
            "copy it again from the reference data set"
        ) from None


def check_file(path: Path, *, vocab_size: int) -> int:
    """Fields, shapes and kinds of one file, without reading its samples (untimed); its example count."""
    with _open(path) as f:
        return _check_layout(path, f, vocab_size)[0]


def _check_layout(path: Path, f, vocab_size: int) -> tuple[int, int, int]:
    missing = [name for name in FIELDS if name not in f]
    if missing:
        raise DataError(
            f"{path}: field {missing[0]!r} is missing (a pretraining file holds {', '.join(FIELDS)}); "
            "re-create it with the reference's create_pretraining_data and its HDF5 conversion"
        )
    n = f["input_ids"].shape[0] if f["input_ids"].ndim >= 1 else 0
    seq = pred = 0
    for name in FIELDS:
        ds = f[name]
        if not np.issubdtype(ds.dtype, np.integer):
            raise DataError(
                f"{path}: field {name!r} holds {ds.dtype}, not integers; the file is not a pretraining file"
            )
        if ds.ndim == 0 or ds.shape[0] != n:
            raise DataError(
                f"{path}: field {name!r} holds {ds.shape[0] if ds.ndim else 0} examples but 'input_ids' holds {n}: "
                "the fields have inconsistent lengths (a truncated or mixed file); re-create it"
            )
        if name in SEQ_FIELDS:
            if ds.ndim != 2 or (seq and ds.shape[1] != seq):
                raise DataError(f"{path}: field {name!r} has shape {ds.shape}; expected (N, {seq or 'max_seq_length'})")
            seq = ds.shape[1]
        elif name in PRED_FIELDS:
            if ds.ndim != 2 or (pred and ds.shape[1] != pred):
                raise DataError(
                    f"{path}: field {name!r} has shape {ds.shape}; expected (N, {pred or 'max_predictions'})"
                )
            pred = ds.shape[1]
        elif ds.ndim > 2 or (ds.ndim == 2 and ds.shape[1] != 1):
            raise DataError(f"{path}: field {name!r} has shape {ds.shape}; expected (N,) or (N, 1)")
    if n == 0:
        raise DataError(f"{path}: holds no examples")
    return n, seq, pred


def read_examples(path: Path, *, vocab_size: int) -> Examples:
    """Read a whole file and check every value: token ids within the vocabulary, masks and labels 0/1,
    masked positions within the sequence."""
    with _open(path) as f:
        _check_layout(path, f, vocab_size)
        try:
            arrays = {name: f[name][()] for name in FIELDS}
        except OSError as e:
            raise DataError(f"{path}: cannot be read ({e}); the file is corrupt, copy it again") from None
    arrays["next_sentence_labels"] = arrays["next_sentence_labels"].reshape(-1)
    ex = Examples(**arrays)
    check_values(path, ex, vocab_size=vocab_size)
    return ex


def check_values(path: Path, ex: Examples, *, vocab_size: int) -> None:
    seq = ex.seq_length

    def bad(name: str, what: str, arr: np.ndarray, ok: np.ndarray) -> DataError:
        row = int(np.argwhere(~ok)[0][0])
        return DataError(f"{path}: field {name!r}, example {row}: {what}; re-create the file")

    for name in ("input_ids", "masked_lm_ids"):
        arr = getattr(ex, name)
        ok = (arr >= 0) & (arr < vocab_size)
        if not ok.all():
            value = int(arr[~ok][0])
            raise bad(
                name,
                f"token id {value} is outside the vocabulary of {vocab_size} tokens (0..{vocab_size - 1})",
                arr,
                ok,
            )
    for name in ("input_mask", "segment_ids", "next_sentence_labels"):
        arr = getattr(ex, name)
        ok = (arr == 0) | (arr == 1)
        if not ok.all():
            raise bad(name, f"value {int(arr[~ok][0])} where only 0 or 1 may be", arr, ok)
    pos = ex.masked_lm_positions
    ok = (pos >= 0) & (pos < seq)
    if not ok.all():
        raise bad("masked_lm_positions", f"position {int(pos[~ok][0])} is outside the sequence of {seq}", pos, ok)


def write_examples(path: Path, ex: Examples) -> Path:
    """Write examples in the reference layout (uncompressed), atomically: a temporary file, then a rename."""
    import h5py

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        with h5py.File(tmp, "w", track_order=False) as f:
            for name in FIELDS:
                # track_times=False: the same examples give the same bytes (the manifest's checksums)
                f.create_dataset(name, data=getattr(ex, name), track_times=False)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return path


# --- making examples (the mini corpus and the smoke fixture) ---------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Masking:
    """Google BERT's create_pretraining_data rules: 15% of the tokens (at most ``max_predictions``), each
    replaced by [MASK] 80% of the time, by a random token 10%, kept 10%; B is a random segment 50% of the time."""

    max_seq_length: int
    max_predictions: int
    masked_lm_prob: float = 0.15
    random_next_prob: float = 0.5


def make_examples(
    documents: Sequence[Sequence[Sequence[int]]],
    *,
    masking: Masking,
    special: dict[str, int],
    vocab_size: int,
    rng: np.random.Generator,
) -> Examples:
    """Sentence-pair examples from tokenized documents (lists of sentences of token ids), as Google's
    create_pretraining_data builds them: segments of whole sentences fill the sequence, A is a random
    prefix of them and B the rest, or (half the time, and always for a one-sentence chunk) sentences of
    another random document."""
    rows: list[tuple[list[int], list[int], int]] = []
    budget = masking.max_seq_length - 3  # [CLS] A [SEP] B [SEP]
    n_docs = len(documents)
    for d, doc in enumerate(documents):
        chunk: list[Sequence[int]] = []
        length = 0
        for i, sent in enumerate(doc):
            chunk.append(sent)
            length += len(sent)
            if i != len(doc) - 1 and length < budget:
                continue
            a_end = int(rng.integers(1, len(chunk))) if len(chunk) >= 2 else 1
            a = [t for s in chunk[:a_end] for t in s]
            if len(chunk) == 1 or rng.random() < masking.random_next_prob:
                other = documents[(d + int(rng.integers(1, n_docs))) % n_docs] if n_docs > 1 else doc
                start = int(rng.integers(0, len(other)))
                b = [t for s in other[start:] for t in s][: max(1, budget - len(a))]
                label = 1
            else:
                b = [t for s in chunk[a_end:] for t in s]
                label = 0
            while len(a) + len(b) > budget:  # truncate the longer one, from a random end
                longer = a if len(a) > len(b) else b
                del longer[0 if rng.random() < 0.5 else -1]
            if a and b:
                rows.append((a, b, label))
            chunk, length = [], 0
    return _mask(rows, masking, special, vocab_size, rng)


def _mask(rows, masking: Masking, special: dict[str, int], vocab_size: int, rng: np.random.Generator) -> Examples:
    n, seq, npred = len(rows), masking.max_seq_length, masking.max_predictions
    ids = np.zeros((n, seq), np.int32)
    mask = np.zeros((n, seq), np.int8)
    seg = np.zeros((n, seq), np.int8)
    pos = np.zeros((n, npred), np.int32)
    lm = np.zeros((n, npred), np.int32)
    nsp = np.zeros((n,), np.int8)
    first_normal = len(SPECIAL_TOKENS)
    for r, (a, b, label) in enumerate(rows):
        tokens = [special[CLS], *a, special[SEP], *b, special[SEP]]
        ids[r, : len(tokens)] = tokens
        mask[r, : len(tokens)] = 1
        seg[r, len(a) + 2 : len(tokens)] = 1
        nsp[r] = label
        candidates = [i for i, t in enumerate(tokens) if t not in (special[CLS], special[SEP])]
        k = min(npred, max(1, round(len(tokens) * masking.masked_lm_prob)))
        chosen = np.sort(rng.choice(candidates, size=min(k, len(candidates)), replace=False))
        for j, p in enumerate(chosen):
            pos[r, j], lm[r, j] = p, tokens[p]
            u = rng.random()
            if u < 0.8:
                ids[r, p] = special[MASK]
            elif u < 0.9:
                ids[r, p] = int(rng.integers(first_normal, vocab_size))
    return Examples(ids, mask, seg, pos, lm, nsp)
