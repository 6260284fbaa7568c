"""Text read from untrusted files (logs, packages, checkpoints), made safe to print in a terminal, to paste into a
shell, and to put in a Markdown table."""

from __future__ import annotations

import html
import re
import shlex
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


def shell_command(*words: object) -> str:
    """A command for the user to paste: each word quoted for the shell (``shlex.quote``: ``$(...)`` in a folder's name
    stays text), and control characters escaped for the terminal."""
    return printable(shlex.join(str(w) for w in words))


# Markdown's inline syntax inside a table cell: emphasis, code, strike-through, links and images ([text](url),
# ![alt](url)), the cell separator; HTML (tags, entities) is escaped by html.escape
_MARKDOWN_SYNTAX = re.compile(r"([\\`*_{}\[\]()!~|])")


def markdown_text(value: object) -> str:
    """``value`` as plain text in a Markdown table cell: HTML and every Markdown syntax character escaped (a system
    name ``![x](http://...)`` shows as typed, never as an image or a link), on one line, control characters
    escaped."""
    text = html.escape(printable(str(value)).replace("\n", " ").replace("\t", " "), quote=False)
    return _MARKDOWN_SYNTAX.sub(r"\\\1", text)
