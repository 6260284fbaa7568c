"""The reference's preprocessing of the Criteo 1TB TSV days into its binary form, kept beside the days.

What the v2.0 reference (facebookresearch/dlrm @ 6d75c84, the mlperf branch that mlcommons/training pins)
does to ``day_0`` ... ``day_23`` before its run reads ``terabyte_processed_{train,test}.bin``, untimed as
training_rules.adoc "Data State at Start of Run" allows:

- a categorical value becomes ``int(value, 16) % 40,000,000`` (``--max-ind-range``), then a dense id of
  its feature: its rank in order of first appearance over all 24 days, day 0 first, in line order
  (``data_utils.py`` ``process_one_file`` fills one dictionary per feature, ``getCriteoAdData`` numbers
  its keys in order, ``processCriteoAdData`` maps every value through it). The dictionaries cover day 23
  too, so no evaluation value is unseen;
- negative integers become 0 (``processCriteoAdData``); the raw integers are stored and ``log(x + 1)`` is
  taken when a batch is read;
- the training days 0-22 are shuffled across days and within each (``concatCriteoAdData``, its two-pass
  "Fisher-Yates-Rao" shuffle with ``--data-randomize=total``: each sample to a random day-sized bucket,
  then each bucket permuted). Here: each sample gets an independent uniform bucket, then each bucket is
  permuted, which puts the training samples in one uniformly random order (the reference's greedy bucket
  filling approximates it); the buckets are sized to bound the memory of the second pass;
- day 23 keeps its order; its first ``ceil(N / 2)`` samples are the test split the run evaluates
  (``data_loader_terabyte.py`` ``numpy_to_binary``), the rest the validation split the run never reads.

The result is written to ``<root>/preprocessed`` (never over the user's files) with ``.source.json``
naming what it was made from; :func:`prepare_days` makes it again only when a day file changed.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from trainperf import seeds
from trainperf.errors import DataError
from trainperf.fileio import atomic_write_text, replace_durably
from trainperf.workloads.dlrm.data import COLUMNS, NUM_SPARSE, RECORD_BYTES, count_lines, iter_raw_tsv

MAX_IND_RANGE = 40_000_000  # the reference's --max-ind-range (bench/run_and_time.sh)
SEED = 123  # the reference's --numpy-rand-seed default, which seeds its preprocessing shuffle
BUCKET_RECORDS = 1 << 22  # samples a shuffle bucket holds on average (about 670 MB in memory in the second pass)
WRITE_RECORDS = 1 << 20  # records distributed to the buckets at once (160 MB)
FOLDER = "preprocessed"
STAMP = ".source.json"
TRAIN_FILE, TEST_FILE = "terabyte_processed_train.bin", "terabyte_processed_test.bin"
DICTIONARY_FILE = "day_fea_dict.npz"  # each feature's values in the order of their dense ids, and the counts
DAYS = 24  # day_0 ... day_23: 0-22 train, 23 the test day
VERSION = 1  # of what this module writes; a change makes every folder stale
_INT32_MAX = 2**31 - 1


class Dictionaries:
    """The reference's per-feature dictionaries: value (after ``% MAX_IND_RANGE``) -> dense id, numbering new
    values in order of first appearance."""

    def __init__(self) -> None:
        # value -> id + 1 (0: not seen), one table of MAX_IND_RANGE per feature, allocated at its first use; its
        # pages are only backed by memory once written, so a feature of few values costs what it holds
        self._lookup: list[np.ndarray | None] = [None] * NUM_SPARSE
        self._values: list[list[np.ndarray]] = [[] for _ in range(NUM_SPARSE)]
        self.counts = np.zeros(NUM_SPARSE, np.int64)

    def rows(self, values: np.ndarray) -> np.ndarray:
        """(N, 26) values in [0, MAX_IND_RANGE) -> (N, 26) dense ids; values not seen before get the next ids, in
        line order."""
        out = np.empty(values.shape, np.int64)
        for j in range(NUM_SPARSE):
            col = values[:, j]
            lut = self._lookup[j]
            if lut is None:
                lut = self._lookup[j] = np.zeros(MAX_IND_RANGE, np.int32)
            ids = lut[col]
            unseen = ids == 0
            if unseen.any():
                fresh, first = np.unique(col[unseen], return_index=True)
                fresh = fresh[np.argsort(first, kind="stable")]  # in the order they first appear
                lut[fresh] = self.counts[j] + 1 + np.arange(len(fresh))
                self.counts[j] += len(fresh)
                self._values[j].append(fresh.astype(np.int32))
                ids = lut[col]
            out[:, j] = ids.astype(np.int64) - 1
        return out

    def values(self, feature: int) -> np.ndarray:
        """The values of ``feature`` in the order of their ids (the reference's ``unique`` array)."""
        parts = self._values[feature]
        return np.concatenate(parts) if parts else np.zeros(0, np.int32)


def _source(days: Sequence[Path]) -> list[dict]:
    out = []
    for p in days:
        try:
            st = p.stat()
        except OSError as e:
            raise DataError(f"cannot read {p} ({e.strerror})") from None
        out.append({"name": p.name, "bytes": st.st_size, "mtime_ns": st.st_mtime_ns})
    return out


def _settings(bucket_records: int) -> dict:
    return {"version": VERSION, "max_ind_range": MAX_IND_RANGE, "seed": SEED, "bucket_records": bucket_records}


def fresh(root: Path, days: Sequence[Path], *, bucket_records: int = BUCKET_RECORDS) -> dict | None:
    """The stamp of ``root/preprocessed`` if it was made from ``days`` as they are now, else None."""
    out = root / FOLDER
    try:
        stamp = json.loads((out / STAMP).read_text())
    except (OSError, ValueError):
        return None
    if (
        isinstance(stamp, dict)
        and stamp.get("settings") == _settings(bucket_records)
        and stamp.get("days") == _source(days)
        and _size(out / TRAIN_FILE) == stamp.get("train_samples", -1) * RECORD_BYTES
        and _size(out / TEST_FILE) == stamp.get("test_samples", -1) * RECORD_BYTES
    ):
        return stamp
    return None


def prepare_days(root: Path, days: Sequence[Path], *, bucket_records: int = BUCKET_RECORDS) -> dict:
    """Before the clock: the binary form of ``days`` (24 TSV files, the last the test day) in ``root/preprocessed``,
    made again only if a day changed. Returns the stamp: per-day sample counts, the dictionaries' counts."""
    stamp = fresh(root, days, bucket_records=bucket_records)
    if stamp is not None:
        return stamp
    out = root / FOLDER
    try:
        out.mkdir(exist_ok=True)
    except OSError as e:
        raise DataError(
            f"cannot write the preprocessed click logs to {out} ({e.strerror}): make {root} writable, or put the "
            f"reference's preprocessed {TRAIN_FILE} and {TEST_FILE} in {root}"
        ) from None
    (out / STAMP).unlink(missing_ok=True)  # stale from here on
    source = _source(days)
    made = preprocess(days, out, bucket_records=bucket_records)
    stamp = {"settings": _settings(bucket_records), "days": source, **made}
    atomic_write_text(out / STAMP, json.dumps(stamp, indent=1))
    return stamp


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -2


def preprocess(days: Sequence[Path], out: Path, *, bucket_records: int = BUCKET_RECORDS) -> dict:
    """Write ``out/TRAIN_FILE``, ``out/TEST_FILE`` and ``out/DICTIONARY_FILE`` from the TSV ``days``."""
    *train_days, test_day = days
    samples = [count_lines(p) for p in days]
    n_train = sum(samples[:-1])
    buckets = max(1, math.ceil(n_train / bucket_records))
    sizes = sum(np.bincount(_buckets(k, samples[k], buckets), minlength=buckets) for k in range(len(train_days)))
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    dicts = Dictionaries()
    tmp_train, tmp_test = (out / f".{name}.{os.getpid()}.tmp" for name in (TRAIN_FILE, TEST_FILE))
    with open(tmp_train, "wb") as f:  # the first pass: each day's records appended to their buckets' regions
        f.truncate(n_train * RECORD_BYTES)
        fill = starts.copy()
        for k, day in enumerate(train_days):
            bucket, at = _buckets(k, samples[k], buckets), 0
            for block in _records(day, dicts, samples[k]):
                b = bucket[at : at + len(block)]
                at += len(block)
                order = np.argsort(b, kind="stable")
                counts = np.bincount(b, minlength=buckets)
                first = np.cumsum(counts) - counts
                for j in np.flatnonzero(counts):
                    rows = block[order[first[j] : first[j] + counts[j]]]
                    os.pwrite(f.fileno(), rows.tobytes(), int(fill[j]) * RECORD_BYTES)
                    fill[j] += counts[j]
    if n_train:  # the second pass: each bucket permuted in place
        train = np.memmap(tmp_train, dtype="<i4", mode="r+", shape=(n_train, COLUMNS))
        for j in range(buckets):
            region = train[starts[j] : starts[j] + sizes[j]]
            region[:] = np.asarray(region)[seeds.numpy_rng(SEED, seeds.STREAM_SHUFFLE, 1, j).permutation(len(region))]
        train.flush()
        del train
    n_test = math.ceil(samples[-1] / 2)  # data_loader_terabyte.py numpy_to_binary: the first ceil(N / 2)
    with open(tmp_test, "wb") as f:
        written = 0
        for block in _records(test_day, dicts, samples[-1]):  # the whole day: all its values enter the dictionaries
            keep = block[: max(0, n_test - written)]
            f.write(keep.tobytes())
            written += len(keep)
    tmp_dict = out / f".{DICTIONARY_FILE}.{os.getpid()}.tmp.npz"
    np.savez(tmp_dict, counts=dicts.counts, **{f"feature_{j}": dicts.values(j) for j in range(NUM_SPARSE)})
    for tmp, name in ((tmp_dict, DICTIONARY_FILE), (tmp_train, TRAIN_FILE), (tmp_test, TEST_FILE)):
        replace_durably(tmp, out / name)
    return {"samples": samples, "train_samples": n_train, "test_samples": n_test, "counts": dicts.counts.tolist()}


def _buckets(day: int, n: int, buckets: int) -> np.ndarray:
    """The shuffle bucket of each of training day ``day``'s ``n`` samples: uniform, independent, seeded."""
    return seeds.numpy_rng(SEED, seeds.STREAM_SHUFFLE, 0, day).integers(0, buckets, n, dtype=np.int32)


def _records(path: Path, dicts: Dictionaries, expected: int) -> Iterator[np.ndarray]:
    """The day's samples as binary records (N, 40) int32, their rows through the dictionaries, in line order,
    about ``WRITE_RECORDS`` at a time."""
    n, pending = 0, []
    for chunk in iter_raw_tsv(path):
        dense = np.maximum(chunk.dense, 0)
        big = np.argwhere(dense > _INT32_MAX)
        if len(big):
            i, j = (int(x) for x in big[0])
            raise DataError(
                f"{path}: line {chunk.first_line + i}, column {j + 2}: integer feature {j + 1} is {int(dense[i, j])}, "
                f"beyond the reference's 32-bit integers (at most {_INT32_MAX})"
            )
        rows = dicts.rows(chunk.hashes % MAX_IND_RANGE)
        n += len(chunk)
        pending.append(np.concatenate([chunk.labels[:, None], dense, rows], axis=1).astype("<i4"))
        if sum(map(len, pending)) >= WRITE_RECORDS:
            yield np.concatenate(pending)
            pending = []
    if pending:
        yield np.concatenate(pending)
    if n != expected:
        raise DataError(f"{path}: {n} lines read, {expected} counted before: the file changed while it was read")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m trainperf.workloads.dlrm.preprocess FOLDER``: preprocess the days ahead of a run (on Criteo 1TB
    it takes hours, beyond the rules' 30 minutes of initialization in which a run would otherwise do it)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m trainperf.workloads.dlrm.preprocess", description=main.__doc__)
    parser.add_argument("folder", type=Path, help="the folder of day_0 ... day_23 (<data-dir>/dlrm/reference)")
    args = parser.parse_args(argv)
    days = [args.folder / f"day_{k}" for k in range(DAYS)]
    missing = [p.name for p in days if not p.is_file()]
    try:
        if missing:
            raise DataError(f"{args.folder}: {', '.join(missing)} missing (the Criteo 1TB days are day_0 ... day_23)")
        stamp = prepare_days(args.folder, days)
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(
        f"{args.folder / FOLDER}: {stamp['train_samples']:,} training and {stamp['test_samples']:,} test samples; "
        f"distinct values per feature {stamp['counts']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
