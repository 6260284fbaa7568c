"""trainperf: an open time-to-train benchmark suite built the way MLPerf Training is built."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

__version__ = "0.1.0"

_CODE_SUFFIXES = (".py", ".yaml")  # the code and the rule files; not the published history data


@functools.cache
def code_hash() -> str:
    """A content hash of trainperf's code and rule files (16 hex digits), logged with every run.

    The version number alone does not say which code made a result: resume refuses runs of another
    code hash, so one score never mixes two versions of the harness or a workload.
    """
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in _CODE_SUFFIXES and p.is_file()):
        if "__pycache__" in path.parts:
            continue
        h.update(path.relative_to(root).as_posix().encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:16]
