"""The official compliance checker's messages, explained in plain words (:mod:`trainperf.rules.compliance` runs the
checker): which rule a log breaks, at which log line, and what to change. The messages are matched as text, and
the rule files are read as data (never evaluated).
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections import Counter
from typing import Any

from trainperf.results import TOKEN
from trainperf.rules import mini_rules, rulesets
from trainperf.rules.preflight import Line, checker_dir, first_value, metadata, records, short
from trainperf.run_checks import is_number
from trainperf.spec import MLPERF_RULESET

TARGET_PROBLEM = "quality target not reached"  # every target problem starts with this
_SEPARATOR = "\n" + "-" * 30 + "\n"  # how the checker joins its messages


def messages(stderr: str) -> list[str]:
    """The checker's messages: one WARNING block after the last 'Compliance checks' line."""
    starts = [m.end() for m in re.finditer(r"^INFO -  Compliance checks: .*$", stderr, re.MULTILINE)]
    tail = stderr[starts[-1] :] if starts else stderr
    begin = tail.find("\nWARNING -  ")
    if begin < 0:
        return []
    block = tail[begin + len("\nWARNING -  ") :]
    block = re.split(r"\n(?:ERROR - FAILED|INFO - SUCCESS|Traceback \(most recent call last\))", block)[0]
    return [m.strip() for m in block.split(_SEPARATOR) if m.strip()]


# --- explaining the checker's messages ------------------------------------------------------------
_OPS = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}
_COMPARISON = re.compile(
    r"v\['value'\](?:\['(?P<field>\w+)'\])?\s*(?P<op>>=|<=|>|<)\s*(?P<num>[-+]?[\d.]+(?:e[-+]?\d+)?)"
)
_STATE_CHECKS = {
    "s['init_started']": "comes before any init_start",
    "not s['init_stopped']": "comes after init_stop (initialization was already over)",
    "not s['run_started']": "comes after run_start",
    "s['run_started']": "comes before run_start",
    "( s['init_stopped'] == True )": "comes before init_stop",
    "v['metadata']['epoch_count'] > 0": "has metadata epoch_count that is not positive",
}


def _explain_line_check(test: str, value: Any) -> str:
    test = test.strip()
    if test in _STATE_CHECKS:
        return _STATE_CHECKS[test]
    if "compile_time_mins" in test:
        return (
            "comes too long after the first init_start: untimed initialization may last at most 30 "
            "minutes (closed) or 240 minutes (open)"
        )
    if m := re.fullmatch(r"'(\w+)' in v\['metadata'\]", test):
        return f"lacks metadata '{m[1]}'"
    if m := re.fullmatch(r"'(\w+)' in v\['value'\]", test):
        return f"has no field '{m[1]}' in its value {value!r}"
    if m := re.fullmatch(r"v\['value'\] in (\[.*\])", test):
        return f"has value {value!r}, which is not one of {m[1]}"
    if test == "v['value'] != ''":
        return "has an empty value"
    if m := re.fullmatch(r"v\['value'\] (==|!=|>=|<=|>|<) (.+)", test):
        return f"has value {value!r}, but the rule needs value {m[1]} {m[2]}"
    return f"has value {value!r}, which breaks the official rule `{test}`"


def _explain_target(expr: str, lines: list[Line]) -> str:
    expr = " ".join(expr.split())
    values = [rec.get("value") for _, rec in records(lines, "eval_accuracy")]
    comps = [(m["field"], m["op"], float(m["num"])) for m in _COMPARISON.finditer(expr)]
    targets = [c for c in comps if c[1] in (">=", "<=")]
    if not targets:  # the open rules' sanity bound, e.g. v['value'] < 1.0
        return (
            f"no eval_accuracy line passes the official check `{expr}`: a perfect score is rejected "
            f"(values in log: {short([repr(v) for v in values])})"
        )

    def get(value: Any, fld: str | None) -> float | None:
        x = value.get(fld) if fld and isinstance(value, dict) else (None if fld else value)
        return float(x) if is_number(x) and not math.isnan(x) else None

    def reaches(value: Any) -> bool:
        got = [(get(value, f), op, t) for f, op, t in targets]
        return all(x is not None and _OPS[op](x, t) for x, op, t in got)

    best = []
    for fld, op, _ in targets:
        xs = [x for x in (get(v, fld) for v in values) if x is not None]
        pick = (max if op == ">=" else min)(xs) if xs else None
        best.append(f"{fld + ' ' if fld else ''}{'none' if pick is None else f'{pick:g}'}")
    cond = " and ".join(f"v['value']{f'[{f!r}]' if f else ''} {op} {t:g}" for f, op, t in targets)
    if any(reaches(v) for v in values):
        return (
            f"no eval_accuracy line passes the official check `{expr}`: the values that reach "
            f"{cond} are outside its valid range"
        )
    return f"{TARGET_PROBLEM}: no eval_accuracy line has {cond} (best in log: {', '.join(best)})"


def _expected_tensors(benchmark: str, ruleset: str = MLPERF_RULESET) -> list[str] | None:
    """The reference tensor names of closed_<benchmark>.yaml, read as data (never evaluated)."""
    import yaml  # installed with mlperf-logging

    path = checker_dir() / f"training_{ruleset}" / f"closed_{benchmark}.yaml"
    try:
        rule_records = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    except (OSError, yaml.YAMLError):
        return None
    for rec in rule_records:
        checks = rec.get("END", {}).get("CHECK", []) if isinstance(rec, dict) else []
        for check in [checks] if isinstance(checks, str) else checks:
            if "initialized_tensors" in check and "==" in check:
                return re.findall(r"""["']([^"']+)["']""", check.split("==", 1)[1])
    return None


def _explain_tensors(lines: list[Line], benchmark: str | None, ruleset: str = MLPERF_RULESET) -> str:
    logged = Counter(
        str(metadata(rec).get("tensor"))
        for _, rec in records(lines, "weights_initialization")
        if "tensor" in metadata(rec)
    )
    known = benchmark in rulesets.benchmarks(ruleset)
    expected = Counter(_expected_tensors(benchmark, ruleset) or []) if known else Counter()
    if not expected:
        return (
            "weights_initialization: the tensor list does not match the reference model's "
            f"({sum(logged.values())} tensors logged)"
        )
    missing = sorted((expected - logged).elements())
    unexpected = sorted((logged - expected).elements())
    parts = [f"missing: {short(missing)}"] if missing else []
    parts += [f"unexpected: {short(unexpected)}"] if unexpected else []
    return (
        f"weights_initialization: the reference tensor list does not match ({'; '.join(parts)}); "
        f"log one event per tensor of the reference model ({sum(expected.values())} in "
        f"training_{ruleset}/closed_{benchmark}.yaml), under those names"
    )


def _explain_end(test: str, lines: list[Line], benchmark: str | None, ruleset: str = MLPERF_RULESET) -> str:
    test = test.strip()
    if test == mini_rules.DIVISION_CHECK:
        return (
            f"mini logs must declare MLPerf division 'open' (submission_division is "
            f"{first_value(lines, 'submission_division')!r}): the closed v{MLPERF_RULESET} rules "
            "enforce the reference target and model; trainperf's own division goes in trainperf_division"
        )
    if test == mini_rules.STATUS_CHECK:
        stops = records(lines, "run_stop")
        if not stops:
            return "the run has no run_stop line, so it did not end with status 'success'"
        status = metadata(stops[0][1]).get("status")
        return f"the run stopped with status {status!r}, not 'success': only successful runs count"
    if test == mini_rules.RANGE_CHECK:
        from trainperf import registry

        known = benchmark in registry.BENCHMARKS and registry.benchmark(benchmark).available_at("mini")
        fraction = not known or registry.get_spec(benchmark, "mini").metric_is_fraction
        top, text = (1, "[0, 1]") if fraction else (1e6, "[0, 1e6)")
        bad = [rec.get("value") for _, rec in records(lines, "eval_accuracy")]
        bad = [v for v in bad if not (isinstance(v, dict) or (is_number(v) and 0 <= v <= top))]
        return f"eval_accuracy values must lie in {text}; the log has {', '.join(map(repr, bad[:5]))}"
    if test.startswith("sorted(s['initialized_tensors'])"):
        return _explain_tensors(lines, benchmark, ruleset)
    return f"the log breaks the official end-of-log rule `{' '.join(test.split())}`"


def _line_of(full: str, lines: list[Line]) -> tuple[int | None, dict[str, Any]]:
    """The line and record of a line the checker prints (its ``full_string``: the token and the JSON text)."""
    text = full.strip()[len(TOKEN) :] if full.strip().startswith(TOKEN) else None
    for ln in lines:
        if ln.record is not None and ln.text == text:
            return ln.lineno, ln.record
    try:
        record = json.loads(text) if text is not None else {}
    except (ValueError, RecursionError):
        record = {}
    record = record if isinstance(record, dict) else {}
    for ln in lines:
        if ln.record == record:
            return ln.lineno, record
    return None, record


EXACTLY_ONE = re.compile(
    r"Required EXACTLY_ONE occurrence of '([^']+)' but found (\d+)( with different values: (.*))?$"
)


def reference_scale_warning(lines: list[Line], benchmark: str | None, ruleset: str, key: str, check: str) -> str | None:
    """The warning for a failed check of the installed open rule file that fixes a reference-scale value
    (:data:`rulesets.REFERENCE_SCALE_OPEN_CHECKS`), where the log is a trainperf mini log in the open division: it
    is judged by its benchmark's mini rules, at its own scale. The warning says what the check fixes, by its key
    (:data:`rulesets.REFERENCE_SCALE_SUBJECTS`). None for any other check or log."""
    mini = first_value(lines, "trainperf_scale") == "mini" and first_value(lines, "submission_division") == "open"
    where = rulesets.open_checks(ruleset, benchmark) if mini and benchmark else {}
    source = where.get((key, " ".join(check.split())))
    if source is None:
        return None
    subject = rulesets.REFERENCE_SCALE_SUBJECTS.get(key, f"value of '{key}'")
    return (
        f"the official open rule `{check.strip()}` on '{key}' ({source}) fixes the reference's {subject} and is not "
        f"applied to a mini log, whose {subject} is the mini scale's own (the benchmark's mini rules judge the log)"
    )


def explain(
    msg: str, lines: list[Line], benchmark: str | None, ruleset: str = MLPERF_RULESET
) -> tuple[str | None, str | None]:
    """(problem, warning) for one checker message; exactly one of them is set."""
    first = msg.splitlines()[0]
    if m := EXACTLY_ONE.match(first):
        key, n = m[1], int(m[2])
        if n > 1 and not m[3]:
            return None, f"'{key}' is logged {n} times with the same value; the rules ask for exactly one"
        extra = f" (with different values: {m[4]})" if m[3] else ""
        return f"the log must contain exactly one '{key}' line but has {n}{extra}", None
    if m := re.match(r"Required AT_LEAST_ONE occurrence of '([^']+)' but found (\d+)$", first):
        return f"the log must contain at least one '{m[1]}' line but has none", None
    if m := re.match(r"Required AT_LEAST\((\d+)\) occurrence of '([^']+)' but found (\d+)$", first):
        return f"the log must contain at least {m[1]} '{m[2]}' lines but has {m[3]}", None
    if m := re.match(r"Required AT_LEAST_ONE occurrence of (.+)$", first):
        names = " or ".join(f"'{k}'" for k in sorted(re.findall(r"'([^']+)'", m[1])))
        return f"the log must contain at least one {names} line but has none", None
    if m := re.match(r"Failed checks for (\S+) :(.*)$", first):
        placeholder = rulesets.OPEN_PLACEHOLDERS.get(ruleset, {}).get(" ".join(m[2].split()))
        if m[1] == "eval_accuracy" and placeholder and first_value(lines, "submission_division") == "open":
            return None, f"the official open rule `{m[2].strip()}` is not applied: {placeholder}"
        # after the placeholder: a placeholder's check is also its file's target check, and is said as what it is
        if warning := reference_scale_warning(lines, benchmark, ruleset, m[1], m[2]):
            return None, warning
        if m[1] == "eval_accuracy":
            return _explain_target(m[2], lines), None
        return f"no '{m[1]}' line passes the official check `{m[2].strip()}`", None
    if m := re.match(
        r"CHECK for '([^']*)' failed in line (\d+):\n(.*?)\nfailed test: (.*?)\ncurrent context", msg, re.DOTALL
    ):
        if warning := reference_scale_warning(lines, benchmark, ruleset, m[1], m[4]):
            return None, warning
        index = int(m[2])  # the checker counts MLLOG records from 0
        if index < len(lines) and lines[index].record is not None:
            lineno, record = lines[index].lineno, lines[index].record
        else:
            lineno, record = _line_of(m[3], lines)
        where = f"at log line {lineno}" if lineno else f"(MLLOG record {index + 1})"
        return f"the '{m[1]}' line {where} {_explain_line_check(m[4], record.get('value'))}", None
    if m := re.match(
        r"Failed executing CHECK code:\n(.*?)\ntriggered by line:\n(.*?)\ncurrent context", msg, re.DOTALL
    ):
        lineno, record = _line_of(m[2], lines)
        return (
            f"the '{record.get('key')}' line at log line {lineno} could not be checked against "
            f"`{m[1].strip()}`: its value {record.get('value')!r} or its metadata has the wrong type"
        ), None
    if m := re.match(r"Failed executing code (\w+) code triggered by line :\n(.*)", msg, re.DOTALL):
        lineno, record = _line_of(m[2], lines)
        return (
            f"the '{record.get('key')}' line at log line {lineno} has a value or metadata the "
            "official rules cannot read"
        ), None
    if m := re.match(r"failed test: (.*?)\ncurrent context", msg, re.DOTALL):
        return _explain_end(m[1], lines, benchmark, ruleset), None
    if m := re.match(r"Failed executing CHECK code:\n(.*?)\ncurrent context", msg, re.DOTALL):
        return f"the official end-of-log rule `{' '.join(m[1].split())}` could not be evaluated on this log", None
    if m := re.match(r"Could not find config file: (.*)$", first):
        return f"the rule file {m[1]} does not exist", None
    if first.startswith("Log lines had parsing errors"):
        bad = [str(ln.lineno) for ln in lines if ln.record is None]
        where = f" (line {short(bad)}: {next(ln.error for ln in lines if ln.record is None)})" if bad else ""
        return f"some MLLOG lines are not valid JSON records{where}; fix or remove them", None
    if first.startswith("No log lines detected"):
        return "the log has no MLLOG lines", None
    return f"the official checker reports: {first}", None
