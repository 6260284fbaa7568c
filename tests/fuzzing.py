"""Hypothesis strategies for untrusted input: mutated MLLOG logs and system descriptions, and the oracle that
reads a log the way the official MLCommons tools read it.

A generated log starts from a complete mini resnet run (:func:`untrusted.log_lines`) and goes through a few
mutations: a field set to a value of the wrong type, a time that is negative or not finite, every time shifted
(by 10^22 ms, to the year 3000), a string with
``../``, NUL, ANSI escapes or bidi characters, a record duplicated, moved or missing a field, a raw line
with bytes that are not UTF-8, a very long or deeply nested line, a number of thousands of digits, duplicated JSON
keys, other line endings. A system description starts from :func:`untrusted.system_description` and is mutated the
same way, and may nest 5,000 deep (past Python's recursion limit) or hold a number of 5,000 digits.

The oracle (:func:`path_values_reaching_the_tools`) is written from the official tools' own code
(``mlp_parser/ruleset_200.py`` and ``rcp_checker.py`` of mlperf-logging 4.1.68), not from trainperf's
gate: a file the gate lets through must give the tools no value that they would format into a path.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from untrusted import MLLOG, T0, log_lines, system_description

from trainperf.registry import BENCHMARKS

BASE_RECORDS: list[dict[str, Any]] = [json.loads(line[len(MLLOG) :]) for line in log_lines() if line.startswith(MLLOG)]
KEYS = sorted({r["key"] for r in BASE_RECORDS})
# the keys whose values matter most: the three the rules format into paths, the names, the run's bounds
HOT_KEYS = [
    "submission_division",
    "submission_benchmark",
    "opt_name",
    "submission_org",
    "submission_platform",
    "submission_status",
    "trainperf_scale",
    "run_start",
    "run_stop",
    "eval_accuracy",
    "seed",
]
FIELDS = ["time_ms", "key", "value", "metadata", "event_type", "namespace"]

# Strings an attacker or a broken logger writes. `planted` values (relative paths to a planted rule file)
# are added by the tests that plant one.
NASTY_STRINGS = [
    "",
    " ",
    "..",
    "../",
    "../../../../../../tmp/evil",
    "/etc/passwd",
    "open/../../x",
    "closed\x00",
    "open\x00../x",
    "\x1b[32mPASS\x1b[0m",
    "\x1b]0;owned\x07",
    "box\u202eexe.txt",
    "a\u2028b",
    "line\rbreak",
    "tab\there",
    "\x7f",
    "\x85",
    "*",
    "{a,b}",
    "[x]",
    "\\..\\x",
    "²",
    "١",
    "-1",
    "1e999",
    "NaN",
    "Infinity",
    "\ud800",
    "é",
    "open",
    "closed",
    "resnet",
    "bert",
    "lars",
    "sgd",
    "success",
    "aborted",
    "mini",
    "reference",
    "submission_benchmark",
    ":::MLLOG ",
]


NASTY_TEXT: st.SearchStrategy[str] = st.one_of(
    st.sampled_from(NASTY_STRINGS),
    st.text(max_size=12),
    st.tuples(st.sampled_from(NASTY_STRINGS), st.sampled_from(NASTY_STRINGS)).map("".join),
    st.tuples(st.sampled_from(["A", "../", "é", "\x1b["]), st.integers(1, 5000)).map(lambda t: t[0] * t[1]),
)


SCALARS: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, -1e300, 1e308, float("nan"), float("inf"), -float("inf"), 0.5, 2]),
    NASTY_TEXT,
)


WEIRD: st.SearchStrategy[Any] = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NASTY_TEXT, inner, max_size=3),
    max_leaves=6,
)


# a time_ms: plausible, negative, not finite, or not a number at all
TIMES: st.SearchStrategy[Any] = st.one_of(
    st.integers(min_value=-(10**15), max_value=10**15),
    st.sampled_from([-1, 0, 999_999, 2_000_000, 1e308, -1e308, float("nan"), float("inf"), -float("inf")]),
    st.sampled_from(["1000", "1.2.3", None, True, [], {}]),
    st.floats(allow_nan=True, allow_infinity=True),
)


RAW_BYTES = [
    b"\xff\xfe",
    b"\x80",
    b"\xc3\x28",
    b"\xed\xa0\x80",
    b"\x00",
    b"\x1b[2J",
    b"\r",
    b"\x0b",
    b"\x0c",
    b"\xc2\x85",
    b"\xe2\x80\xa8",
    b"\x85",
    b'"',
    b"}",
    b":::MLLOG ",
]


_INDEX = st.integers(min_value=0, max_value=10_000)
MUTATIONS: st.SearchStrategy[tuple] = st.one_of(
    st.tuples(st.just("set_field"), _INDEX, st.sampled_from(FIELDS), WEIRD),
    st.tuples(st.just("set_value"), st.sampled_from(HOT_KEYS), WEIRD),
    st.tuples(st.just("set_value"), st.sampled_from(HOT_KEYS[:6]), NASTY_TEXT),
    st.tuples(
        st.just("set_meta"),
        st.sampled_from(["run_stop", "eval_accuracy", "block_start"]),
        st.sampled_from(["status", "epoch_num", "epoch_count", "first_epoch_num"]),
        WEIRD,
    ),
    st.tuples(st.just("set_metadata"), st.sampled_from(["run_stop", "eval_accuracy"]), WEIRD),
    st.tuples(st.just("set_time"), st.sampled_from(["run_start", "run_stop", "eval_accuracy", "init_start"]), TIMES),
    st.tuples(st.just("swap_times"), st.sampled_from(["run_start", "eval_accuracy"]), st.just("run_stop")),
    # every time moved: by 10^22 ms run_start and run_stop are one float; to the year 3000; back to 1970
    st.tuples(
        st.just("shift_times"),
        st.one_of(st.sampled_from([10**22, 10**24, 32_503_680_000_000 - T0, -T0]), st.integers(-(10**25), 10**25)),
    ),
    st.tuples(st.just("delete_field"), _INDEX, st.sampled_from(FIELDS)),
    st.tuples(st.just("delete_key"), st.sampled_from(HOT_KEYS)),
    st.tuples(st.just("duplicate"), _INDEX, _INDEX),
    st.tuples(st.just("duplicate_key"), st.sampled_from(["run_start", "run_stop", "submission_division"])),
    st.tuples(st.just("move"), _INDEX, _INDEX),
    st.tuples(st.just("add"), _INDEX, st.sampled_from(KEYS + ["submission_benchmark", "x"]), WEIRD),
    st.tuples(st.just("raw_insert"), _INDEX, st.sampled_from(RAW_BYTES), _INDEX),
    st.tuples(st.just("raw_truncate"), _INDEX, _INDEX),
    st.tuples(
        st.just("raw_line"),
        _INDEX,
        st.sampled_from(
            ["junk", "nested", "long", "token_twice", "dup_json_keys", "not_object", "mention", "long_number"]
        ),
    ),
    st.tuples(st.just("raw_line_size"), _INDEX, st.integers(1, 1_500_000)),
    st.tuples(st.just("newlines"), st.sampled_from([b"\r\n", b"\r", b"\n\n"])),
)


def _find(records: list[Any], key: str) -> int | None:
    return next((i for i, r in enumerate(records) if isinstance(r, dict) and r.get("key") == key), None)


def _dump(record: Any, ascii_only: bool = True) -> bytes:
    text = json.dumps(record, ensure_ascii=ascii_only)  # NaN and Infinity are written as JavaScript literals
    return (MLLOG + text).encode("utf-8", "surrogatepass")


def _apply(lines: list[Any], m: tuple) -> None:
    """Apply one mutation to ``lines``: records (dicts) and raw lines (bytes)."""
    op = m[0]
    n = len(lines)
    if op == "newlines":
        return  # applied when the file is written
    if n == 0:
        return
    if op == "set_field":
        rec = lines[m[1] % n]
        if isinstance(rec, dict):
            rec[m[2]] = m[3]
    elif op == "set_value":
        if (i := _find(lines, m[1])) is not None:
            lines[i]["value"] = m[2]
    elif op == "set_meta":
        if (i := _find(lines, m[1])) is not None:
            meta = lines[i].get("metadata")
            if isinstance(meta, dict):
                meta[m[2]] = m[3]
    elif op == "set_metadata":
        if (i := _find(lines, m[1])) is not None:
            lines[i]["metadata"] = m[2]
    elif op == "set_time":
        if (i := _find(lines, m[1])) is not None:
            lines[i]["time_ms"] = m[2]
    elif op == "swap_times":
        i, j = _find(lines, m[1]), _find(lines, m[2])
        if i is not None and j is not None:
            lines[i]["time_ms"], lines[j]["time_ms"] = lines[j].get("time_ms"), lines[i].get("time_ms")
    elif op == "shift_times":
        for rec in lines:
            if isinstance(rec, dict) and type(rec.get("time_ms")) is int:
                rec["time_ms"] += m[1]
    elif op == "delete_field":
        rec = lines[m[1] % n]
        if isinstance(rec, dict):
            rec.pop(m[2], None)
    elif op == "delete_key":
        if (i := _find(lines, m[1])) is not None:
            del lines[i]
    elif op == "duplicate":
        rec = lines[m[1] % n]
        lines.insert(m[2] % (n + 1), json.loads(json.dumps(rec)) if isinstance(rec, dict) else rec)
    elif op == "duplicate_key":
        if (i := _find(lines, m[1])) is not None:
            lines.insert(i + 1, json.loads(json.dumps(lines[i])))
    elif op == "move":
        rec = lines.pop(m[1] % n)
        lines.insert(m[2] % n, rec)
    elif op == "add":
        lines.insert(
            m[1] % (n + 1),
            {
                "namespace": "",
                "time_ms": T0 + 50,
                "event_type": "POINT_IN_TIME",
                "key": m[2],
                "value": m[3],
                "metadata": {"file": "x.py", "lineno": 1},
            },
        )
    elif op == "raw_insert":
        i = m[1] % n
        raw = lines[i] if isinstance(lines[i], bytes) else _dump(lines[i])
        at = m[3] % (len(raw) + 1)
        lines[i] = raw[:at] + m[2] + raw[at:]
    elif op == "raw_truncate":
        i = m[1] % n
        raw = lines[i] if isinstance(lines[i], bytes) else _dump(lines[i])
        lines[i] = raw[: m[2] % (len(raw) + 1)]
    elif op == "raw_line":
        lines.insert(m[1] % (n + 1), _raw_line(m[2], lines))
    elif op == "raw_line_size":
        lines.insert(m[1] % (n + 1), MLLOG.encode() + b'{"key": "trainperf_note", "value": "' + b"A" * m[2] + b'"}')


def _raw_line(kind: str, lines: list[Any]) -> bytes:
    if kind == "junk":
        return b"ordinary output \xff\xfe with :::MLLO and {json"
    if kind == "nested":
        return MLLOG.encode() + b"[" * 100_000 + b"]" * 100_000
    if kind == "long":
        return b"x" * 2_000_000  # a long line without the token: read past, never parsed
    if kind == "token_twice":  # the tools read what follows the last token; a reader taking the first sees other JSON
        return MLLOG.encode() + b'{"key": "run_stop", "value": ":::MLLOG {\\"key\\": \\"x\\"}", "time_ms": 5}'
    if kind == "dup_json_keys":  # json.loads keeps the last of duplicated keys, as the tools do
        return (
            MLLOG + '{"key": "submission_division", "value": "../../x", "value": "open", "time_ms": 1, '
            '"metadata": {}, "key": "submission_division"}'
        ).encode()
    if kind == "not_object":
        return (MLLOG + '["key", "run_start"]').encode()
    if kind == "long_number":  # a number far longer than any logged one (the tools read it; trainperf refuses it)
        return (MLLOG + '{"key": "seed", "value": ' + "9" * 4000 + ', "time_ms": 1, "metadata": {}}').encode()
    # a line that mentions submission_benchmark: rcp_checker takes its value as the benchmark
    return (
        MLLOG + '{"key": "trainperf_note", "value": "../../../tmp/x", "time_ms": 1, '
        '"metadata": {"about": "submission_benchmark"}}'
    ).encode()


@st.composite
def mllog_files(draw: st.DrawFn, *, extra_values: list[str] | None = None, max_mutations: int = 4) -> bytes:
    """The bytes of a mutated MLLOG result file."""
    lines: list[Any] = [json.loads(json.dumps(r)) for r in BASE_RECORDS]
    mutations = draw(st.lists(MUTATIONS, min_size=0, max_size=max_mutations))
    if extra_values:  # values that point at a planted rule file
        key = draw(st.sampled_from(["submission_division", "submission_benchmark", "opt_name"]))
        if draw(st.booleans()):
            mutations.insert(0, ("set_value", key, draw(st.sampled_from(extra_values))))
    for m in mutations:
        _apply(lines, m)
    newline = next((m[1] for m in mutations if m[0] == "newlines"), b"\n")
    ascii_only = draw(st.booleans())
    out = [b"ordinary output that the checker ignores"]
    out += [line if isinstance(line, bytes) else _dump(line, ascii_only) for line in lines]
    return newline.join(out) + newline


# --- system descriptions ------------------------------------------------------------------------------
SYSTEM_HOT_FIELDS = [
    "submitter",
    "division",
    "status",
    "system_name",
    "number_of_nodes",
    "accelerators_per_node",
    "host_processors_per_node",
    "accelerator_model_name",
    "host_processor_model_name",
]


SYSTEM_MUTATIONS: st.SearchStrategy[tuple] = st.one_of(
    st.tuples(st.just("set"), st.sampled_from(SYSTEM_HOT_FIELDS), WEIRD),
    st.tuples(st.just("set"), st.sampled_from(SYSTEM_HOT_FIELDS), NASTY_TEXT),
    st.tuples(
        st.just("set"),
        st.sampled_from(["number_of_nodes", "accelerators_per_node"]),
        st.sampled_from(["²", "-1", "0", "1e3", " 2 ", "N/A", "99999999999", "١", 2, -3, 1.5, True]),
    ),
    st.tuples(st.just("delete"), st.sampled_from(SYSTEM_HOT_FIELDS)),
    st.tuples(st.just("add"), NASTY_TEXT, WEIRD),
)


@st.composite
def system_files(draw: st.DrawFn, *, extra_values: list[str] | None = None) -> bytes:
    """The bytes of a mutated ``systems/<system>.json``."""
    kind = draw(st.sampled_from(["object"] * 8 + ["not_object", "raw"]))
    if kind == "not_object":
        return json.dumps(draw(WEIRD)).encode("utf-8", "surrogatepass")
    desc: dict[str, Any] = dict(system_description())
    for m in draw(st.lists(SYSTEM_MUTATIONS, max_size=3)):
        if m[0] == "set":
            desc[m[1]] = m[2]
        elif m[0] == "delete":
            desc.pop(m[1], None)
        else:
            desc[m[1]] = m[2]
    if extra_values and draw(st.booleans()):
        desc[draw(st.sampled_from(["division", "submitter", "system_name"]))] = draw(st.sampled_from(extra_values))
    data = json.dumps(desc, indent=1, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")
    if kind == "raw":
        at = draw(st.integers(0, len(data)))
        how = draw(st.sampled_from(["insert", "truncate", "dup_key", "deep", "long_number"]))
        if how == "insert":
            data = data[:at] + draw(st.sampled_from(RAW_BYTES)) + data[at:]
        elif how == "truncate":
            data = data[:at]
        elif how == "dup_key":
            data = data.replace(b"{", b'{"division": "../../x", ', 1)
        elif how == "deep":  # nesting past Python's recursion limit
            data = data.replace(b"{", b'{"x": ' + b"[" * 5_000 + b"]" * 5_000 + b", ", 1)
        else:  # a number past Python's int-string limit
            data = data.replace(b"{", b'{"number_of_nodes": ' + b"9" * 5000 + b", ", 1)
    return data


# --- the official tools' view -----------------------------------------------------------------------------
def tools_view(data: bytes) -> Iterator[tuple[str, Any]]:
    """(payload, parsed JSON or None) of each MLLOG line, read as mlp_parser and rcp_checker read a file:
    ``open(f, encoding='latin-1')`` (universal newlines), ``re.sub('.*' + TOKEN, TOKEN, line)``, JSON after it."""
    for line in io.TextIOWrapper(io.BytesIO(data), encoding="latin-1"):
        if MLLOG not in line:
            continue
        payload = re.sub(".*" + MLLOG, MLLOG, line).strip()[len(MLLOG) :]
        try:
            yield payload, json.loads(payload)
        except (ValueError, RecursionError):
            yield payload, None


def exact_minutes(data: bytes) -> float | None:
    """run_stop - run_start of the first of each, in minutes, from the integers the tools' JSON holds (subtracted
    before any division or float). Lines are found as :func:`tools_view` finds them, the last token by ``rfind``
    (what the greedy ``.*`` reaches, in linear time: a fuzzed line may be megabytes long)."""
    times: dict[str, Any] = {}
    for line in io.TextIOWrapper(io.BytesIO(data), encoding="latin-1"):
        if MLLOG not in line:
            continue
        payload = (MLLOG + line[line.rfind(MLLOG) + len(MLLOG) :]).strip()[len(MLLOG) :]
        try:
            record = json.loads(payload)
        except (ValueError, RecursionError):
            continue
        if isinstance(record, dict) and record.get("key") in ("run_start", "run_stop"):
            times.setdefault(record["key"], record.get("time_ms"))
    if not {"run_start", "run_stop"} <= times.keys():
        return None
    return (int(times["run_stop"]) - int(times["run_start"])) / 60000


def _path_problem(value: Any) -> bool:
    return not isinstance(value, str) or any(s in value for s in ("/", "\\", "..", "\x00"))


def path_values_reaching_the_tools(data: bytes) -> list[str]:
    """Values of ``data`` that an official tool would format into a file path (empty: none).

    ``common.yaml`` -> ``{submission_division}_common.yaml``; ``{open,closed}_common.yaml`` ->
    ``{division}_{submission_benchmark}.yaml``; ``closed_resnet.yaml`` -> ``closed_resnet_{opt_name}.yaml``;
    rcp_checker -> ``rcps_{value}.json`` for any line whose text holds ``submission_benchmark``.
    """
    found = []
    for payload, record in tools_view(data):
        if not isinstance(record, dict):
            continue
        key, value = record.get("key"), record.get("value")
        if key == "submission_division" and value not in ("closed", "open"):
            found.append(f"submission_division {value!r}")
        if (key == "submission_benchmark" or "submission_benchmark" in payload) and value not in BENCHMARKS:
            found.append(f"submission_benchmark (rcp_checker's reading) {value!r}")
        if key == "opt_name" and _path_problem(value):
            found.append(f"opt_name {value!r}")
    return found


def system_path_values(data: bytes) -> list[str]:
    """Fields of a system description that the tools put in a path and that would leave the folder. Not
    system_name: mlperf-logging 4.1.68 opens no path made from it (result_summarizer's links take the file's name,
    system_desc_checker only prints a link), and a published v2.0 name holds '/'."""
    try:
        desc = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        return []
    if not isinstance(desc, dict):
        return []
    return [
        f"{f} {desc[f]!r}"
        for f in ("submitter", "division")
        if f in desc and isinstance(desc[f], str) and _path_problem(desc[f])
    ]


def control_characters(text: str) -> list[str]:
    """Raw terminal control characters in ``text`` (ESC, CSI, bidi overrides), which output must never hold."""
    return [c for c in text if c in "\x1b\x9b\x07\x00" or "\u202a" <= c <= "\u202e" or "\u2066" <= c <= "\u2069"]


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path
