"""llama2_70b_lora's mini data: manual pages read from their roff source (summary and description), the split by page
name, and the sequences in the reference's layout with the loss on the summary alone."""

from __future__ import annotations

import gzip

import pytest

from trainperf.errors import DataError
from trainperf.workloads.llama2_70b_lora import manpages, mini
from trainperf.workloads.llama2_70b_lora.reference import IGNORE
from trainperf.workloads.llama31_8b import mini as prose

PAGE = r""".\" SPDX-License-Identifier: Linux-man-pages-copyleft
.TH strlen 3 2023-02-05 "Linux man-pages 6.03"
.SH NAME
strlen \- calculate the length of a string
.SH SYNOPSIS
.nf
.B #include <string.h>
.fi
.SH DESCRIPTION
The
.BR strlen ()
function calculates the length of the string pointed to by
.IR s ,
excluding the terminating null byte (\[aq]\e0\[aq]).\" a comment
.PP
It is \fIfast\fP \(em and \
joined.
.TS
allbox;
l l.
Interface	Value
.TE
.EX
int n = strlen(s);
.EE
.TP
.B NOTE
See
.BR string (3).
.SH RETURN VALUE
The length.
"""


def test_a_page_gives_its_name_line_and_its_description_as_prose():
    page = manpages.parse("strlen.3", PAGE)
    assert page is not None and page.project == "Linux man-pages 6.03"
    assert page.summary == "strlen - calculate the length of a string"
    assert page.description.split("\n") == [
        "The strlen() function calculates the length of the string pointed to by s, excluding the terminating null "
        "byte ('\\0').",
        "It is fast -- and joined.",  # fonts dropped, a glyph, an escaped newline joined
        "NOTE See string(3).",  # the table and the example left out, the tag kept
    ]


def test_links_other_projects_pages_and_pages_without_a_summary_are_no_documents():
    assert manpages.parse("lstat.2", '.\\" comment\n.so man2/stat.2\n') is None
    assert manpages.parse("Foo.3pm", PAGE.replace("Linux man-pages 6.03", "perl v5.36.0")) is None
    assert manpages.parse("x.3", PAGE.replace("strlen \\- calculate", "strlen calculate")) is None


def test_request_arguments_follow_roffs_quoting():
    assert manpages.arguments('"int open(const char *" pathname ", int " flags );') == [
        "int open(const char *", "pathname", ", int ", "flags", ");",
    ]  # fmt: skip
    assert manpages.arguments('"say ""hi""" x') == ['say "hi"', "x"]


def test_a_folder_without_pages_names_the_package(tmp_path):
    with pytest.raises(DataError, match="manpages-dev"):
        manpages.read_pages(tmp_path, ("man2",))
    (tmp_path / "man2").mkdir()
    (tmp_path / "man2" / "strlen.3.gz").write_bytes(gzip.compress(PAGE.encode()))
    (tmp_path / "man2" / "stat.2.gz").write_bytes(gzip.compress(b".so man2/lstat.2\n"))
    assert [p.name for p in manpages.read_pages(tmp_path, ("man2",))] == ["strlen.3"]


def _page(name: str, summary: str, description: str) -> manpages.Page:
    return manpages.Page(name=name, project="Linux man-pages 6.03", summary=summary, description=description)


def test_the_split_is_by_page_name_and_never_evaluates_trained_text():
    pages = [_page(f"f{i}.3", f"f{i} - does {i}", f"The f{i}() function does {i}.") for i in range(200)]
    train, valid = mini.split(pages)
    assert 8 <= len(valid) <= 40 and len(train) + len(valid) == 200
    assert {p.name for p in valid} == {p.name for p in pages if mini.is_validation(p.name)}
    copy = _page(valid[0].name, "g - another", train[0].description)  # a validation page repeating trained text
    assert copy not in mini.split([*train, copy])[1]


def test_a_sequence_scores_the_summary_alone():
    tok = prose.train_tokenizer(["The strlen() function calculates the length of a string. " * 20] * 5)
    long = _page("x.3", "x - " + "word " * 60, "The x() function.")
    rows = mini.encode(tok, [_page("strlen.3", "strlen - length", "The strlen() function " * 80), long], score_end=True)
    assert len(rows["input_ids"]) == 1  # a summary over MAX_SUMMARY_TOKENS is dropped
    ids, labels = rows["input_ids"][0], rows["labels"][0]
    assert len(ids) == mini.SEQ_LEN  # the description cut to leave room for the summary
    scored = [t for t in labels if t != IGNORE]
    assert tok.decode(scored[:-1]) == " strlen - length" and scored[-1] == tok.token_to_id(prose.EOS)
    assert labels[: -len(scored)] == [IGNORE] * (len(ids) - len(scored))
    assert tok.decode(ids[: -len(scored)]).startswith(mini.PROMPT) and tok.decode(ids).count(mini.MARKER) == 1
    evaluated = mini.encode(tok, [_page("strlen.3", "strlen - length", "The strlen() function " * 9)], score_end=False)
    assert evaluated["labels"][0][-1] == IGNORE  # validation: the end of text unscored, as the reference's labels
