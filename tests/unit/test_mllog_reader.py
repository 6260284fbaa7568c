"""One MLLOG reader, the official tools' own, and exact times.

The official tools (mlperf-logging's ``compliance_checker/mlp_parser/ruleset_*.py``, used by the checker, the result
summarizer and the seed checker, and ``rcp_checker.py``) open a result file as latin-1 text with universal newlines,
read each line after its last ``:::MLLOG `` token, strip it and parse it with ``json.loads``; the time is
``float(time_ms)``. trainperf reads the same lines (:func:`trainperf.results.mllog_lines`), keeps times as exact
integers, refuses a time that is not plausible, and refuses a file that another reader would read differently.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from untrusted import MLLOG, T0, log_lines

from trainperf.errors import ResultsError
from trainperf.results import TOKEN, mllog_lines, parse_run, read_mllog_lines
from trainperf.rules import compliance, gate
from trainperf.run_checks import EARLIEST_MS, LATEST_MS, MAX_RUN_MS

mlp_parser = pytest.importorskip("mlperf_logging.compliance_checker.mlp_parser")

YEAR_3000_MS = 32_503_680_000_000  # 3000-01-01T00:00:00Z
START_LINE, STOP_LINE = 23, 38  # run_start's and run_stop's lines in untrusted.log_lines()


def records() -> list:
    return [json.loads(ln[len(MLLOG) :]) if ln.startswith(MLLOG) else ln for ln in log_lines()]


def write(path: Path, recs: list) -> Path:
    path.write_text("\n".join(MLLOG + json.dumps(r) if isinstance(r, dict) else r for r in recs) + "\n")
    return path


def shifted(path: Path, offset: int, keys: tuple[str, ...] | None = None) -> Path:
    """A clean log with ``offset`` ms added to every time (or to those of ``keys``)."""
    recs = records()
    for r in recs:
        if isinstance(r, dict) and (keys is None or r["key"] in keys):
            r["time_ms"] += offset
    return write(path, recs)


def check_problems(path: Path) -> list[str]:
    return compliance.check_log(path).problems


def timing(problems: list[str]) -> list[str]:
    return [p for p in problems if p.startswith(compliance.TIMING_PROBLEM)]


def review_problems(path: Path) -> list[str]:
    from trainperf.submission.review import _Bench, _read_run

    bench = _Bench(system="box", benchmark="resnet")
    run = _read_run(path, bench, SimpleNamespace(relative=lambda text: text))
    assert run.logged is None  # not scored: it counts as a failed run
    return bench.problems


def resume(path: Path) -> None:
    from trainperf.harness.suite import _resume_run

    _resume_run(path, "box", "mini", "resnet", {})


# --- exact times ---------------------------------------------------------------------------------------------
def test_times_shifted_by_10_22_ms_are_refused_by_parse_run_check_review_report_and_resume(tmp_path):
    """10^22 + t is beyond 2^53: as floats (the official tools' float(time_ms)) run_start and run_stop become one
    number, a run of 0 minutes. trainperf keeps the integers and refuses the times, naming the line."""
    clean = parse_run(write(tmp_path / "clean.txt", records()))
    assert clean.minutes == 1500 / 60000  # run_start at T0 + 2100, run_stop at T0 + 3600: exact
    assert float(10**22 + T0 + 2100) == float(10**22 + T0 + 3600)  # why the official tools score it 0.0

    log = shifted(tmp_path / "result_0.txt", 10**22)
    said = f"run_start at line {START_LINE} has time_ms {10**22 + T0 + 2100}, after 2100-01-01"
    with pytest.raises(ResultsError, match=said) as err:
        parse_run(log)
    assert "not a plausible time; the official tools, which read it as a float, would also lose" in str(err.value)
    assert any(said in p for p in timing(check_problems(log)))
    (problem,) = review_problems(log)
    assert said in problem
    with pytest.raises(ResultsError, match=f"cannot resume from a finished run: .*{said}"):
        resume(log)

    from trainperf.report.collect import collect

    (tmp_path / "out" / "systems").mkdir(parents=True)
    (tmp_path / "out" / "systems" / "box.json").write_text('{"number_of_nodes": "1", "accelerators_per_node": "0"}')
    results = tmp_path / "out" / "results" / "box" / "resnet"
    results.mkdir(parents=True)
    log.rename(results / "result_0.txt")
    with pytest.raises(ResultsError, match=said):
        collect([tmp_path / "out"])


def test_a_run_in_the_year_3000_or_before_2000_is_refused(tmp_path):
    later = shifted(tmp_path / "later.txt", YEAR_3000_MS - T0)
    with pytest.raises(ResultsError, match=f"run_start at line {START_LINE} has time_ms 32503680002100, after 2100"):
        parse_run(later)
    stop_only = shifted(tmp_path / "stop.txt", YEAR_3000_MS - T0, keys=("run_stop",))
    with pytest.raises(ResultsError, match=f"run_stop at line {STOP_LINE} has time_ms 32503680003600, after 2100"):
        parse_run(stop_only)
    assert timing(check_problems(stop_only))
    (problem,) = review_problems(stop_only)
    assert "after 2100-01-01" in problem
    earlier = shifted(tmp_path / "earlier.txt", -T0)  # the times of 1970
    with pytest.raises(ResultsError, match=f"run_start at line {START_LINE} has time_ms 2100, before 2000-01-01"):
        parse_run(earlier)
    for edge in (EARLIEST_MS, LATEST_MS - 10_000):  # the bounds themselves are plausible
        assert parse_run(shifted(tmp_path / "edge.txt", edge - T0)).minutes == 0.025


def test_a_run_longer_than_a_week_is_refused(tmp_path):
    week = shifted(tmp_path / "week.txt", MAX_RUN_MS - 1500, keys=("run_stop",))
    assert parse_run(week).minutes == 7 * 24 * 60  # a week exactly: the longest allowed
    longer = shifted(tmp_path / "longer.txt", MAX_RUN_MS - 1499, keys=("run_stop",))
    said = (
        f"run_stop at line {STOP_LINE} (time_ms {T0 + 2100 + MAX_RUN_MS + 1}) is 7 days after run_start at line "
        f"{START_LINE} (time_ms {T0 + 2100}), over the 7 days (604800000 ms) a run may take here"
    )
    with pytest.raises(ResultsError, match=re.escape(said)):
        parse_run(longer)
    assert any(said in p for p in timing(check_problems(longer)))


@pytest.mark.parametrize(
    "literal, words",
    [
        ("1650000003600.5", "has time_ms 1650000003600.5, not a whole number of milliseconds"),
        # a float reads this literal as exactly 1650000003600.0: only the written decimal shows it is not whole
        ("1650000003600.00001", "has time_ms 1650000003600.00001, not a whole number of milliseconds"),
        ("1.65e22", "has time_ms 16500000000000000000000, after 2100-01-01"),
        (
            "1e400",
            "has time_ms 1E+400, after 2100-01-01 (milliseconds since 1970: 946684800000 to 4102444800000): not "
            "a plausible time; the official tools, which read it as a float, would read infinity",
        ),
        ("NaN", "has time_ms nan, not a finite number"),
    ],
)
def test_a_float_time_literal_is_read_as_written(tmp_path, literal, words):
    assert float("1650000003600.00001") == 1650000003600
    log = write(tmp_path / "log.txt", records())
    text = log.read_text().replace('"time_ms": 1650000003600', f'"time_ms": {literal}')
    log.write_text(text)
    with pytest.raises(ResultsError, match=re.escape(f"run_stop at line {STOP_LINE} {words}")):
        parse_run(log)


def test_a_whole_float_time_literal_is_an_exact_integer(tmp_path):
    log = write(tmp_path / "log.txt", records())
    log.write_text(log.read_text().replace('"time_ms": 1650000003600', '"time_ms": 1.6500000036e12'))
    stop = next(rec for _, rec in read_mllog_lines(log) if rec["key"] == "run_stop")
    assert stop["time_ms"] == 1650000003600 and type(stop["time_ms"]) is int
    assert parse_run(log).minutes == 0.025


# --- one reader: the official tools' ----------------------------------------------------------------------------
def official(path: Path) -> tuple[list, list]:
    """(loglines, failed) of the official parser, in process: it reads and parses, and evaluates nothing."""
    return mlp_parser.parse_file(str(path), ruleset="2.0.0")


def test_lines_are_split_and_picked_as_the_official_parser_does(tmp_path):
    rec = {"key": "k", "value": 1, "time_ms": T0, "metadata": {}}
    text = (
        f"0: {MLLOG}{json.dumps({**rec, 'key': 'prefixed'})}\r\n"  # output before the token: read past
        f"progress 10%\r{MLLOG}{json.dumps({**rec, 'key': 'after_cr'})}\n"  # a lone CR ends a line (universal newlines)
        f"{MLLOG}{json.dumps({**rec, 'key': 'trailing_space'})} \x0b\x0c\x1c\x1f\n"  # strip() takes these
        f"{MLLOG}{json.dumps({**rec, 'key': 'mid'})[:-1]}\x0b}}\n"  # inside the JSON: not JSON, a parse error
        f"{MLLOG}   \n"  # the token and spaces only: a parse error
    )
    path = tmp_path / "log.txt"
    path.write_bytes(text.encode())
    loglines, failed = official(path)
    assert [ll.key for ll in loglines] == ["prefixed", "after_cr", "trailing_space"]
    lines = mllog_lines(path.read_bytes())
    assert [ln.lineno for ln in lines] == [1, 3, 4, 5, 6]  # line 2 is "progress 10%", ended by its CR
    assert [ln.record["key"] for ln in lines if ln.record] == ["prefixed", "after_cr", "trailing_space"]
    assert [TOKEN + ln.text for ln in lines if ln.record] == [ll.full_string for ll in loglines]
    assert [(TOKEN + ln.text).strip() for ln in lines if ln.record is None] == [line for line, _ in failed]
    assert not any(ln.ambiguous for ln in lines)  # the \x0b at the end and inside change no record for any reader


def test_a_line_holding_the_token_twice_is_refused_by_every_reader(tmp_path):
    """The official tools read after the last token (seed 11 here); a reader that takes the first reads seed 3."""
    recs = records()
    i = next(j for j, r in enumerate(recs) if isinstance(r, dict) and r["key"] == "seed")
    seed = recs[i]
    recs[i] = f"{MLLOG}{json.dumps({**seed, 'value': 3})} {MLLOG}{json.dumps({**seed, 'value': 11})}"
    log = write(tmp_path / "result_0.txt", recs)
    (official_seed,) = [ll.value["value"] for ll in official(log)[0] if ll.key == "seed"]
    assert official_seed == 11
    said = f"line {i + 1} holds the MLLOG token ':::MLLOG' 2 times: the official tools read only the text after"
    with pytest.raises(ResultsError, match=f"result_0.txt: not read, as {said}"):
        read_mllog_lines(log)
    with pytest.raises(ResultsError, match=said):
        parse_run(log)
    (refusal,) = gate.screen_log(log.read_bytes())
    assert refusal.startswith(f"line {i + 1}: holds the MLLOG token") and "a line of its own" in refusal
    (problem,) = check_problems(log)
    assert problem.startswith(compliance.GATE_PROBLEM) and f"line {i + 1}: holds the MLLOG token" in problem
    assert said in review_problems(log)[0]


@pytest.mark.parametrize("char", ["\u2028", "\u2029", "\x85"])
def test_a_line_end_only_splitlines_sees_is_refused_where_it_changes_the_records(tmp_path, char):
    """Inside a JSON string (raw, as json.dumps(ensure_ascii=False) writes it): one record for the tools, none for
    a reader that splits the line there. Before the token it changes nothing, and the line is read."""
    recs = records()
    i = next(j for j, r in enumerate(recs) if isinstance(r, dict) and r["key"] == "submission_platform")
    platform = recs[i]
    recs[i] = MLLOG + json.dumps({**platform, "metadata": {"note": f"a{char}b"}}, ensure_ascii=False)
    log = write(tmp_path / "result_0.txt", recs)
    loglines, failed = official(log)
    assert any(ll.key == "submission_platform" for ll in loglines) and not failed
    said = f"line {i + 1} holds the character U+{ord(char):04X}, which the official tools read as part of the line"
    said += " and Python's str.splitlines as a line end: the line holds 1 record(s) for the tools and 0 for a reader"
    with pytest.raises(ResultsError, match=re.escape(said)):
        parse_run(log)
    assert any(
        r.startswith(f"line {i + 1}: holds the character U+{ord(char):04X}") for r in gate.screen_log(log.read_bytes())
    )

    recs[i] = f"junk{char}{MLLOG}{json.dumps(platform)}"  # before the token: the same record for every reader
    assert parse_run(write(tmp_path / "before.txt", recs)).platform == "box"
    recs[i] = f"{MLLOG}{json.dumps(platform)}{char}"  # at the end: latin-1's strip() leaves a byte of it, UTF-8's not
    with pytest.raises(
        ResultsError, match=f"line {i + 1} holds bytes outside ASCII that decide whether it is a record"
    ):
        parse_run(write(tmp_path / "after.txt", recs))


@pytest.mark.parametrize("char", ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e"])
def test_an_ascii_line_end_only_splitlines_sees_changes_no_record(tmp_path, char):
    """Raw inside a JSON string it is a parse error for the tools and for a reader that splits there (no record for
    either: the checker reports the line); at the end of a line strip() takes it for both. Both files are read."""
    recs = records()
    i = next(j for j, r in enumerate(recs) if isinstance(r, dict) and r["key"] == "submission_platform")
    platform = recs[i]
    recs[i] = MLLOG + json.dumps({**platform, "metadata": {"note": "a"}}).replace('"a"', f'"a{char}b"')
    inside = write(tmp_path / "inside.txt", recs)
    assert len(official(inside)[1]) == 1
    assert parse_run(inside).platform is None  # the record is not read by anyone
    recs[i] = f"{MLLOG}{json.dumps(platform)}{char}"
    end = write(tmp_path / "end.txt", recs)
    assert not official(end)[1] and parse_run(end).platform == "box"


def test_white_space_outside_ascii_that_decides_a_record_is_refused(tmp_path):
    """A UTF-8 NO-BREAK SPACE (C2 A0) after the JSON: latin-1's strip() takes the A0 and leaves C2, a parse error
    for the tools; a UTF-8 reader strips U+00A0 and reads a record. A lone A0 byte: the other way round."""
    seed = json.dumps({"key": "seed", "value": 11, "time_ms": T0, "metadata": {}}).encode()
    base = "\n".join(log_lines()).encode() + b"\n" + MLLOG.encode() + seed
    for tail, tools in ((b"\xc2\xa0\n", "none"), (b"\xa0\n", "a record")):
        log = tmp_path / "log.txt"
        log.write_bytes(base + tail)
        assert len(official(log)[1]) == (1 if tools == "none" else 0)
        with pytest.raises(ResultsError, match=f"line 39 holds bytes outside ASCII .* read {tools} there"):
            read_mllog_lines(log)


# --- fuzzed: the official parser and trainperf never disagree on a file trainperf reads -----------------------
KEYS = ["run_start", "run_stop", "seed", "eval_accuracy", "x"]
STRINGS = ["", "a", "é", "\u2028", "\u2029", "\x85", "\xa0", " ", "\x0b", "\r", ":::MLLOG ", "\\"]
LINE_ENDS = ["\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
PREFIXES = ["", "0: ", "junk ", "\x0b", "\u2028", "\x85", "x\r", "\xa0"]
SUFFIXES = ["", " ", "\t", "\x0b", "\x0c", "\x1c", "\x1f", "\x85", "\xa0", "\u2028", "\u3000", "junk", "}"]


def often(common: str, rare: list[str]) -> st.SearchStrategy[str]:
    """``common`` about three times in four, else one of ``rare``: most lines are plain, so that many files are read."""
    return st.sampled_from([common] * len(rare) * 3 + rare)


TIMES = st.one_of(
    st.integers(EARLIEST_MS, LATEST_MS),
    st.integers(-(10**25), 10**25),
    st.sampled_from([10**22 + T0, 2**53 + 1]),
    st.floats(allow_nan=False, allow_infinity=False),
)
RECORD = st.fixed_dictionaries(
    {
        "key": st.sampled_from(KEYS),
        "value": st.one_of(st.integers(-5, 5), often("a", STRINGS), st.none()),
        "time_ms": TIMES,
        "metadata": st.dictionaries(st.sampled_from(["note", "status"]), often("a", STRINGS), max_size=2),
    }
)
PAYLOAD = st.one_of(
    st.tuples(RECORD, st.booleans()).map(lambda t: json.dumps(t[0], ensure_ascii=t[1])),
    st.sampled_from(["", "not json", "{", '{"key": ']),
)


LINE = st.tuples(
    often("", PREFIXES),
    st.tuples(PAYLOAD, PAYLOAD, often("one", ["none", "two"])).map(  # the token twice on one line now and then
        lambda t: {"none": "", "one": TOKEN + t[0], "two": f"{TOKEN}{t[0]} {TOKEN}{t[1]}"}[t[2]]
    ),
    often("", SUFFIXES),
    often("\n", LINE_ENDS),
).map("".join)
RAW = [b"\x85", b"\xa0", b"\xc2", b"\xff"]  # bytes that are not UTF-8 on their own
FILES = st.lists(st.tuples(LINE, st.sampled_from([b""] * 12 + RAW)), max_size=6).map(
    lambda lines: b"".join(text.encode("utf-8") + raw for text, raw in lines)
)


def _canonical(record: dict) -> tuple:
    """A record compared across readings: its time as the float the tools make of it, the rest as JSON text."""
    rest = json.dumps({k: v for k, v in record.items() if k != "time_ms"}, sort_keys=True)
    return rest, float(record["time_ms"])


def _splitlines_reading(data: bytes) -> list[tuple]:
    """Another reader: UTF-8, Python's str.splitlines, the text after the first token."""
    found = []
    for piece in data.decode("utf-8", errors="replace").splitlines():
        if TOKEN in piece:
            try:
                record = json.loads(piece[piece.index(TOKEN) + len(TOKEN) :].strip())
            except ValueError:
                continue
            if isinstance(record, dict):
                found.append(_canonical(record))
    return found


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(data=FILES)
def test_the_reader_and_the_official_parser_never_disagree_on_a_file_it_reads(data):
    lines = mllog_lines(data)
    if refused := next((ln.ambiguous for ln in lines if ln.ambiguous), None):
        event(f"refused: {refused[:30]}")
        return
    with tempfile.NamedTemporaryFile(suffix=".txt") as f:
        f.write(data)
        f.flush()
        try:
            loglines, failed = official(Path(f.name))
        except (KeyError, TypeError, RecursionError):  # the official parser stops on a record it cannot read
            event("the official parser crashed")
            return
    event(f"read: {len(loglines)} records, {len(failed)} parse errors")
    mine = [ln for ln in lines if ln.record is not None]
    assert [TOKEN + ln.text for ln in mine] == [ll.full_string for ll in loglines]
    assert [(TOKEN + ln.text).strip() for ln in lines if ln.record is None] == [line for line, _ in failed]
    for ln, ll in zip(mine, loglines, strict=True):
        assert ln.record["key"] == ll.key
        assert float(ln.record["time_ms"]) == ll.timestamp  # the same number, kept exact here
        if ln.text.isascii():  # the same strings in latin-1 and UTF-8
            assert {"value": ln.record["value"], "metadata": ln.record["metadata"]} == ll.value
    # and a reader that splits with str.splitlines and reads UTF-8 sees the same records
    assert _splitlines_reading(data) == [_canonical(ln.record) for ln in mine]


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(offset=st.one_of(st.integers(-(10**25), 10**25), st.integers(-(10**13), 10**13)), stop=st.integers(0, 10**10))
def test_a_shifted_or_stretched_run_is_refused_or_scored_exactly(offset, stop):
    recs = records()
    stretched = False  # the run stretched by ``stop`` ms from its first evaluation on, its records kept in order
    for r in recs:
        if isinstance(r, dict):
            stretched = stretched or r["key"] == "eval_accuracy"
            r["time_ms"] += offset + (stop if stretched else 0)
    with tempfile.TemporaryDirectory() as folder:
        log = write(Path(folder) / "result_0.txt", recs)
        start_ms, stop_ms = T0 + 2100 + offset, T0 + 3600 + offset + stop
        plausible = EARLIEST_MS <= start_ms and stop_ms <= LATEST_MS and stop_ms - start_ms <= MAX_RUN_MS
        try:
            run = parse_run(log)
        except ResultsError as e:
            assert not plausible and (f"at line {START_LINE}" in str(e) or f"at line {STOP_LINE}" in str(e))
            event("refused")
        else:
            assert plausible and run.minutes == (stop_ms - start_ms) / 60000 and run.start_ms == start_ms
            event("read")
