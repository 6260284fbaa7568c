"""dlrm datasets: the Criteo click-log formats, read into arrays the model takes.

Criteo TSV (the 1TB click logs' ``day_<k>`` files, and the mini data that ``trainperf data prepare dlrm``
writes in the same format): one sample a line, 40 tab-separated columns: the label (0 or 1), 13 integer
features (decimal, possibly negative, possibly empty) and 26 categorical features (hexadecimal 32-bit
hashes, possibly empty). As the reference preprocesses them: a missing value is 0, negative integers are
clipped to 0 and the integers enter the model as ``log(x + 1)``. :func:`iter_raw_tsv` gives the parsed
values; how a categorical value becomes a table row depends on the scale: the mini scale's own mapping is
``value % table_size`` (:func:`iter_tsv`; its generator writes ``row + size * k``), the reference's is
``value % 40,000,000`` and then its per-feature dictionary (``preprocess.py``).

The reference's preprocessed binary form (``terabyte_processed_{train,test}.bin``, read by its
``--mlperf-bin-loader``): records of 40 little-endian int32 (label, 13 integers, 26 row indices), nothing
else in the file.

Every problem is one :class:`DataError` naming the file and the line (TSV) or record (binary) number.
The TSV reader is vectorized with numpy (no per-line Python): a whole line's 40 fields are located from
the positions of tabs and newlines, so a mini day of 400,000 lines parses in a few seconds.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainperf.errors import DataError

NUM_DENSE = 13
NUM_SPARSE = 26
COLUMNS = 1 + NUM_DENSE + NUM_SPARSE
RECORD_BYTES = 4 * COLUMNS  # one record of the binary form
CHUNK_LINES = 50_000  # TSV lines parsed at once (bounds the parser's memory to about 200 MB)
# The v2.0 reference's 26 table sizes: the distinct values of each Criteo 1TB categorical feature after
# % 40,000,000 (--max-ind-range), its dictionaries' counts (preprocess.py; 187,767,399 rows, 24.0 G parameters of 128).
REFERENCE_TABLE_SIZES = (
    39884406, 39043, 17289, 7420, 20263, 3, 7120, 1543, 63, 38532951, 2953546, 403346, 10,
    2208, 11938, 155, 4, 976, 14, 39979771, 25641295, 39664984, 585935, 12972, 108, 36,
)  # fmt: skip
_MAX_DENSE_CHARS = 18  # fits an int64
_MAX_HEX_CHARS = 8  # 32-bit hashes, as in the Criteo logs

_HEX = np.full(256, -1, dtype=np.int8)
for _i, _c in enumerate(b"0123456789abcdef"):
    _HEX[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    _HEX[_c] = 10 + _i
_DIGIT = np.full(256, -1, dtype=np.int8)
for _i in range(10):
    _DIGIT[48 + _i] = _i


@dataclass(frozen=True)
class ClickLog:
    """Samples as the model takes them: labels (N,) float32, dense (N, 13) float32 after log(x+1),
    sparse (N, 26) int64 table rows."""

    labels: np.ndarray
    dense: np.ndarray
    sparse: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)

    @staticmethod
    def concat(parts: Sequence[ClickLog]) -> ClickLog:
        if not parts:
            return ClickLog(
                np.zeros(0, np.float32), np.zeros((0, NUM_DENSE), np.float32), np.zeros((0, NUM_SPARSE), np.int64)
            )
        if len(parts) == 1:
            return parts[0]
        return ClickLog(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("labels", "dense", "sparse")))

    def head(self, n: int) -> ClickLog:
        return ClickLog(self.labels[:n], self.dense[:n], self.sparse[:n])


def _features(labels: np.ndarray, dense_raw: np.ndarray, rows: np.ndarray) -> ClickLog:
    dense = np.log1p(np.maximum(dense_raw, 0).astype(np.float64)).astype(np.float32)
    return ClickLog(labels.astype(np.float32), dense, rows.astype(np.int64))


# --- TSV ------------------------------------------------------------------------------------------------
def _where(path: Path, line: int, column: int | None = None) -> str:
    col = f", column {column + 1}" if column is not None else ""
    return f"{path}: line {line}{col}"


def _parse_numbers(
    buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, max_chars: int, table: np.ndarray, base: int
) -> tuple[np.ndarray, np.ndarray]:
    """Fields of ``lengths`` characters at ``starts`` as numbers in ``base``; also a mask of bad fields.

    A leading '-' is allowed in base 10. Empty fields are 0 (the reference's missing value).
    """
    width = max(1, int(lengths.max(initial=0)))
    width = min(width, max_chars + 1)
    pos = np.arange(width)
    valid = pos < lengths[..., None]
    idx = np.where(valid, starts[..., None] + pos, 0)
    chars = buf[idx]
    negative = np.zeros(starts.shape, dtype=bool)
    if base == 10:
        negative = (lengths > 1) & (chars[..., 0] == ord("-"))
        valid = valid & ~((pos == 0) & negative[..., None])
    digits = table[chars]
    bad = (lengths > max_chars) | np.any(valid & (digits < 0), axis=-1)
    digits = np.where(valid, np.maximum(digits, 0), 0)
    # Horner's rule along the characters: value = value * base + digit, for the valid characters only.
    value = np.zeros(starts.shape, dtype=np.int64)
    for k in range(width):
        v = valid[..., k]
        value = np.where(v, value * base + digits[..., k], value)
    return np.where(negative, -value, value), bad


@dataclass(frozen=True)
class RawChunk:
    """Parsed TSV lines as written: labels (N,) float32, integers (N, 13) int64 (missing: 0, negatives kept),
    categorical values (N, 26) int64; ``first_line`` is the 1-based line number of the first."""

    first_line: int
    labels: np.ndarray
    dense: np.ndarray
    hashes: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)


def _parse_lines(buf: np.ndarray, path: Path, first_line: int) -> RawChunk:
    """Parse whole lines (``buf`` ends with a newline); ``first_line`` is the 1-based number of the first."""
    newline = buf == 10
    ends_of_lines = np.flatnonzero(newline)
    n = len(ends_of_lines)
    separators = np.flatnonzero(newline | (buf == 9))
    line_of_sep = np.cumsum(np.concatenate([[0], newline[separators][:-1]]))  # line index of each separator
    fields_per_line = np.bincount(line_of_sep, minlength=n)
    wrong = np.flatnonzero(fields_per_line != COLUMNS)
    if len(wrong):
        i = int(wrong[0])
        raise DataError(
            f"{_where(path, first_line + i)}: {int(fields_per_line[i])} tab-separated columns, expected {COLUMNS} "
            f"(the label, {NUM_DENSE} integer and {NUM_SPARSE} hexadecimal categorical features of the Criteo format)"
        )
    ends = separators.reshape(n, COLUMNS)
    starts = np.empty_like(ends)
    starts[:, 1:] = ends[:, :-1] + 1
    starts[:, 0] = np.concatenate([[0], ends_of_lines[:-1] + 1])
    lengths = ends - starts

    label_chars = buf[starts[:, 0]]
    bad = np.flatnonzero((lengths[:, 0] != 1) | ((label_chars != ord("0")) & (label_chars != ord("1"))))
    if len(bad):
        i = int(bad[0])
        text = bytes(buf[starts[i, 0] : ends[i, 0]]).decode("latin-1")
        raise DataError(f"{_where(path, first_line + i, 0)}: label {text!r}, expected 0 or 1")
    labels = (label_chars == ord("1")).astype(np.float32)

    dense, bad_dense = _parse_numbers(
        buf, starts[:, 1 : 1 + NUM_DENSE], lengths[:, 1 : 1 + NUM_DENSE], _MAX_DENSE_CHARS, _DIGIT, 10
    )
    if bad_dense.any():
        i, j = (int(x[0]) for x in np.nonzero(bad_dense))
        s, e = starts[i, 1 + j], ends[i, 1 + j]
        text = bytes(buf[s:e]).decode("latin-1")
        raise DataError(
            f"{_where(path, first_line + i, 1 + j)}: integer feature {j + 1} is {text!r}, not a whole number"
        )
    hashes, bad_hex = _parse_numbers(
        buf, starts[:, 1 + NUM_DENSE :], lengths[:, 1 + NUM_DENSE :], _MAX_HEX_CHARS, _HEX, 16
    )
    if bad_hex.any():
        i, j = (int(x[0]) for x in np.nonzero(bad_hex))
        s, e = starts[i, 1 + NUM_DENSE + j], ends[i, 1 + NUM_DENSE + j]
        text = bytes(buf[s:e]).decode("latin-1")
        raise DataError(
            f"{_where(path, first_line + i, 1 + NUM_DENSE + j)}: categorical feature {j + 1} is {text!r}, "
            f"not a hexadecimal value of at most {_MAX_HEX_CHARS} digits"
        )
    return RawChunk(first_line, labels, dense, hashes)


def iter_tsv(path: Path, table_sizes: Sequence[int], *, chunk_lines: int = CHUNK_LINES) -> Iterator[ClickLog]:
    """The samples of one Criteo TSV file with the mini scale's rows, ``value % table_size``, ``chunk_lines``
    lines at a time."""
    sizes = np.asarray(table_sizes, dtype=np.int64)
    if len(sizes) != NUM_SPARSE:
        raise ValueError(f"{NUM_SPARSE} table sizes expected, got {len(sizes)}")
    for chunk in iter_raw_tsv(path, chunk_lines=chunk_lines):
        yield _features(chunk.labels, chunk.dense, chunk.hashes % sizes)


def iter_raw_tsv(path: Path, *, chunk_lines: int = CHUNK_LINES) -> Iterator[RawChunk]:
    """The parsed lines of one Criteo TSV file, ``chunk_lines`` at a time (a missing final newline is fine)."""
    try:
        f = open(path, "rb")  # noqa: SIM115 (closed below; the generator may stop early)
    except OSError as e:
        raise DataError(f"cannot read {path} ({e.strerror})") from None
    line = 1
    rest = b""
    block = 64 * 1024 * 1024
    with f:
        while True:
            data = f.read(block)
            if not data:
                break
            data = rest + data
            cut = data.rfind(b"\n") + 1
            rest = data[cut:]
            buf = np.frombuffer(data[:cut], dtype=np.uint8)
            for part in _split_lines(buf, chunk_lines):
                parsed = _parse_lines(part, path, line)
                line += len(parsed)
                yield parsed
        if rest:
            yield _parse_lines(np.frombuffer(rest + b"\n", dtype=np.uint8), path, line)


def count_lines(path: Path) -> int:
    """The lines of a TSV file as :func:`iter_raw_tsv` reads them (a last line without a newline counts)."""
    n, last = 0, b"\n"
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 24), b""):
                n += block.count(b"\n")
                last = block[-1:]
    except OSError as e:
        raise DataError(f"cannot read {path} ({e.strerror})") from None
    return n + (last != b"\n")


def _split_lines(buf: np.ndarray, chunk_lines: int) -> Iterator[np.ndarray]:
    if not len(buf):
        return
    ends = np.flatnonzero(buf == 10)
    start = 0
    for k in range(chunk_lines - 1, len(ends), chunk_lines):
        yield buf[start : ends[k] + 1]
        start = ends[k] + 1
    if start < len(buf):
        yield buf[start:]


def read_tsv(path: Path, table_sizes: Sequence[int]) -> ClickLog:
    """All samples of one Criteo TSV file."""
    return ClickLog.concat(list(iter_tsv(path, table_sizes)))


# --- the reference's binary form ---------------------------------------------------------------------
def check_binary(path: Path) -> int:
    """The record count of a binary file; a DataError if it is missing or ends inside a record."""
    try:
        size = path.stat().st_size
    except OSError as e:
        raise DataError(f"cannot read {path} ({e.strerror})") from None
    if size % RECORD_BYTES:
        raise DataError(
            f"{path}: truncated: {size} bytes is {size // RECORD_BYTES} whole records of {RECORD_BYTES} bytes and "
            f"{size % RECORD_BYTES} bytes of record {size // RECORD_BYTES + 1}; re-create it with the reference's "
            "preprocessing"
        )
    return size // RECORD_BYTES


def open_binary(path: Path) -> np.ndarray:
    """The records of a binary file, memory-mapped as (N, 40) int32 (nothing is read yet)."""
    n = check_binary(path)
    if n == 0:
        raise DataError(f"{path}: holds no record")
    return np.memmap(path, dtype="<i4", mode="r", shape=(n, COLUMNS))


def binary_records(records: np.ndarray, index: np.ndarray | slice, path: Path, table_sizes: Sequence[int]) -> ClickLog:
    """Records ``index`` of a memory-mapped binary file, checked (record numbers are 1-based)."""
    block = np.asarray(records[index])
    numbers = np.arange(len(records))[index] + 1
    labels = block[:, 0]
    bad = np.flatnonzero((labels != 0) & (labels != 1))
    if len(bad):
        i = int(bad[0])
        raise DataError(f"{path}: record {int(numbers[i])}: label {int(labels[i])}, expected 0 or 1")
    rows = block[:, 1 + NUM_DENSE :].astype(np.int64)
    sizes = np.asarray(table_sizes, dtype=np.int64)
    bad_rows = np.nonzero((rows < 0) | (rows >= sizes))
    if len(bad_rows[0]):
        i, j = int(bad_rows[0][0]), int(bad_rows[1][0])
        raise DataError(
            f"{path}: record {int(numbers[i])}: categorical feature {j + 1} has row {int(rows[i, j])}, outside its "
            f"table of {int(sizes[j])} rows (preprocessed with another --max-ind-range?)"
        )
    return _features(labels, block[:, 1 : 1 + NUM_DENSE], rows)


def write_binary(path: Path, log: ClickLog, dense_raw: np.ndarray) -> None:
    """Write samples in the binary form (tests and fixtures): labels, raw integers, table rows."""
    records = np.concatenate(
        [log.labels[:, None].astype("<i4"), dense_raw.astype("<i4"), log.sparse.astype("<i4")], axis=1
    )
    path.write_bytes(records.tobytes())


def write_smoke_fixture(root: Path) -> str:
    """A tiny Criteo 1TB in its original layout for ``--smoke``: ``day_0`` ... ``day_23`` TSV files under
    ``root`` (64 clicks a training day; day 23 holds 300, whose first ceil(N / 2) are the evaluation set), with
    missing and negative integers and 8-digit hexadecimal hashes, as the real logs have them. Each feature draws
    from at most 64 hashes, and never from more than its table holds (``REFERENCE_TABLE_SIZES``), so the
    reference's dictionaries fit the tables; the clicks follow the first feature's hashes (half of them mark
    clicks), a signal the model can learn."""
    rng = np.random.default_rng(20220629)
    pools = [rng.choice(2**32, size=min(n, 64), replace=False) for n in REFERENCE_TABLE_SIZES]
    clicks, others = np.array_split(pools[0], 2)
    days = 24
    for k in range(days):
        n = 64 if k < days - 1 else 300
        labels = (rng.random(n) < 0.25).astype(np.int64)
        lines = []
        for y in labels:
            dense = [("" if rng.random() < 0.05 else str(int(v))) for v in rng.integers(-2, 300, NUM_DENSE)]
            hashes = [f"{int(rng.choice(pool)):08x}" for pool in pools]
            hashes[0] = f"{int(rng.choice(clicks if y else others)):08x}"
            lines.append("\t".join([str(int(y)), *dense, *hashes]))
        (root / f"day_{k}").write_text("\n".join(lines) + "\n")
    return f"{days} Criteo TSV day files ({(days - 1) * 64} training clicks, 150 evaluation)"
