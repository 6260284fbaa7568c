"""Reading MLLOG result files back (never evaluating anything in them): the one MLLOG line reader.

:func:`mllog_lines` reads a file's lines exactly as the official MLCommons tools read them (latin-1, universal
newlines, the JSON after a line's last ``:::MLLOG `` token) and marks a line that another reader would read
differently; every trainperf reader (:func:`read_mllog_lines` and :func:`parse_run` here, the gate and the
compliance wrapper in :mod:`trainperf.rules`) goes through it. Times are exact integers of milliseconds.

A result file holds one timed run: its result is ``run_stop - run_start``, and every evaluation is on
the clock, between the two. :func:`timing_problems` finds what breaks that (a time that is not a whole
number of milliseconds between 2000 and 2100, ``run_start`` or ``run_stop`` logged twice, ``run_stop``
before ``run_start`` or more than a week after it, an ``eval_accuracy`` line outside the run);
:func:`record_problems` finds records of the wrong shape for what the reader takes from them (``run_stop``
metadata that is not an object, an ``eval_accuracy`` value that is not a number). :func:`parse_run` refuses
such a file with a :class:`~trainperf.errors.ResultsError` naming the file and the line, and the compliance
check (:mod:`trainperf.rules.compliance`) lists the timing problems as rule violations.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, NamedTuple

from trainperf import limits
from trainperf.errors import ResultsError
from trainperf.limits import OverLimit

TOKEN = ":::MLLOG "
TIMING_FIX = (
    "a result file holds one whole run, with run_start <= every eval_accuracy <= run_stop; the file is damaged "
    "or was edited: restore it, or move it away and redo the run"
)
LIMIT_FIX = "is it the log of one MLPerf run? move it away, or redo the run"
RECORD_FIX = "the file is damaged, or was not written by an MLPerf logger: restore it, or move it away and redo the run"
# A plausible time_ms, in milliseconds since 1970-01-01 (UTC): MLPerf Training began in 2018, so a clock before 2000 or
# after 2100 is a wrong clock or an edited log.
EARLIEST_MS = 946_684_800_000  # 2000-01-01T00:00:00Z
LATEST_MS = 4_102_444_800_000  # 2100-01-01T00:00:00Z
# The longest run_stop - run_start read as a result. The v2.0 rules (training_rules.adoc) bound the untimed
# initialization (30 minutes closed, 4 hours open) but not the timed run; a week is far above any real run: the
# slowest score MLCommons published from v0.6 to v5.1 is 1,197 minutes (20 hours; shared/data/
# mlperf_training_results.csv), the longest of the 2,760 published v2.0 result files ran 10.1 hours (an H3C
# minigo run), and trainperf's own runaway guard stops a reference run after 24 hours (each reference spec's
# max_minutes).
MAX_RUN_MS = 7 * 86_400_000
MAX_RUN_WHY = "the slowest score MLCommons has published, v0.6 to v5.1, is 20 hours"
ONCE = ("run_start", "run_stop")  # a run has exactly one of each: its result is run_stop - run_start
_LINES_SHOWN = 5  # line numbers listed in one message
_STRING_VALUES = ("submission_benchmark", "submission_platform", "trainperf_scale")  # read from their first line


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
                f"long lines would cost them minutes (the largest of the published v1.1 result files is 290,000,000)"
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


def _parse(text: str) -> tuple[dict[str, Any] | None, str]:
    """(the JSON object of a line's payload, or None, and why not), its strings read as UTF-8."""
    if not text:
        return None, "no JSON after the token"
    try:
        record = json.loads(_utf8(text))
    except ValueError as e:  # JSONDecodeError is a ValueError: the tools report the line as a parse error
        return None, str(e)
    except RecursionError:
        return None, "nested too deeply"
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
    return why if why.startswith("holds") else f"is {why}"


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


def logged_ms(rec: Mapping[str, Any]) -> int | None:
    """The record's ``time_ms`` as an exact int, or None when it is not a plausible time (:func:`time_problem`)."""
    t = rec.get("time_ms")
    return int(t) if time_problem(t) is None else None


def _finite(t: int | float | Decimal) -> bool:
    if isinstance(t, Decimal):
        return t.is_finite()
    return not isinstance(t, float) or math.isfinite(t)  # an int is finite, however large (math would overflow)


def _whole(t: int | float | Decimal) -> bool:
    if isinstance(t, Decimal):
        return t == t.to_integral_value()
    return not isinstance(t, float) or t.is_integer()


def time_problem(t: Any) -> str | None:
    """Why ``t`` is not the ``time_ms`` of an event of a run (None: it is), as the end of a sentence.

    A time is a whole number of milliseconds since 1970 (UTC) from :data:`EARLIEST_MS` to :data:`LATEST_MS`.
    Compared exactly: an int is never turned into a float, whose 53 bits would lose the milliseconds of a
    time shifted far into the future (10^22 + t and 10^22 + t' are the same float).
    """
    if isinstance(t, bool) or not isinstance(t, int | float | Decimal) or not _finite(t):
        return f"has time_ms {_shown(t)}, not a finite number"
    if not _whole(t):
        return f"has time_ms {_number(t)}, not a whole number of milliseconds (MLPerf loggers write integers)"
    if EARLIEST_MS <= t <= LATEST_MS:
        return None
    when = "before 2000-01-01" if t < EARLIEST_MS else "after 2100-01-01"
    try:
        as_float = float(t)
    except OverflowError:
        as_float = math.inf
    lost = ""
    if not math.isfinite(as_float):
        lost = "; the official tools, which read it as a float, would read infinity"
    elif not isinstance(t, float) and Decimal(as_float) != t:
        lost = "; the official tools, which read it as a float, would also lose its last digits"
    return (
        f"has time_ms {_number(t)}, {when} (milliseconds since 1970: {EARLIEST_MS} to {LATEST_MS}): "
        f"not a plausible time{lost}"
    )


def _number(t: int | float | Decimal, limit: int = 40) -> str:
    """A time_ms as written in logs (a whole number without an exponent), cut short."""
    if isinstance(t, Decimal | float) and _whole(t) and abs(t) < 10**limit:
        t = int(t)
    text = str(t)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} digits)"


def _shown(x: Any, limit: int = 80) -> str:
    """A logged value as it appears in a message: its repr, cut short (a log can hold anything)."""
    text = repr(x)
    return text if len(text) <= limit else text[: limit - 4] + " ..."


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def timing_problems(lines: Iterable[tuple[int, Mapping[str, Any]]], *, after_stop: bool = False) -> list[str]:
    """What makes the run's duration or an evaluation impossible, one sentence each naming its log line.

    Checked: ``run_start`` and ``run_stop`` are logged at most once each (the official checker only warns
    about a copy with the same value); the first ``run_start`` and ``run_stop`` and every
    ``eval_accuracy`` have a plausible ``time_ms`` (:func:`time_problem`: a whole number of milliseconds
    between 2000 and 2100); ``run_stop`` is not before ``run_start`` (a negative duration) nor more than
    :data:`MAX_RUN_MS` after it; no ``eval_accuracy`` is timed before ``run_start`` or after ``run_stop`` (evaluation is
    on the clock, inside the run), unless ``after_stop``: the benchmark's reference evaluates its models
    once training is over (minigo), so evaluations after ``run_stop`` are part of its log; nor after the
    ``run_stop`` of a run that did not end with status ``success``.
    """
    lines = list(lines)
    problems: list[str] = []
    for key in ONCE:
        found = [str(n) for n, rec in lines if rec.get("key") == key]
        if len(found) > 1:
            where = (
                f"{', '.join(found[:-1])} and {found[-1]}"
                if len(found) <= _LINES_SHOWN
                else f"{found[0]}, {found[1]}, ..."
            )
            problems.append(
                f"{key} is logged {len(found)} times (lines {where}): a run has exactly one run_start and one "
                "run_stop, and its result is the time between them"
            )
    bounds: dict[str, tuple[int, int]] = {}
    for key in ONCE:
        found = next(((n, rec) for n, rec in lines if rec.get("key") == key), None)
        if found is None:
            continue
        if (problem := time_problem(found[1].get("time_ms"))) is not None:
            problems.append(f"{key} at line {found[0]} {problem}")
        else:
            bounds[key] = (found[0], logged_ms(found[1]))
    start, stop = bounds.get("run_start"), bounds.get("run_stop")
    # An evaluation after the run_stop of a run that did not succeed buys nothing (the run is not a result):
    # NVIDIA's published v2.0 rnnt logs of a diverged run evaluate once more after run_stop 'aborted'.
    stop_record = next((rec for _, rec in lines if rec.get("key") == "run_stop"), None)
    stop_meta = stop_record.get("metadata") if stop_record is not None else None
    stop_status = stop_meta.get("status") if isinstance(stop_meta, Mapping) else None
    if start and stop and stop[1] < start[1]:
        problems.append(
            f"run_stop at line {stop[0]} (time_ms {stop[1]}) is before run_start at line {start[0]} "
            f"(time_ms {start[1]}): a negative duration of {(stop[1] - start[1]) / 60000:.4g} minutes"
        )
        stop = None  # one problem, not one more for each evaluation after this run_stop
    elif start and stop and stop[1] - start[1] > MAX_RUN_MS:
        problems.append(
            f"run_stop at line {stop[0]} (time_ms {stop[1]}) is {(stop[1] - start[1]) / 86_400_000:.4g} days after "
            f"run_start at line {start[0]} (time_ms {start[1]}), over the {MAX_RUN_MS // 86_400_000} days "
            f"({MAX_RUN_MS} ms) a run may take here ({MAX_RUN_WHY})"
        )
    # A line after run_stop that repeats an evaluation timed within the run (its value and epoch) is a copy, not an
    # evaluation off the clock: NVIDIA's published v1.1 HugeCTR dlrm logs repeat their last one 1 ms after run_stop.
    timed = {_evaluation(rec) for _, rec in lines if rec.get("key") == "eval_accuracy" and _within(rec, start, stop)}
    for n, rec in lines:
        if rec.get("key") != "eval_accuracy":
            continue
        t = logged_ms(rec)
        if t is not None and stop and t > stop[1] and _evaluation(rec) in timed:
            continue
        if t is None:
            problems.append(f"eval_accuracy at line {n} {time_problem(rec.get('time_ms'))}")
        elif start and t < start[1]:
            problems.append(
                f"eval_accuracy at line {n} (time_ms {t}) is before run_start at line {start[0]} "
                f"(time_ms {start[1]}): an evaluation outside the timed run"
            )
        elif stop and t > stop[1] and not after_stop and stop_status == "success":
            problems.append(
                f"eval_accuracy at line {n} (time_ms {t}) is after run_stop at line {stop[0]} "
                f"(time_ms {stop[1]}): an evaluation outside the timed run"
            )
    return problems


def _evaluation(rec: Mapping[str, Any]) -> str:
    """An eval_accuracy record's value and epoch, as text (to tell a repeated line from a new evaluation)."""
    meta = rec.get("metadata")
    epoch = meta.get("epoch_num") if isinstance(meta, Mapping) else None
    return json.dumps([rec.get("value"), epoch], sort_keys=True, default=str)


def _within(rec: Mapping[str, Any], start: tuple[int, int] | None, stop: tuple[int, int] | None) -> bool:
    """True when the record is timed within the run: not before run_start, not after run_stop."""
    t = logged_ms(rec)
    return t is not None and start is not None and stop is not None and start[1] <= t <= stop[1]


def record_problems(lines: Iterable[tuple[int, Mapping[str, Any]]]) -> list[str]:
    """Records that :func:`parse_run` cannot read, one sentence each naming the log line and the field.

    Checked: every ``key`` is a string; the first ``submission_benchmark``, ``submission_platform`` and
    ``trainperf_scale`` values are strings; the first ``run_stop``'s metadata is an object with a
    string ``status``; every ``eval_accuracy`` has metadata that is an object (or none), an
    ``epoch_num`` that is a number, and a value that is a number or an object of numbers (a
    multi-field metric).
    """
    problems: list[str] = []
    seen: set[str] = set()
    for n, rec in lines:
        key = rec.get("key")
        if not isinstance(key, str):
            problems.append(f"the record at line {n} has key {_shown(key)}, not a string")
            continue
        first = key not in seen
        seen.add(key)
        value, meta = rec.get("value"), rec.get("metadata")
        if first and key in _STRING_VALUES and not isinstance(value, str):
            problems.append(f"{key} at line {n} has value {_shown(value)}; it must be a string")
        if key == "run_stop" and first:
            if not isinstance(meta, dict):
                problems.append(
                    f"run_stop at line {n} has metadata {_shown(meta)}; it must be an object such as "
                    '{"status": "success"}'
                )
            elif not isinstance(meta.get("status"), str):
                problems.append(
                    f"run_stop at line {n} has status {_shown(meta.get('status'))} in its metadata; "
                    "it must be a string, 'success' or 'aborted'"
                )
        if key != "eval_accuracy":
            continue
        if meta is not None and not isinstance(meta, dict):
            problems.append(
                f"eval_accuracy at line {n} has metadata {_shown(meta)}; "
                'it must be an object such as {"epoch_num": 1}'
            )
        elif isinstance(meta, dict) and "epoch_num" in meta and not _is_number(meta["epoch_num"]):
            problems.append(f"eval_accuracy at line {n} has epoch_num {_shown(meta['epoch_num'])}; it must be a number")
        if isinstance(value, dict):
            if not value or not all(_is_number(v) for v in value.values()):
                problems.append(
                    f"eval_accuracy at line {n} has value {_shown(value)}; "
                    'a multi-field metric is an object of numbers, such as {"BBOX": 0.38, "SEGM": 0.34}'
                )
        elif not _is_number(value):
            problems.append(f"eval_accuracy at line {n} has value {_shown(value)}; it must be a number (the quality)")
    return problems


def quality_numbers(value: Any) -> list[float]:
    """The numbers of an ``eval_accuracy`` value: the number itself, or each field of a multi-field metric."""
    if isinstance(value, dict):
        return [x for v in value.values() for x in quality_numbers(v)]
    return [float(value)] if _is_number(value) else []


def impossible_quality(value: Any, *, higher_is_better: bool | None) -> float | None:
    """The first number of an ``eval_accuracy`` value that no metric of MLPerf can take (None: none): not finite
    (NaN, or 1e400 read as infinity), below 0, or above 1 for a metric where higher is better (an accuracy, a mAP,
    an AUC, a Dice score: fractions from 0 to 1). ``higher_is_better`` None: the metric is unknown, 1 is no bound.
    ``review`` and ``report`` refuse such a value the same way; ``check``'s rules hold the same range."""
    for x in quality_numbers(value):
        if not math.isfinite(x) or x < 0 or (x > 1 and higher_is_better):
            return x
    return None


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

    @property
    def success(self) -> bool:
        return self.status == "success"


def parse_run(path: Path, *, evaluated_after_stop: Container[str] = frozenset()) -> LoggedRun:
    """The run logged in ``path``; a :class:`ResultsError` naming the line when a record cannot be read
    (:func:`record_problems`) or the timing is impossible (:func:`timing_problems`). A log whose
    ``submission_benchmark`` is in ``evaluated_after_stop`` (``registry.evaluated_after_run_stop()``) may log
    evaluations after ``run_stop``."""
    lines = read_mllog_lines(path)
    logged = next((rec.get("value") for _, rec in lines if rec.get("key") == "submission_benchmark"), None)
    timing = timing_problems(lines, after_stop=isinstance(logged, str) and logged in evaluated_after_stop)
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
        if rec["key"] != "eval_accuracy":
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
    )
