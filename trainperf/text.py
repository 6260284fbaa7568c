"""Text read from untrusted files (logs, packages, checkpoints), made safe to print in a terminal."""

from __future__ import annotations

import unicodedata


def printable(text: str) -> str:
    """``text`` with every control or format character escaped (``\\x1b``), line breaks and tabs kept."""
    if text.isprintable():  # no control character (see trainperf.rules.gate._first_control)
        return text
    return "".join(c if c in "\n\t" or not is_control(c) else repr(c)[1:-1] for c in text)


def is_control(c: str) -> bool:
    # Cc: C0/C1 controls and DEL (ESC starts terminal escapes); Cf: format characters such as the bidi
    # overrides U+202A-U+202E that reorder text on screen; Zl/Zp: line and paragraph separators.
    return unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")
