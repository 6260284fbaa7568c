"""The mini bert corpus: English prose assembled offline from three Debian packages.

Each source is read into *documents* (lists of sentences), the unit BERT's next-sentence pairs are drawn from:

- ``dict-gcide`` (GNU Collaborative International Dictionary of English, GPL-3+; Webster's 1913 with
  additions): the definitions and quoted example sentences of 6 consecutive entries form one document.
- ``wordnet-base`` (WordNet 3.0, Princeton's WordNet licence): the glosses of 12 consecutive synsets of a
  part-of-speech file (definitions and their quoted examples) form one document.
- ``python3.11-doc`` (the Python documentation, PSF licence; its reStructuredText sources): the prose
  paragraphs of one page section form one document (markup, code blocks and tables dropped).

All three are prose of a kind a small model can learn in minutes: definitions, usage examples, technical
explanation. Which document goes to training or evaluation is decided in :mod:`trainperf.workloads.bert.data`.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator
from pathlib import Path

GCIDE = Path("/usr/share/dictd/gcide.dict.dz")  # dictzip: a gzip file with an index, readable by gzip
WORDNET = Path("/usr/share/wordnet")
PYTHON_DOCS = Path("/usr/share/doc/python3.11-doc/html/_sources")
SOURCES = {
    "dict-gcide": GCIDE,
    "wordnet-base": WORDNET / "data.noun",
    "python3.11-doc": PYTHON_DOCS / "tutorial" / "index.rst.txt",
}
DEBIAN_PACKAGES = ("dict-gcide", "wordnet-base", "python3-doc")
WORDNET_FILES = ("data.noun", "data.verb", "data.adj", "data.adv")
WORDNET_GROUP = 12  # synsets per document
GCIDE_GROUP = 6  # consecutive (alphabetically neighbouring, often related) entries per document
MIN_WORDS = 3  # a "sentence" of fewer words is markup debris, not prose

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")
_SPACE = re.compile(r"\s+")
Document = list[str]


def missing_sources() -> list[str]:
    """Debian packages whose files the corpus needs but are not installed."""
    return [pkg for pkg, path in SOURCES.items() if not path.exists()]


def require_sources(what: str) -> None:
    """A clear error naming the Debian packages to install when the corpus's sources are missing (``what``: whose
    data needs them)."""
    if missing := missing_sources():
        from trainperf.errors import DataError

        raise DataError(
            f"{what}: the Debian package(s) {', '.join(missing)} are not installed: run `make setup` "
            f"(scripts/setup.sh) or `apt-get install {' '.join(DEBIAN_PACKAGES)}`"
        )


def split_sentences(text: str) -> list[str]:
    text = _SPACE.sub(" ", text).strip()
    return [s for s in _SENTENCE_END.split(text) if len(s.split()) >= MIN_WORDS]


# --- GCIDE ------------------------------------------------------------------------------------------------
_GCIDE_HEAD = re.compile(r"^\S.*\\.*\\")  # "Affect \Af*fect"\, v. t. [...]": an entry's first line
_GCIDE_NOISE = [
    (re.compile(r"\[[^\]]*\]"), " "),  # [1913 Webster], [Obs.], etymologies
    (re.compile(r"--\s?[A-Z][\w.' ]*\.?"), " "),  # "--Milton." attributions
    (re.compile(r"[{}]"), ""),  # {cross references}
    (re.compile(r"\b\d+\.\s"), " "),  # sense numbers
    (re.compile(r"\([a-z]\)\s"), " "),  # sub-sense letters
    (re.compile(r"[^\x20-\x7e]"), " "),  # non-ASCII markup remnants
]


def gcide_documents(path: Path = GCIDE) -> Iterator[Document]:
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
        entry: list[str] = []
        for line in f:
            if _GCIDE_HEAD.match(line):
                if entry:
                    yield from _gcide_entry(entry)
                entry = [line.split(",", 1)[-1] if "\\" in line else line]
                entry[0] = re.sub(r"^.*?\\.*?\\", "", line)  # drop the headword and its pronunciation
            elif entry:
                entry.append(line)
        if entry:
            yield from _gcide_entry(entry)


def _gcide_entry(lines: list[str]) -> Iterator[Document]:
    text = " ".join(lines[1:])  # the first line holds the part of speech and inflections
    for pattern, repl in _GCIDE_NOISE:
        text = pattern.sub(repl, text)
    sentences = split_sentences(text)
    if sentences:
        yield sentences


# --- WordNet ----------------------------------------------------------------------------------------------
def wordnet_documents(root: Path = WORDNET) -> Iterator[Document]:
    for name in WORDNET_FILES:
        doc: Document = []
        count = 0
        with open(root / name, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("  ") or "|" not in line:
                    continue  # the licence header
                gloss = line.split("|", 1)[1].strip()
                for part in gloss.split(";"):
                    part = part.strip().strip('"').strip()
                    if len(part.split()) >= MIN_WORDS:
                        doc.append(part[0].upper() + part[1:] + ("" if part.endswith((".", "!", "?")) else "."))
                count += 1
                if count % WORDNET_GROUP == 0 and doc:
                    yield doc
                    doc = []
        if doc:
            yield doc


# --- the Python documentation -------------------------------------------------------------------------------
_RST_ROLE = re.compile(r":[\w:-]+:`!?~?([^`<]*?)(?:\s*<[^>]*>)?`")  # :keyword:`if` -> if
_RST_LITERAL = re.compile(r"``([^`]*)``")
_RST_LINK = re.compile(r"`([^`<]*?)\s*<[^>]*>`_+")
_RST_REF = re.compile(r"`([^`]*)`_*")


def python_doc_documents(root: Path = PYTHON_DOCS) -> Iterator[Document]:
    for path in sorted(root.rglob("*.rst.txt")):
        if "whatsnew" in path.parts or "c-api" in path.parts:
            continue  # change logs and C signatures: lists, not prose
        doc: Document = []
        for para in _rst_paragraphs(path.read_text(encoding="utf-8", errors="replace")):
            if para is None:  # a section heading ends a document
                if doc:
                    yield doc
                doc = []
                continue
            doc.extend(split_sentences(para))
        if doc:
            yield doc


def _rst_paragraphs(text: str) -> Iterator[str | None]:
    """Prose paragraphs of a reStructuredText page (None at each section heading); code, tables, directives dropped."""
    lines = text.splitlines()
    para: list[str] = []
    in_block = False  # inside an indented literal block or directive body
    for i, line in enumerate(lines):
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if in_block:
            if line.strip() and not line.startswith((" ", "\t")):
                in_block = False
            else:
                continue
        if not line.strip():
            if para:
                yield _clean_rst(" ".join(para))
                para = []
            continue
        if line.startswith(".. ") or line.lstrip().startswith((">>>", "...", "|", "+-", "==", "* ", "- ", "#")):
            if line.startswith(".. "):
                in_block = True
            if para:
                yield _clean_rst(" ".join(para))
                para = []
            continue
        if nxt and set(nxt.strip()) <= set("=-~*^#\"'") and len(nxt.strip()) >= 3:
            if para:
                yield _clean_rst(" ".join(para))
                para = []
            yield None  # a heading
            continue
        if set(line.strip()) <= set("=-~*^#\"'"):
            continue
        if line.startswith((" ", "\t")) and not para:
            continue  # an indented block on its own: code or a quotation
        para.append(line.strip())
        if line.rstrip().endswith("::"):
            yield _clean_rst(" ".join(para).rstrip(":") + ":")
            para = []
            in_block = True
    if para:
        yield _clean_rst(" ".join(para))


def _clean_rst(text: str) -> str:
    text = _RST_ROLE.sub(r"\1", text)
    text = _RST_LITERAL.sub(r"\1", text)
    text = _RST_LINK.sub(r"\1", text)
    text = _RST_REF.sub(r"\1", text)
    return text.replace("\\", "")


def all_documents() -> dict[str, list[Document]]:
    """Every source's documents, in a fixed order (the split into training and evaluation is the caller's)."""
    return {
        "dict-gcide": _grouped(gcide_documents(), GCIDE_GROUP),
        "wordnet-base": list(wordnet_documents()),
        "python3.11-doc": list(python_doc_documents()),
    }


def _grouped(docs: Iterator[Document], size: int) -> list[Document]:
    out: list[Document] = []
    group: Document = []
    for i, doc in enumerate(docs, 1):
        group.extend(doc)
        if i % size == 0:
            out.append(group)
            group = []
    if group:
        out.append(group)
    return out
