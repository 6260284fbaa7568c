"""The limits on what trainperf reads from a file it did not write: one table, applied by every reader.

The gate (:mod:`trainperf.rules.gate`), the MLLOG reader (:mod:`trainperf.results`) and so ``check``,
``review``, ``report``, ``package`` and a resumed ``run`` read result files, system descriptions, ``summary.json``
and ablation files within these limits, and refuse a file over one (:class:`OverLimit`, naming the limit; the
caller names the file). Each limit is far above what an MLPerf file holds, and low enough that a file at the
limit costs seconds and megabytes, never minutes and gigabytes: the size is checked before a byte is read
(a sparse 1 GiB file is refused unread), a count is checked while the lines are read (memory stays bounded),
and JSON nesting and number lengths are checked before Python's recursion or its int-string limit is reached.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

# Sizes. MLPerf Training v2.0 result files are well under 1 MiB (a run logs tens to a few thousand lines) and a
# system description a few KiB.
MAX_RESULT_BYTES = 16 * 2**20  # one result file
MAX_SYSTEM_BYTES = 1 * 2**20  # one systems/<system>.json
MAX_DOCUMENT_BYTES = 4 * 2**20  # one summary.json or ablation file (trainperf writes a few KiB)
MAX_PACKAGE_BYTES = 256 * 2**20  # everything `trainperf review` copies from one package
# One MLLOG line. The tools find the JSON of a line with re.sub(".*" + TOKEN, TOKEN, line), whose time grows with
# the square of the text after the token (measured on the 2-core CI machine: 10 KB 0.1 s, 100 KB 8.5 s, 300 KB
# 58 s); an MLPerf event is a few hundred characters. At this cap a line costs the tools about 0.02 s.
MAX_LINE_CHARS = 4096
# The tools' cost of reading one file: the sum over its MLLOG lines of (characters after the token)^2, which
# their expression's time follows: 2,048 lines of 2,048 characters, or 256 lines at MAX_LINE_CHARS. The largest of
# the 3,435 published v1.1, v2.0 and v2.1 result files is 1.47 * 10^9 (NVIDIA's v2.0 2xa30 maskrcnn logs; 2^30
# refused them), a third of this budget. At this budget a file costs each official tool about 5 s; without it,
# five 2 MiB files of 4 KB lines (8.6 * 10^9 each) took review 130 s.
MAX_LINE_COST = 2**32
# Counts in one result file: 20 and 30 times the largest of the 1,830 published v1.1 result files (4,964 MLLOG
# lines, an NVIDIA resnet log; 306 evaluations, a Supermicro unet3d log). Read at this count, a file's records
# take about 100 MB; 10^6 evaluations took report 1.8 GB.
MAX_MLLOG_LINES = 100_000
MAX_EVALUATIONS = 10_000
# JSON: how deep arrays and objects nest (an MLLOG record nests 3 deep, a system description 2, summary.json 4),
# and how many characters one number literal has (a time_ms has 13 digits; Python refuses an int of over 4,300).
MAX_JSON_DEPTH = 32
MAX_NUMBER_CHARS = 64

# The table, for the docs and the tests: limit -> (value, what it bounds)
LIMITS: dict[str, tuple[int, str]] = {
    "MAX_RESULT_BYTES": (MAX_RESULT_BYTES, "bytes in one result file"),
    "MAX_SYSTEM_BYTES": (MAX_SYSTEM_BYTES, "bytes in one system description"),
    "MAX_DOCUMENT_BYTES": (MAX_DOCUMENT_BYTES, "bytes in one summary.json or ablation file"),
    "MAX_PACKAGE_BYTES": (MAX_PACKAGE_BYTES, "bytes review copies from one package"),
    "MAX_LINE_CHARS": (MAX_LINE_CHARS, "characters in one MLLOG line"),
    "MAX_LINE_COST": (MAX_LINE_COST, "sum of the squared lengths of a file's MLLOG payloads"),
    "MAX_MLLOG_LINES": (MAX_MLLOG_LINES, "MLLOG lines in one result file"),
    "MAX_EVALUATIONS": (MAX_EVALUATIONS, "eval_accuracy lines in one result file"),
    "MAX_JSON_DEPTH": (MAX_JSON_DEPTH, "nesting of JSON arrays and objects"),
    "MAX_NUMBER_CHARS": (MAX_NUMBER_CHARS, "characters in one JSON number"),
}


class OverLimit(ValueError):
    """A file over one of the limits; the message (the end of a sentence about the file) says which."""


def size_text(n: int) -> str:
    return f"{n / 2**20:.4g} MiB" if n >= 2**20 else f"{n} bytes"


def read_capped(path: Path, limit: int, *, dir_fd: int | None = None) -> bytes:
    """The bytes of the plain file ``path``, refused (ValueError) by its apparent size before any is read.

    A link is never followed (``O_NOFOLLOW``); a FIFO or device is refused without blocking on it.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("is not a plain file")
        if st.st_size > limit:
            raise OverLimit(f"is {size_text(st.st_size)} (its apparent size), over the {size_text(limit)} allowed")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(limit + 1)  # the file may have grown since fstat
        if len(data) > limit:
            raise OverLimit(f"grew past the {size_text(limit)} allowed while it was read")
        return data
    finally:
        os.close(fd)


# bytes: every digit made b"0" and every other byte b"x", then a search for the run of b"0" (at C speed; a regular
# expression's [0-9]{n} tries again from every digit of a long run, 15 times slower on a power log)
_DIGITS_AS_ZERO = bytes(b"0"[0] if b"0"[0] <= i <= b"9"[0] else b"x"[0] for i in range(256))
_LONG_RUN = b"0" * (MAX_NUMBER_CHARS + 1)
_LONG_DIGITS_TEXT = re.compile(f"[0-9]{{{MAX_NUMBER_CHARS + 1}}}")


def has_long_digit_run(data: bytes | str) -> bool:
    """Whether ``data`` holds more than :data:`MAX_NUMBER_CHARS` digits in a row (a fast test, at C speed, before
    the exact one of :func:`loads`: such a run may also be inside a string)."""
    if isinstance(data, str):
        return _LONG_DIGITS_TEXT.search(data) is not None
    return _LONG_RUN in data.translate(_DIGITS_AS_ZERO)


def _number(parse: type) -> Any:
    def read(text: str) -> Any:
        if len(text) > MAX_NUMBER_CHARS:
            digits = f"{text[:20]}...{text[-8:]}"
            raise OverLimit(
                f"holds a number of {len(text):,} characters ({digits}), over the {MAX_NUMBER_CHARS} allowed"
            )
        return parse(text)

    return read


_parse_int, _parse_float = _number(int), _number(float)


def depth_problem(obj: Any) -> str | None:
    """Why the parsed JSON ``obj`` nests too deeply (None: it does not), found without recursion."""
    stack = [(obj, 1)]
    while stack:
        x, depth = stack.pop()
        if isinstance(x, dict | list):
            if depth > MAX_JSON_DEPTH:
                return f"nests arrays and objects more than {MAX_JSON_DEPTH} deep"
            stack.extend((v, depth + 1) for v in (x.values() if isinstance(x, dict) else x))
    return None


def loads(text: str | bytes, **kwargs: Any) -> Any:
    """``json.loads`` within the limits: :class:`OverLimit` for a number over :data:`MAX_NUMBER_CHARS` characters
    or nesting over :data:`MAX_JSON_DEPTH` (never a RecursionError or Python's int-string ValueError); other bad
    JSON raises ``ValueError`` as json does."""
    if has_long_digit_run(text):
        kwargs.setdefault("parse_int", _parse_int)
        kwargs.setdefault("parse_float", _parse_float)
    try:
        obj = json.loads(text, **kwargs)
    except RecursionError:
        raise OverLimit(f"nests arrays and objects more than {MAX_JSON_DEPTH} deep") from None
    if (problem := depth_problem(obj)) is not None:
        raise OverLimit(problem)
    return obj


def read_json(path: Path, limit: int) -> Any:
    """A JSON file within the limits: :class:`OverLimit` (size, depth, number length), ``ValueError`` (not JSON,
    not UTF-8) or ``OSError``."""
    return loads(read_capped(Path(path).resolve(), limit).decode("utf-8"))


__all__ = [
    "LIMITS",
    "MAX_DOCUMENT_BYTES",
    "MAX_EVALUATIONS",
    "MAX_JSON_DEPTH",
    "MAX_LINE_CHARS",
    "MAX_LINE_COST",
    "MAX_MLLOG_LINES",
    "MAX_NUMBER_CHARS",
    "MAX_PACKAGE_BYTES",
    "MAX_RESULT_BYTES",
    "MAX_SYSTEM_BYTES",
    "OverLimit",
    "depth_problem",
    "has_long_digit_run",
    "loads",
    "read_capped",
    "read_json",
    "size_text",
]
