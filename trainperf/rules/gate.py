"""The gate: what an untrusted MLLOG file or system description must satisfy before an official tool reads it.

Why it exists (mlperf-logging 4.1.68, ruleset ``training_2.0.0``): the compliance checker, which
``package_checker`` and ``result_summarizer`` also run on every result file, builds rule-file paths from
logged values and executes the CODE/PRE/POST/CHECK blocks of whatever YAML file a path reaches, even
when the value fails its own CHECK (a POST runs after a failed CHECK):

- ``common.yaml``: ``submission_division`` -> ``training_2.0.0/{value}_common.yaml``
- ``open_common.yaml`` / ``closed_common.yaml``: ``submission_benchmark``
  -> ``training_2.0.0/{open,closed}_{value}.yaml``
- ``closed_resnet.yaml``: ``opt_name`` -> ``training_2.0.0/closed_resnet_{value}.yaml``

A value of ``../`` segments reaches any ``*.yaml`` file on the machine, including one inside the
package under review. ``rcp_checker`` takes the value of *any* MLLOG line whose text mentions
``submission_benchmark`` as the benchmark and opens ``rcps_{value}.json`` from it.

So before an official tool sees a file, every value that reaches a path is checked against what the
v2.0 rules allow, and nothing the tools read may carry a path separator, ``..`` or a control character.
The file is read the way the tools read it (:func:`trainperf.results.mllog_lines`: latin-1, universal
newlines, the text after the last ``:::MLLOG `` of a line, parsed as JSON), so the gate sees what they see, and a
line that another reader would read otherwise (the token twice, a line end of Python's ``str.splitlines`` that the
tools do not see) is refused. Nothing is evaluated.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

# The limits on what is read (sizes, line length, counts, JSON nesting and numbers): one table for every reader
# (trainperf/limits.py), whose read_capped checks a file's apparent size before a byte is read.
from trainperf.limits import MAX_LINE_CHARS, OverLimit  # the table's own objects, not copies
from trainperf.registry import BENCHMARKS, benchmark
from trainperf.results import MllogLine, mllog_lines
from trainperf.system import DIVISIONS
from trainperf.text import is_control, printable

# The logged keys the v2.0 rule files format into a rule-file path (see the module docstring).
PATH_KEYS = ("submission_division", "submission_benchmark", "opt_name")
# The logged names of a submission that trainperf compares with the package's folders (submission_org with <org>,
# submission_platform with results/<system>): plain names, no path. The other submission_* values (submission_poc_name,
# submission_poc_email, submission_status, ...) are free text that no tool uses as a path ('N/A', an empty e-mail):
# screened for control characters only, like every string of a log.
NAME_KEYS = ("submission_org", "submission_platform")
_RCP_BENCHMARK_TEXT = "submission_benchmark"  # rcp_checker: `if "submission_benchmark" in line: value is the benchmark`
_GLOB_CHARS = frozenset("*?[]{}")  # glob patterns and result_summarizer's "{a,b}" folder syntax
_SHOWN_CHARS = 240  # a value is shown whole up to this many characters (a path of 40 segments)


def shown(value: Any, limit: int = _SHOWN_CHARS) -> str:
    """``value`` as safe text: Python's repr (control and format characters escaped), cut after ``limit``."""
    text = repr(value)
    if len(text) > limit:
        text = f"{text[:limit]}... ({len(text)} characters)"
    return printable(text)


def _first_control(text: str, allowed: str = "") -> str | None:
    """The first control character of ``text`` not in ``allowed`` (None: none). ``str.isprintable`` is False for
    every control character (and for a few others, such as non-breaking spaces), so most text is cleared at C speed."""
    if text.isprintable():
        return None
    return next((c for c in text if c not in allowed and is_control(c)), None)


def name_problem(name: Any, *, file_name: bool = False) -> str | None:
    """Why ``name`` cannot be used in a path (None: it can). ``file_name``: also refuse glob characters."""
    if not isinstance(name, str):
        return "is not a string"
    if not name:
        return "is empty"
    if bad := _first_control(name):
        return f"contains the control character U+{ord(bad):04X}"
    if "/" in name or "\\" in name:
        return "contains a path separator ('/' or '\\')"
    if ".." in name:
        return "contains '..'"
    if file_name and (bad := next((c for c in name if c in _GLOB_CHARS), None)):
        return f"contains {bad!r}, which the official tools read as a file pattern"
    return None


# --- result files ---------------------------------------------------------------------------------
def _strings(obj: Any) -> Iterator[str]:
    """Every string in a JSON document (object keys too), without recursion."""
    stack = [obj]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            yield x
        elif isinstance(x, dict):
            stack.extend(x.keys())
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)


def _as_utf8(text: str) -> str:
    """A latin-1 view of the file's bytes read as UTF-8 (what a person sees), for the control-character check."""
    return text.encode("latin-1").decode("utf-8", errors="replace")


def screen_log(data: bytes, *, known: Collection[str] = BENCHMARKS) -> list[str]:
    """Why the official tools must not read this MLLOG file (``[]``: they may), one sentence per value. ``known``: the
    benchmark names allowed (trainperf's; a real package of another round: its round's, each the name of a rule file
    the official tools ship)."""
    return screened_lines(data, known=known)[1]


def screened_lines(data: bytes, *, known: Collection[str] = BENCHMARKS) -> tuple[list[MllogLine], list[str]]:
    """(the file's lines as :func:`trainperf.results.mllog_lines` reads them, :func:`screen_log`'s refusals), for a
    reader that goes on with the lines: the file read once. No line where the file is over a limit."""
    try:
        lines = mllog_lines(data, max_line_chars=MAX_LINE_CHARS)
    except OverLimit as e:
        return [], [f"the file {e}"]
    return lines, _screen_lines(lines, known)


def _screen_lines(lines: list[MllogLine], known: Collection[str]) -> list[str]:
    refusals: list[str] = []
    seen = _PathValues()
    for line in lines:
        if (why := _unreadable(line)) is not None:
            refusals.append(f"line {line.lineno}: {why}")
            continue
        if (record := tools_record(line)) is None:
            continue  # the tools report the line as unparsable and skip it
        if not _plain(line.text):
            readable = line.record if line.record is not None else record  # its strings read as UTF-8
            text = next((s for s in _strings(readable) if _first_control(s)), None)
        else:  # every string of the record is written out in the line, which _unreadable found free of controls
            text = None
        if text is not None:
            bad = _first_control(text)
            refusals.append(
                f"line {line.lineno}: {shown(record.get('key'))} holds the control character U+{ord(bad):04X} in "
                f"{shown(text)} (in its key, value or metadata); the official tools print what they read as it is"
            )
            continue
        refusals += _path_value_refusals(line.lineno, record, line.text, known, seen)
    return refusals + _opt_name_refusals(seen)


def _plain(text: str) -> bool:
    """Whether every string of the JSON text ``text`` is written out as it is: ASCII, without an escape."""
    return text.isascii() and "\\" not in text


def tools_record(line: MllogLine) -> dict[str, Any] | None:
    """The line's record as the official tools parse it (``json.loads`` of the text after the token, a latin-1 view of
    the bytes), None where that is not a JSON object. The record :func:`trainperf.results.mllog_lines` read is the
    same record where the text is ASCII (UTF-8 and latin-1 read ASCII alike), but for a ``time_ms`` written as a
    decimal fraction, kept exact there (an int or a :class:`~decimal.Decimal`); so that one is kept apart only in
    ``time_ms``, which no rule of the gate reads, and the text is parsed again only where it is not ASCII."""
    if line.record is not None and line.text.isascii():
        return line.record
    try:
        record = json.loads(line.text)
    except (ValueError, RecursionError):
        return None
    return record if isinstance(record, dict) else None


@dataclass
class _PathValues:
    """The values of a log that choose rule files, as :func:`screen_log` reads them."""

    divisions: set[Any] = field(default_factory=set)
    benchmarks: set[Any] = field(default_factory=set)
    opt_names: list[tuple[int, Any]] = field(default_factory=list)  # (line, value)


def _refusal(lineno: int, key: Any, value: Any, why: str) -> str:
    return f"line {lineno}: {shown(key)} has value {shown(value)}, which {why}"


def _unreadable(line: MllogLine) -> str | None:
    """Why the tools would read ``line`` otherwise than the gate does, or too slowly, or print a raw control
    character from it (None: none of these)."""
    if line.over_limit and line.length <= MAX_LINE_CHARS:
        return line.over_limit
    if line.length > MAX_LINE_CHARS:
        return (
            f"an MLLOG line of {line.length} characters, over the {MAX_LINE_CHARS} allowed: the "
            "official tools read a line in a time that grows with the square of its length (100 KB: 8 s; 1 MB: "
            "about 14 minutes), and an MLPerf event is a few hundred characters"
        )
    if line.ambiguous:
        return line.ambiguous
    text = _as_utf8(line.text)
    if bad := _first_control(text, allowed="\t"):
        return (
            f"holds the raw control character U+{ord(bad):04X} (an MLLOG line is JSON text, "
            f"which has none): {shown(text)}"
        )
    return None


def _path_value_refusals(
    lineno: int, record: dict[str, Any], payload: str, known: Collection[str], seen: _PathValues
) -> list[str]:
    """Why a record's value may not reach a rule-file path, a file name or a submission name; each value that
    chooses a rule file is noted in ``seen``."""
    key, value = record.get("key"), record.get("value")
    refusals = []
    if key == "submission_division":
        seen.divisions.add(value if isinstance(value, str) else None)
        if not (isinstance(value, str) and value in DIVISIONS):
            why = (
                f"is not {' or '.join(map(repr, DIVISIONS))}: the official v2.0 rules build the rule-file path "
                "training_2.0.0/<value>_common.yaml from it and execute that file"
            )
            refusals.append(_refusal(lineno, key, value, why))
    if key == "submission_benchmark" or _RCP_BENCHMARK_TEXT in payload:
        seen.benchmarks.add(value if isinstance(value, str) else None)
        if not (isinstance(value, str) and value in known):
            why = (
                "the official v2.0 rules build the rule-file path training_2.0.0/<division>_<value>.yaml from it "
                "and execute that file"
                if key == "submission_benchmark"
                else "rcp_checker takes as the benchmark name (the line mentions submission_benchmark) and "
                "opens rcps_<value>.json from it"
            )
            names = ", ".join(sorted(known))
            refusals.append(
                _refusal(lineno, key, value, f"is not an MLPerf Training benchmark of the round ({names}): {why}")
            )
    if key == "opt_name":
        seen.opt_names.append((lineno, value))
        if problem := name_problem(value):
            why = (
                f"{problem}: the official v2.0 closed rules of a benchmark that branches on it build the "
                "rule-file path training_2.0.0/closed_<benchmark>_<value>.yaml from it and execute that file"
            )
            refusals.append(_refusal(lineno, key, value, why))
    elif key in NAME_KEYS:
        if isinstance(value, str) and (problem := name_problem(value)):
            why = f"{problem}; it names the submission, and a name holds no path"
            refusals.append(_refusal(lineno, key, value, why))
    return refusals


def _opt_name_refusals(seen: _PathValues) -> list[str]:
    """A closed log's ``opt_name`` values for which its benchmark's closed rules have no rule file."""
    refusals = []
    for bench in sorted(b for b in seen.benchmarks if b in BENCHMARKS) if "closed" in seen.divisions else ():
        choices = benchmark(bench).closed_opt_names  # () where the closed rules do not branch on opt_name
        for lineno, value in seen.opt_names if choices else ():
            if value not in choices and name_problem(value) is None:
                why = (
                    f"is not one of {', '.join(map(repr, choices))}: in a closed {bench} log the official v2.0 "
                    f"rules open training_2.0.0/closed_{bench}_<value>.yaml, which exists for those only"
                )
                refusals.append(_refusal(lineno, "opt_name", value, why))
    return refusals


# --- system descriptions --------------------------------------------------------------------------
# Fields of systems/<system>.json that the official tools put in a path or link: package_checker compares
# division to 'closed'; result_summarizer writes .../{submitter}/systems/{file name}.json links, from which review
# reads the system back, and system_desc_checker .../{submitter}/systems/{system_name}.json (a link it prints,
# never a file it opens). They must be strings.
SYSTEM_NAME_FIELDS = ("submitter", "division", "system_name")
# Of those, the ones that must also be plain names (no '/', '..'). Not system_name: mlperf-logging 4.1.68 opens
# no path made from it (result_summarizer's link takes the description's file name; its _linkable_system_name is
# never called), and MLCommons published 'Lenovo ThinkSystem SD650-N V2 Server 80GB/500W A100' (v2.0).
SYSTEM_PATH_FIELDS = ("submitter", "division")


# A line break or tab inside a descriptive value (not a name) is kept: MLCommons published descriptions whose
# other_software_stack holds Python's two-line sys.version. The official tools put such values in the
# summarizer's CSV (quoted) and print none of them; an escape (ESC), a bidi override or a NUL is still refused.
_TEXT_BREAKS = "\n\r\t"


def screen_system(contents: Mapping[str, Any]) -> list[str]:
    """Why the official tools must not read this system description (``[]``: they may)."""
    refusals = []
    for name in SYSTEM_PATH_FIELDS:
        if isinstance(contents.get(name), str) and (problem := name_problem(contents[name])):
            refusals.append(f"field {name!r} is {shown(contents[name])}, which {problem}")
    for name, value in contents.items():
        if name in SYSTEM_PATH_FIELDS and isinstance(value, str):
            continue  # name_problem above covers its control characters
        if name == "system_name" and isinstance(value, str) and (bad := _first_control(value)):
            refusals.append(f"field 'system_name' holds the control character U+{ord(bad):04X}: {shown(value)}")
            continue
        bad = _first_control(name) if isinstance(name, str) else None
        bad = bad or next((c for s in _strings(value) if (c := _first_control(s, allowed=_TEXT_BREAKS))), None)
        if bad:
            refusals.append(f"field {shown(name)} holds the control character U+{ord(bad):04X}: {shown(value)}")
    return refusals
