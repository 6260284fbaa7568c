"""Reading MLLOG result files back (never evaluating anything in them): the one MLLOG line reader.

:func:`mllog_lines` reads a file's lines exactly as the official MLCommons tools read them (latin-1, universal
newlines, the JSON after a line's last ``:::MLLOG `` token) and marks a line that another reader would read
differently; every trainperf reader (:func:`read_mllog_lines` and :func:`parse_run` here, the gate and the
compliance wrapper in :mod:`trainperf.rules`) goes through it. Times are exact integers of milliseconds.
:func:`parse_run` reads one timed run, refusing a file that :mod:`trainperf.run_checks` finds impossible.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, NamedTuple

from trainperf import limits, published
from trainperf.errors import ResultsError
from trainperf.limits import OverLimit
from trainperf.run_checks import RECORD_FIX, TIMING_FIX, logged_ms, read_timing, record_problems

TOKEN = ":::MLLOG "
LIMIT_FIX = "is it the log of one MLPerf run? move it away, or redo the run"


# Where a suite keeps a run that was interrupted: <out>/interrupted/<system>/<benchmark>/result_<i>-<k>.txt (the k-th
# interruption of run i), beside <out>/results/. Such a log is not a result; the suite's summary and the report list it.
INTERRUPTED = "interrupted"
PICTURES = "pictures"  # <out>/pictures/<system>/<benchmark>/result_<i>.png: what a run's model drew
_INTERRUPTED_FILE = re.compile(r"^result_\d+-\d+\.txt$")


def interrupted_logs(folder: Path) -> list[Path]:
    """The logs of the interrupted runs kept aside in ``folder`` (``result_<i>-<k>.txt``, a plain file and not a
    link: what the suite writes there), by name; none when there is no such folder."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if _INTERRUPTED_FILE.match(p.name) and p.is_file() and not p.is_symlink())


class MllogLine(NamedTuple):
    """One line of a file that holds the MLLOG token, read as the official tools read it (a tuple: files have
    thousands of such lines, read several times by check and review)."""

    lineno: int  # the line's number, from 1, counting lines as the tools do (ended by \n, \r\n or \r)
    text: str  # the text after the line's last token, stripped: what the tools parse as JSON (latin-1 view)
    length: int  # the line's length in characters (one per byte), its line end included
    record: dict[str, Any] | None  # that JSON object (strings read as UTF-8); None when it is not one
    error: str = ""  # why ``record`` is None
    ambiguous: str = ""  # why another reading of the line would see other records ("" when none would)
    over_limit: str = ""  # which of trainperf's limits (:mod:`trainperf.limits`) the line breaks ("" when none)


def mllog_lines(data: bytes, *, max_line_chars: int | None = None) -> list[MllogLine]:
    """Every line of ``data`` that holds the MLLOG token, read as mlperf-logging's tools read a result file.

    The tools (``compliance_checker/mlp_parser/ruleset_*.py`` ``parse_file``, ``rcp_checker.py``
    ``read_submission_file``; the result summarizer and the seed checker call the former) open the file with
    ``open(f, encoding='latin-1')``: text mode with universal newlines, so a line ends at ``\n``, ``\r\n`` or
    ``\r`` and nowhere else; they skip lines without ``:::MLLOG ``, keep ``re.sub(".*" + TOKEN, TOKEN, line)``
    (the greedy ``.*`` runs to the line's last token), ``.strip()`` it and ``json.loads`` what follows the
    token, a line that is not JSON being a parse error. Here the same text is parsed, once found in linear time
    (their expression takes quadratic time), and its strings are read as UTF-8, as loggers write them (latin-1
    and UTF-8 differ only in non-ASCII characters, which JSON allows inside strings only).

    ``time_ms`` is kept exact: json gives an int for an integer literal; a float literal is read again as the
    decimal it is written as, and becomes an int when it is a whole number (``1.65e12``), else stays that
    :class:`~decimal.Decimal` (:func:`timing_problems` refuses it).

    Within trainperf's limits (:mod:`trainperf.limits`): a line longer than ``max_line_chars`` is not parsed
    (``record`` None, ``over_limit`` says why), nor one holding a number over ``MAX_NUMBER_CHARS`` characters; a
    file of more than ``MAX_MLLOG_LINES`` MLLOG lines, ``MAX_EVALUATIONS`` evaluations or a reading cost for the
    official tools (the sum of the squared payload lengths) over ``MAX_LINE_COST`` raises
    :class:`~trainperf.limits.OverLimit` as soon as it is found, so memory and time stay bounded. A line that
    another reader would read differently is marked (``ambiguous``, see :func:`_ambiguity`);
    :func:`read_mllog_lines` refuses its file, the gate refuses it.
    """
    max_line_chars = limits.MAX_LINE_CHARS if max_line_chars is None else max_line_chars
    max_lines, max_evaluations, max_cost = limits.MAX_MLLOG_LINES, limits.MAX_EVALUATIONS, limits.MAX_LINE_COST
    other_ends = any(end in data for end in _OTHER_LINE_ENDS)
    long_digits = limits.has_long_digit_run(data)
    found = []
    evaluations = cost = 0
    for lineno, line in enumerate(io.TextIOWrapper(io.BytesIO(data), encoding="latin-1"), start=1):
        last = line.rfind(TOKEN)
        if last < 0:
            continue
        if len(found) >= max_lines:
            raise OverLimit(f"holds more than {max_lines:,} MLLOG lines (line {lineno} is one too many)")
        if len(line) > max_line_chars:
            why = f"an MLLOG line of {len(line)} characters, over the {max_line_chars} allowed"
            found.append(MllogLine(lineno, "", len(line), None, why, over_limit=why))
            continue
        # (TOKEN + rest).strip() without its token: the rest, stripped at its end ("" when it is all white space)
        text = line[last + len(TOKEN) :].rstrip()
        cost += len(text) ** 2
        if cost > max_cost:
            raise OverLimit(
                f"holds MLLOG lines whose squared lengths add up to over {max_cost:,} by line {lineno}: the "
                "official tools read a line in a time that grows with the square of its length, and this many "
                "long lines would cost them minutes (the largest of the published result files, v1.1 to v2.1, is "
                "1,474,871,419)"
            )
        if long_digits and limits.has_long_digit_run(text):
            try:
                limits.loads(_utf8(text))
            except OverLimit as e:
                found.append(MllogLine(lineno, text, len(line), None, str(e), over_limit=str(e)))
                continue
            except (ValueError, RecursionError):
                pass
        record, error = _parse(text)
        if (deep := _too_deep(text, record, error)) is not None:  # the tools would stop with a RecursionError
            found.append(MllogLine(lineno, text, len(line), None, deep, over_limit=deep))
            continue
        if record is not None and type(record.get("time_ms")) is float:
            record["time_ms"] = _exact_time(text)
        if record is not None and record.get("key") == "eval_accuracy":
            evaluations += 1
            if evaluations > max_evaluations:
                raise OverLimit(
                    f"holds more than {max_evaluations:,} eval_accuracy lines (line {lineno} is one too many)"
                )
        plain = line.isascii() and not other_ends and line.find(TOKEN) == last  # nothing to read otherwise
        ambiguous = "" if plain else _ambiguity(line, last, record, other_ends)
        found.append(MllogLine(lineno, text, len(line), record, error, ambiguous))
    return found


# The characters other than \n and \r at which str.splitlines ends a line and the tools do not, in the UTF-8 bytes
# a logger writes: \x0b, \x0c, \x1c-\x1e, U+0085, U+2028 and U+2029.
_OTHER_LINE_ENDS = (b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", b"\xc2\x85", b"\xe2\x80\xa8", b"\xe2\x80\xa9")
_INT_DIGITS = 30  # a float time_ms literal of more digits stays a Decimal (refused as implausible), never a huge int


def _utf8(text: str) -> str:
    """The latin-1 view of some bytes (one character per byte) read as the UTF-8 they are."""
    return text if text.isascii() else text.encode("latin-1").decode("utf-8", errors="replace")


def _too_deep(text: str, record: dict[str, Any] | None, error: str) -> str | None:
    """Why a payload nests arrays and objects over :data:`trainperf.limits.MAX_JSON_DEPTH` (None: it does not), in a
    value as much as anywhere: past about 1,000 levels the official tools' ``json.loads`` raises RecursionError,
    which none of them catches. Only a payload with that many brackets is walked."""
    if error == _NESTED:
        return f"nests arrays and objects more than {limits.MAX_JSON_DEPTH} deep"
    if record is None or text.count("[") + text.count("{") <= limits.MAX_JSON_DEPTH:
        return None
    return limits.depth_problem(record)


_NESTED = "nested too deeply"


def _parse(text: str) -> tuple[dict[str, Any] | None, str]:
    """(the JSON object of a line's payload, or None, and why not), its strings read as UTF-8."""
    if not text:
        return None, "no JSON after the token"
    try:
        record = json.loads(_utf8(text))
    except ValueError as e:  # JSONDecodeError is a ValueError: the tools report the line as a parse error
        return None, str(e)
    except RecursionError:
        return None, _NESTED
    if not isinstance(record, dict):
        return None, "the record is not a JSON object"
    return record, ""


def _exact_time(text: str) -> int | Decimal | float:
    """A float ``time_ms`` literal read exactly: an int when it is a whole number of milliseconds, else its decimal."""
    t = json.loads(_utf8(text), parse_float=Decimal).get("time_ms")
    if isinstance(t, Decimal) and t.is_finite() and t == t.to_integral_value() and t.adjusted() < _INT_DIGITS:
        return int(t)
    return t  # a Decimal that is not a whole number or is far out of range, or a NaN or Infinity float


def _ambiguity(line: str, last: int, record: dict[str, Any] | None, other_ends: bool) -> str:
    """Why a reader other than the tools' would read other records from ``line`` ("" when none would).

    - The token twice: the tools read after the last one, a reader that takes the first reads other text.
    - A character at which ``str.splitlines`` ends a line and the tools do not (``\x0b``, ``\x0c``,
      ``\x1c``-``\x1e``, U+0085, U+2028, U+2029), where the pieces it makes hold other records than the line.
    - Bytes outside ASCII that decide whether the line is a record, read as latin-1 (the tools) or as UTF-8:
      white space such as U+00A0 at the end, which ``strip`` removes in one reading and not in the other.
    """
    if line.find(TOKEN) != last:
        return (
            f"holds the MLLOG token {TOKEN.strip()!r} {line.count(TOKEN)} times: the official tools read only the "
            "text after the last one, and a reader that takes the first reads another record; put each record on a "
            "line of its own (were the outputs of two processes interleaved?)"
        )
    beyond_ascii = not line[last:].isascii()
    if not beyond_ascii and not other_ends:
        return ""
    raw = line.encode("latin-1")
    as_utf8 = raw.decode("utf-8", errors="replace")
    ends = [end for end in _OTHER_LINE_ENDS if end in raw] if other_ends else []
    if ends:
        whole, pieces = _records_of([as_utf8]), _records_of(as_utf8.splitlines())
        if whole != pieces:
            first = min(ends, key=raw.index).decode("utf-8")
            return (
                f"holds the character U+{ord(first):04X}, which the official tools read as part of "
                f"the line and Python's str.splitlines as a line end: the line holds {len(whole)} record(s) for the "
                f"tools and {len(pieces)} for a reader that splits it there; remove the character, and end each "
                "record with a newline"
            )
    if beyond_ascii and bool(_records_of([as_utf8])) != (record is not None):
        return (
            "holds bytes outside ASCII that decide whether it is a record: the official tools, reading the file as "
            f"latin-1, read {'a record' if record is not None else 'none'} there, and a reader of UTF-8 "
            f"{'none' if record is not None else 'a record'}; remove the white space (such as U+00A0) or other "
            "bytes outside ASCII after the record's closing brace"
        )
    return ""


def _records_of(pieces: Iterable[str]) -> list[str]:
    """The payload of each piece of text that the tools' rule reads as a record (a JSON object), to compare readings."""
    found = []
    for piece in pieces:
        last = piece.rfind(TOKEN)
        text = piece[last + len(TOKEN) :].rstrip() if last >= 0 else ""
        if not text:
            continue
        try:
            record = json.loads(text)
        except (ValueError, RecursionError):
            continue
        if isinstance(record, dict):
            found.append(text)
    return found


def read_mllog_lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` of the file's MLLOG records, in order (line numbers count from 1), read as the
    official tools read them (:func:`mllog_lines`); lines that are not a JSON object with a ``key`` are skipped.
    A :class:`ResultsError` names the first line that another reader would read differently, and a file over one of
    the limits of :mod:`trainperf.limits` (its size before it is read, then its lines, evaluations and numbers)."""
    try:
        data = limits.read_capped(path.resolve(), limits.MAX_RESULT_BYTES)
        lines = mllog_lines(data)
    except OverLimit as e:
        raise ResultsError(f"{path} {e}: refused (MLPerf result files are far within that); {LIMIT_FIX}") from None
    except ValueError as e:
        raise ResultsError(f"{path} {e}: not read as a result file") from None
    except OSError as e:
        raise ResultsError(f"cannot read result file {path}: {e.strerror}") from None
    records = []
    for line in lines:
        if line.over_limit:
            raise ResultsError(f"{path}: line {line.lineno} {_as_clause(line.over_limit)}; {LIMIT_FIX}")
        if line.ambiguous:
            raise ResultsError(f"{path}: not read, as line {line.lineno} {line.ambiguous}")
        if line.record is not None and "key" in line.record:
            records.append((line.lineno, line.record))
    return records


def _as_clause(why: str) -> str:
    """``over_limit`` text as the end of a sentence about a line ("is an MLLOG line of ...", "holds a number ...")."""
    return why if why.startswith(("holds", "nests")) else f"is {why}"


def read_mllog(path: Path) -> list[dict[str, Any]]:
    """The MLLOG records of a file, in order; lines that are not MLLOG JSON are skipped."""
    return [rec for _, rec in read_mllog_lines(path)]


def first_values(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Each key's first logged value (events such as ``seed`` or ``trainperf_code`` are logged once)."""
    first: dict[str, Any] = {}
    for rec in records:
        key = rec.get("key")
        if isinstance(key, str) and key not in first:
            first[key] = rec.get("value")
    return first


@dataclass(frozen=True, kw_only=True)
class LoggedRun:
    path: Path
    benchmark: str | None
    platform: str | None
    scale: str
    seed: int | None
    status: str | None  # None when the log has no run_stop
    minutes: float | None
    curve: list[tuple[float, float, float]]  # (minutes since run_start, progress as logged in epoch_num, quality)
    start_ms: int | None = None  # run_start's time_ms; None when the log has no run_start
    evaluations: list[Any] = field(default_factory=list)  # eval_accuracy values as logged: numbers or objects
    abort_reason: str | None = None  # trainperf_abort_reason: why a run that did not finish ended
    lines: tuple[tuple[int, dict[str, Any]], ...] = ()  # (line number, record) of every MLLOG record, as read
    evaluation_lines: tuple[int, ...] = ()  # the line number of each of ``evaluations``
    accepted: tuple[str, ...] = ()  # timeline findings accepted in a file MLCommons published (trainperf.published)

    @property
    def success(self) -> bool:
        return self.status == "success"


def parse_run(path: Path, *, evaluated_after_stop: Container[str] = frozenset()) -> LoggedRun:
    """The run logged in ``path``; a :class:`ResultsError` naming the line when a record cannot be read
    (:func:`record_problems`) or the timing is impossible (:func:`read_timing`, the timeline rule among them). A log
    whose ``submission_benchmark`` is in ``evaluated_after_stop`` (``registry.evaluated_after_run_stop()``) may log
    evaluations after ``run_stop``. Evaluations the timeline rule reads but does not count (untimed ones during
    initialization, evaluations after ``run_stop`` of no checkpoint saved within the run) are not in ``evaluations``
    nor in ``curve``."""
    lines = read_mllog_lines(path)
    logged = next((rec.get("value") for _, rec in lines if rec.get("key") == "submission_benchmark"), None)
    timing, uncounted = read_timing(lines, after_stop=isinstance(logged, str) and logged in evaluated_after_stop)
    accepted: list[str] = []
    if timing:  # a result file MLCommons published as it is (trainperf.published)
        timing, accepted = published.accepted(timing, path.read_bytes())
    for problems, fix in ((record_problems(lines), RECORD_FIX), (timing, TIMING_FIX)):
        if problems:
            more = f" (and {len(problems) - 1} more such problem(s))" if len(problems) > 1 else ""
            raise ResultsError(f"{path}: {problems[0]}{more}; {fix}")
    records = [rec for _, rec in lines]
    first: dict[str, Any] = {}
    for rec in records:
        first.setdefault(rec["key"], rec)
    start = first.get("run_start")
    stop = first.get("run_stop")
    t0 = logged_ms(start) if start else None  # exact ints (timing_problems found no problem with them)
    t1 = logged_ms(stop) if stop else None
    minutes = None
    if t0 is not None and t1 is not None:
        minutes = (t1 - t0) / 60000  # whole milliseconds subtracted exactly, divided once
    curve = []
    evaluations = []
    evaluation_lines = []
    for n, rec in lines:
        if rec["key"] != "eval_accuracy" or n in uncounted:  # untimed, or of no checkpoint of the run
            continue
        evaluations.append(rec.get("value"))
        evaluation_lines.append(n)
        if t0 is not None:
            meta = rec.get("metadata") or {}
            value = rec["value"]
            if isinstance(value, dict):  # a multi-field metric: its first field is the headline
                value = next(iter(value.values()), float("nan"))
            curve.append(((logged_ms(rec) - t0) / 60000, float(meta.get("epoch_num", 0)), float(value)))
    status = ((stop or {}).get("metadata") or {}).get("status")
    reason = (first.get("trainperf_abort_reason") or {}).get("value")
    return LoggedRun(
        path=path,
        benchmark=(first.get("submission_benchmark") or {}).get("value"),
        platform=(first.get("submission_platform") or {}).get("value"),
        scale=(first.get("trainperf_scale") or {}).get("value", "reference"),
        seed=(first.get("seed") or {}).get("value"),
        status=status,
        minutes=minutes,
        curve=curve,
        start_ms=t0,
        evaluations=evaluations,
        abort_reason=reason if isinstance(reason, str) else None,
        lines=tuple(lines),
        evaluation_lines=tuple(evaluation_lines),
        accepted=tuple(accepted),
    )
