"""Linux manual pages as documents and their summaries: each page's DESCRIPTION section as plain text (the document)
and its NAME line (the summary: ``open, openat, creat - open and possibly create a file``), read from the roff source
that Debian's ``manpages-dev`` installs (sections 2 and 3: system calls and library functions, whose NAME lines are
one-line summaries by the man-pages project's own convention, man-pages(7)).

Why a parser here and not a formatter: Python has no maintained parser of roff's man macros, and rendering with
groff (``man -Tutf8``) depends on groff's version, the terminal width and the locale, so the same pages would make
different text on different machines. The pages use a small, documented subset of roff (man(7) and man-pages(7)):
requests at the start of a line, font macros whose arguments are text, and inline escapes. :func:`to_text` keeps the
text those carry and drops the rest: comments, layout requests, tables (tbl's ``.TS``/``.TE``) and preformatted
blocks (``.EX``/``.EE``, ``.nf``/``.fi``: code and structure definitions, not prose); a page that is only a ``.so``
link to another page is no document of its own.
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass
from pathlib import Path

from trainperf.errors import DataError

MAN_ROOT = Path("/usr/share/man")
SECTIONS = ("man2", "man3")  # Debian manpages-dev: system calls, library functions
PROJECT = "Linux man-pages"  # the .TH line's fourth field on every page the project writes
MAX_PAGE_BYTES = 2**20  # the largest page of manpages-dev is about 100 kB

# Font macros (man(7)): the first kind joins its arguments with spaces, the second alternates fonts without one.
SPACED = {"B", "I", "SM", "SB"}
ALTERNATING = {"BR", "BI", "IB", "IR", "RB", "RI"}
PARAGRAPH = {"PP", "P", "LP", "TP", "IP", "HP", "TQ", "sp", "br"}
SKIPPED_BLOCKS = {"TS": "TE", "EX": "EE", "nf": "fi", "de": ".", "ig": "."}  # tables, code, macro definitions
# Named glyphs (groff_char(7)) the pages use; any other is dropped.
GLYPHS = {
    "aq": "'", "dq": '"', "cq": "'", "oq": "'", "lq": '"', "rq": '"', "em": "--", "en": "-", "hy": "-", "mi": "-",
    "pl": "+", "mu": "x", "bu": "*", "ti": "~", "ha": "^", "rs": "\\", "co": "(c)", "tm": "(tm)", "de": " degrees",
    "<=": "<=", ">=": ">=", "!=": "!=", "==": "==", "->": "->", "<-": "<-", "ga": "`", "sl": "/", "ba": "|",
}  # fmt: skip
_ESCAPE = re.compile(
    r"\\(?:"
    r"\((?P<two>..)|\[(?P<long>[^\]]*)\]"  # \(xx, \[name]: a glyph
    r"|\*(?:\((?P<str2>..)|\[(?P<strl>[^\]]*)\]|(?P<str1>.))"  # \*x, \*(xx, \*[name]: a defined string
    r"|f(?:\(..|\[[^\]]*\]|.)"  # \fB, \f(CW, \f[B]: a font change
    r"|s[-+]?(?:\d|\(\d\d|\[\d*\])"  # \s-1: a size change
    r"|[hvwoNlLDbxXRZ](?P<q>['|]).*?(?P=q)"  # \h'..', \w'..': motions, widths, drawing
    r"|k.|n(?:\(..|\[[^\]]*\]|.)"  # marks and number registers
    r"|(?P<one>.)"  # a one-character escape
    r")"
)
ONE = {"-": "-", "e": "\\", "\\": "\\", " ": " ", "~": " ", "0": " ", "t": " ", "'": "'", "`": "`", ".": "."}
STRINGS = {"lq": '"', "rq": '"', "R": "(R)", "Tm": "(tm)"}


@dataclass(frozen=True)
class Page:
    name: str  # "open.2": the file's name without .gz, which the split hashes
    project: str  # the .TH line's fourth field: "Linux man-pages 6.03"
    summary: str  # the NAME line
    description: str  # the DESCRIPTION section as one paragraph-separated text


def _glyph(name: str) -> str:
    if name.startswith("u") and len(name) >= 5:
        try:
            return chr(int(name[1:5], 16))
        except ValueError:
            return ""
    return GLYPHS.get(name, "")


def _unescape(m: re.Match) -> str:
    if (name := m.group("two") or m.group("long")) is not None:
        return _glyph(name)
    if (name := m.group("str2") or m.group("strl") or m.group("str1")) is not None:
        return STRINGS.get(name, "")
    if (one := m.group("one")) is not None:
        return ONE.get(one, "")  # \&, \:, \%, \|, \^, \c, \/ and \, print nothing
    return ""  # fonts, sizes, motions, registers


def inline(text: str) -> str:
    """A text line's characters with roff's escapes resolved (``\\fB``, ``\\-``, ``\\(aq``, ``\\[em]``, ...)."""
    return _ESCAPE.sub(_unescape, text)


def arguments(rest: str) -> list[str]:
    """A request's arguments: words, or double-quoted strings in which ``""`` is one quote (roff's rule)."""
    out, i = [], 0
    while i < len(rest):
        if rest[i].isspace():
            i += 1
        elif rest[i] == '"':
            j, word = i + 1, []
            while j < len(rest):
                if rest[j] == '"' and rest[j + 1 : j + 2] == '"':
                    word.append('"')
                    j += 2
                elif rest[j] == '"':
                    break
                else:
                    word.append(rest[j])
                    j += 1
            out.append("".join(word))
            i = j + 1
        else:
            j = i
            while j < len(rest) and not rest[j].isspace():
                j += 1
            out.append(rest[i:j])
            i = j
    return out


def _lines(source: str) -> list[str]:
    """The source's lines with comments removed and escaped newlines joined."""
    joined, out = "", []
    for raw in source.splitlines():
        line = re.sub(r'(?<!\\)(\\\\)*\\".*', lambda m: m.group(1) or "", raw)  # \" starts a comment
        if line.startswith(('.\\"', "'\\\"")) or line.rstrip() in (".", "'"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            joined += line[:-1]
            continue
        out.append(joined + line)
        joined = ""
    return out


def sections(source: str) -> dict[str, str]:
    """Each ``.SH`` section's text (section names upper-case), paragraphs separated by newlines."""
    out: dict[str, list[str]] = {}
    current, closing = None, None
    for line in _lines(source):
        request = line[:1] in (".", "'")
        name, _, rest = line[1:].strip().partition(" ") if request else ("", "", "")
        if closing is not None:
            if request and name == closing or closing == "." and line.strip() == "..":
                closing = None
            continue
        if request and name in SKIPPED_BLOCKS:
            closing = SKIPPED_BLOCKS[name]
        elif request and name == "SH":
            current = " ".join(arguments(rest)).upper()
            out.setdefault(current, [])
        elif current is None:
            continue
        elif not request:
            out[current].append(inline(line))
        elif name in SPACED:
            out[current].append(inline(" ".join(arguments(rest))))
        elif name in ALTERNATING:
            out[current].append(inline("".join(arguments(rest))))
        elif name in PARAGRAPH or name == "SS":
            out[current].append("\n")
            if name in ("IP", "SS") and (args := arguments(rest)) and args[0] not in ("*", "\\(bu", "\\[bu]"):
                out[current].append(inline(args[0]) + ("\n" if name == "SS" else ""))
    return {k: _tidy(" ".join(v)) for k, v in out.items()}


def _tidy(text: str) -> str:
    paragraphs = (" ".join(p.split()) for p in text.split("\n"))
    return "\n".join(p for p in paragraphs if p)


def parse(name: str, source: str) -> Page | None:
    """The page's summary and description; None for a page that is a ``.so`` link, lacks either, or is not the
    man-pages project's (its ``.TH`` line says "Linux man-pages <version>"; Perl's and readline's pages installed
    in the same folders follow other conventions)."""
    lines = _lines(source)
    if any(line.startswith(".so ") for line in lines[:3]):
        return None
    title = next((arguments(line[3:]) for line in lines if line.startswith(".TH ")), [])
    if len(title) < 4 or not title[3].startswith(PROJECT):
        return None
    found = sections(source)
    summary, description = " ".join(found.get("NAME", "").split()), found.get("DESCRIPTION", "")
    if " - " not in summary or not description:
        return None
    return Page(name=name, project=title[3], summary=summary, description=description)


def read_pages(root: Path = MAN_ROOT, folders: tuple[str, ...] = SECTIONS) -> list[Page]:
    """Every page of ``folders`` under ``root`` that has a NAME line and a DESCRIPTION, sorted by name."""
    pages = []
    for folder in folders:
        files = sorted((root / folder).glob("*.gz")) if (root / folder).is_dir() else []
        if not files:
            raise DataError(
                f"{root / folder}: no manual pages; install Debian's manpages-dev (scripts/setup.sh does: "
                "`apt-get install manpages-dev`), then run `trainperf data prepare llama2_70b_lora` again"
            )
        for path in files:
            if path.is_symlink() or path.stat().st_size > MAX_PAGE_BYTES:
                continue  # a link is another page's second name
            try:
                source = gzip.decompress(path.read_bytes()).decode("utf-8", errors="replace")
            except (OSError, EOFError) as e:
                raise DataError(f"{path}: not a readable gzip file ({e}); reinstall manpages-dev") from None
            if page := parse(path.name.removesuffix(".gz"), source):
                pages.append(page)
    return sorted(pages, key=lambda p: p.name)
