"""Checking prepared data files against their manifest before the clock, cheaply: a file is hashed only when it
changed since it was last found intact.

A manifest gives each file's sha256 and, where known, its size. :func:`check_files` compares every file's size
with the manifest (a ``stat``, no read), then its hash. A file found intact is recorded in a small cache beside
the files, ``.trainperf-verified.json``: its size, modification and change times (nanoseconds) and inode, and
its sha256. Next time a file whose ``stat`` still matches its record is not read again; any change to the file
(a write changes its modification time, and even a time set back by hand changes its change time) makes it
hashed again. A file modified within :data:`RACY_NS` of being hashed is not recorded (it could change again
within one tick of the file system's clock, unseen), so it is hashed once more on the next check.

The cache is written atomically (a temporary file, then a rename) and is only a shortcut: when it is missing,
unreadable, or cannot be written (a read-only data folder), every file is hashed, as ``trust_cache=False``
does (``trainperf data verify``, ``trainperf data prepare``).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from trainperf.fileio import atomic_write_text

CACHE = ".trainperf-verified.json"
CACHE_VERSION = 1
# Timestamps of ext4 and most file systems advance in ticks of up to 10 ms (FAT: 2 s); a file modified less
# than this before it was hashed may be modified again with the same timestamp, so it is not recorded.
RACY_NS = 2_000_000_000


@dataclass(frozen=True)
class Expected:
    """What the manifest says of one file."""

    sha256: str
    size: int | None = None  # None: the manifest does not record it


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def check_manifest(
    path: Path, fix: str, header: Mapping[str, object], names: tuple[str, ...] | None = None, *, trust_cache: bool
) -> list[str]:
    """Problems with a generated data set (none: ready): its ``manifest.json`` at ``path`` read, its settings equal
    to ``header``, its ``files`` listing exactly ``names`` (None: any files inside the folder), then every listed
    file checked by :func:`check_files`."""
    from trainperf.errors import DataError

    try:
        manifest = read_manifest(path, fix)
    except DataError as e:
        return [str(e).split(": run")[0]]
    if {k: manifest.get(k) for k in header} != dict(header):
        return [f"{path} was written by another generator version or settings"]
    files = manifest.get("files")
    listed = isinstance(files, dict) and all(isinstance(e, dict) for e in files.values())
    inside = listed and all(not Path(n).is_absolute() and ".." not in Path(n).parts for n in files)
    if not inside or not files or (names is not None and set(files) != set(names)):
        return [f"{path} does not list the mini files"]
    expected = {n: Expected(sha256=e.get("sha256", ""), size=e.get("bytes")) for n, e in files.items()}
    return check_files(path.parent, expected, trust_cache=trust_cache)


def read_manifest(path: Path, fix: str) -> dict:
    """A generated data set's ``manifest.json`` (a JSON object with a ``files`` object); a DataError that names
    the file and ends with ``fix`` (how to re-create it) when it is missing, unreadable or of another kind."""
    from trainperf.errors import DataError

    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"{path} is missing: {fix}") from None
    except (OSError, ValueError) as e:
        raise DataError(f"{path} cannot be read ({e}): {fix}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("files"), dict):
        raise DataError(f"{path} is not a trainperf manifest: {fix}")
    return doc


def _stamp(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _load(path: Path) -> dict[str, list]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    if not isinstance(doc, dict) or doc.get("version") != CACHE_VERSION or not isinstance(doc.get("files"), dict):
        return {}
    return {k: v for k, v in doc["files"].items() if isinstance(v, list) and len(v) == 5}


def check_files(root: Path, manifest: Mapping[str, Expected], *, trust_cache: bool = True) -> list[str]:
    """Problems with the files of ``manifest`` (names relative to ``root``), one sentence each naming the file.

    ``trust_cache``: skip hashing a file whose ``stat`` matches the record of a check that found it intact;
    False hashes every file (and records the intact ones afresh).
    """
    root = Path(root)
    cache_path = root / CACHE
    cached = _load(cache_path) if trust_cache else {}
    records: dict[str, list] = {}
    problems: list[str] = []
    for name, expected in manifest.items():
        path = root / name
        try:
            st = os.stat(path)
        except FileNotFoundError:
            problems.append(f"{path} is missing")
            continue
        except OSError as e:
            problems.append(f"{path} cannot be read ({e.strerror})")
            continue
        if expected.size is not None and st.st_size != expected.size:
            problems.append(
                f"{path} has the wrong checksum (corrupt or replaced: {st.st_size} bytes, the manifest says "
                f"{expected.size})"
            )
            continue
        stamp = _stamp(st)
        record = cached.get(name)
        if record is not None and record[:4] == stamp and record[4] == expected.sha256:
            records[name] = record
            continue
        started = time.time_ns()
        try:
            digest = sha256(path)
        except OSError as e:
            problems.append(f"{path} cannot be read ({e.strerror})")
            continue
        if digest != expected.sha256:
            problems.append(f"{path} has the wrong checksum (corrupt or replaced)")
            continue
        after = os.stat(path)
        if _stamp(after) == stamp and max(st.st_mtime_ns, st.st_ctime_ns) < started - RACY_NS:
            records[name] = [*stamp, digest]
    if records != cached:
        _save(cache_path, records)
    return problems


def _save(path: Path, records: dict[str, list]) -> None:
    """Write the cache atomically; a folder that cannot be written only loses the shortcut."""
    try:
        atomic_write_text(path, json.dumps({"version": CACHE_VERSION, "files": records}, separators=(",", ":")) + "\n")
    except OSError:
        pass
