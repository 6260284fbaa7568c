"""The table "What bad input gets" in docs/untrusted-input.md, row by row: each row's command is run here (in a
scratch folder holding the files the row describes) and must print the row's message and exit with the row's code;
rows marked † are run by the test named in ELSEWHERE. A row without a test, or a test without a row, fails."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_capture import run_cli
from untrusted import MLLOG, T0, log_lines, make_package, write_log

from trainperf.harness.suite import hold_out_folder

REPO = Path(__file__).resolve().parents[2]
SECTION = "## What bad input gets"
_SPAN = re.compile(r"``\s?(.+?)\s?``|`([^`]+)`")  # Markdown code spans: ``a `b` c`` and `a`


@dataclass(frozen=True)
class Row:
    case: str
    command: list[str]  # after `trainperf`
    says: list[str]  # the quoted parts of the message, in the order they are printed
    exit: int
    elsewhere: bool  # marked †: run by another test


def readme_rows() -> dict[str, Row]:
    text = (REPO / "docs" / "untrusted-input.md").read_text(encoding="utf-8")
    body = text[text.index(SECTION) :]
    end = body.find("\n## ", len(SECTION))
    body = body if end < 0 else body[:end]  # up to the next section, or the end of the page
    rows = {}
    for line in body.splitlines():
        if not line.startswith("| `"):
            continue
        case_cell, tried, says, code = (c.strip() for c in line.strip().strip("|").split(" | "))
        spans = [m[1] or m[2] for m in _SPAN.finditer(tried)]
        command = next((shlex.split(s)[1:] for s in spans if s.startswith("trainperf ")), [])
        case = _SPAN.search(case_cell)[2]
        rows[case] = Row(case, command, [m[1] or m[2] for m in _SPAN.finditer(says)], int(code), "†" in case_cell)
    return rows


ROWS = readme_rows()


# --- the rows run elsewhere: (test file, test function, the exit code that test sees) ----------------------------
ELSEWHERE = {
    "full-disk": (
        "tests/unit/test_durable_results.py",
        "test_a_full_disk_stops_the_run_at_once_and_earlier_results_stay",
        2,
    ),
    "killed-rank": (
        "tests/distributed/test_killed_rank.py",
        "test_a_killed_rank_ends_the_job_and_keeps_earlier_results",
        1,
    ),
}


# --- the rows run here: what each row's files are -------------------------------------------------------------
@dataclass
class Scratch:
    root: Path
    monkeypatch: pytest.MonkeyPatch
    request: pytest.FixtureRequest


Setup = Callable[[Scratch], AbstractContextManager | None]
SETUPS: dict[str, Setup] = {}


def setup(*cases: str) -> Callable[[Setup], Setup]:
    def register(fn: Setup) -> Setup:
        for case in cases:
            SETUPS[case] = fn
        return fn

    return register


@setup(
    "set-long-number",
    "set-type",
    "set-nan",
    "set-batch",
    "set-choice",
    "closed-rule",
    "unknown-benchmark",
    "bad-system-name",
    "run-seed-digits",
    "run-seed-negative",
    "scale-to-huge",
)
def nothing(s: Scratch) -> None:
    return None


@setup("missing-data")
def empty_data_dir(s: Scratch) -> None:
    (s.root / "empty").mkdir()


@setup("corrupt-data")
def inverted_test_images(s: Scratch) -> None:
    from trainperf.workloads.resnet import mini_data

    dest = mini_data.mini_dir(s.root / "corrupt")
    shutil.copytree(mini_data.mini_dir(s.request.getfixturevalue("data_dir")), dest)
    raw = np.fromfile(dest / "t10k-images-idx3-ubyte", dtype=np.uint8)
    raw[16:] = 255 - raw[16:]  # the same size and header: a valid IDX file of other images
    raw.tofile(dest / "t10k-images-idx3-ubyte")


@setup("dlrm-truncated-binary")
def a_binary_click_log_cut_inside_a_record(s: Scratch) -> None:
    root = s.root / "cut" / "dlrm" / "reference"
    root.mkdir(parents=True)
    (root / "terabyte_processed_train.bin").write_bytes(bytes(400))  # 2.5 records of 40 int32
    (root / "terabyte_processed_test.bin").write_bytes(bytes(160))


def _records() -> list:
    return [json.loads(line[len(MLLOG) :]) if line.startswith(MLLOG) else line for line in log_lines()]


def _first(records: list, key: str) -> dict:
    return next(r for r in records if isinstance(r, dict) and r["key"] == key)


def _write(path: Path, records: list) -> None:
    path.write_text("\n".join(MLLOG + json.dumps(r) if isinstance(r, dict) else r for r in records) + "\n")


@setup("log-malformed-line", "log-negative-duration", "log-duplicate-run-start", "log-time-not-a-number")
@setup("log-oversized-line", "log-oversized-file", "log-ansi", "log-path-value")
def logs(s: Scratch) -> None:
    recs = _records()
    recs.insert(5, MLLOG + '{"key": "seed", "value": 1, oops}')
    _write(s.root / "malformed.txt", recs)
    recs = _records()
    start, stop = _first(recs, "run_start"), _first(recs, "run_stop")
    start["time_ms"], stop["time_ms"] = stop["time_ms"], start["time_ms"]
    _write(s.root / "negative.txt", recs)
    recs = _records()
    i = recs.index(_first(recs, "run_start"))
    _write(s.root / "twice.txt", recs[: i + 1] + [dict(recs[i])] + recs[i + 1 :])
    recs = _records()
    _first(recs, "run_start")["time_ms"] = "soon"
    _write(s.root / "soon.txt", recs)
    recs = _records()
    recs.insert(5, {"key": "trainperf_note", "value": "A" * 100_000, "time_ms": 1, "metadata": {}})
    _write(s.root / "long.txt", recs)
    with open(s.root / "huge.txt", "wb") as f:
        f.truncate(64 * 2**20)
    write_log(s.root / "ansi.txt", {"submission_platform": "\x1b[32mPASS\x1b[0m"})
    write_log(s.root / "crafted.txt", {"submission_division": "../../../../tmp/x"})


def _shifted(records: list, offset: int, keys: tuple[str, ...] | None = None) -> list:
    for r in records:
        if isinstance(r, dict) and (keys is None or r["key"] in keys):
            r["time_ms"] += offset
    return records


@setup("log-time-shifted", "log-year-3000", "log-run-too-long", "log-token-twice", "log-line-separator")
def implausible_times_and_lines_two_readers_read_apart(s: Scratch) -> None:
    _write(s.root / "shifted.txt", _shifted(_records(), 10**22))
    _write(s.root / "year3000.txt", _shifted(_records(), 32_503_680_000_000 - T0, ("run_stop",)))  # 3000-01-01
    _write(s.root / "long-run.txt", _shifted(_records(), 8 * 86_400_000, ("run_stop",)))
    recs = _records()
    i = recs.index(_first(recs, "seed"))
    recs[i] = f"{MLLOG}{json.dumps({**recs[i], 'value': 3})} {MLLOG}{json.dumps({**recs[i], 'value': 11})}"
    _write(s.root / "two-tokens.txt", recs)
    recs = _records()
    _first(recs, "submission_platform")["metadata"]["note"] = "a\u2028b"
    (s.root / "separator.txt").write_text(
        "\n".join(MLLOG + json.dumps(r, ensure_ascii=False) if isinstance(r, dict) else r for r in recs) + "\n"
    )


@setup("log-timeline-start", "log-timeline-stop", "log-progress-back")
def timelines_that_do_not_hold(s: Scratch) -> None:
    _write(s.root / "late-start.txt", _shifted(_records(), 1_000, ("run_start",)))
    recs = _records()
    evaluations = ("eval_start", "eval_accuracy", "eval_stop")
    second = [r for r in recs if isinstance(r, dict) and r["key"] in evaluations][3:]  # the second epoch's
    _shifted([*second, _first(recs, "run_stop")], -500)
    _write(s.root / "early-stop.txt", recs)
    recs = _records()
    evaluations = [r for r in recs if isinstance(r, dict) and r["key"] == "eval_accuracy"]
    evaluations[0]["metadata"]["epoch_num"], evaluations[1]["metadata"]["epoch_num"] = 1.5, 1.0
    _write(s.root / "back.txt", recs)


@setup("package-copied-runs")
def one_run_copied_with_other_seeds(s: Scratch) -> None:
    runs = make_package(s.root / "copied") / "results" / "box" / "resnet"
    for i in range(1, 5):
        recs = [json.loads(ln[len(MLLOG) :]) if ln.startswith(MLLOG) else ln for ln in
                (runs / "result_0.txt").read_text().splitlines()]  # fmt: skip
        _first(recs, "seed")["value"] = 100 + i
        _write(runs / f"result_{i}.txt", recs)


@setup("package-time-shifted", "report-time-shifted")
def a_package_shifted_by_10_22_ms(s: Scratch) -> None:
    for path in sorted((make_package(s.root / "shifted") / "results" / "box" / "resnet").iterdir()):
        lines = path.read_text().splitlines()
        _write(path, _shifted([json.loads(ln[len(MLLOG) :]) if ln.startswith(MLLOG) else ln for ln in lines], 10**22))


@setup("package-path-value", "package-link", "package-oversized-file", "report-oversized-file")
@setup("system-bad-count", "report-over-input", "report-link")
def packages(s: Scratch) -> None:
    make_package(s.root / "crafted", {0: {"submission_division": "../../../../tmp/x"}})
    linked = make_package(s.root / "linked") / "results" / "box" / "resnet" / "result_4.txt"
    linked.unlink()
    linked.symlink_to("/etc/passwd")
    with open(make_package(s.root / "big") / "results" / "box" / "resnet" / "result_4.txt", "r+b") as f:
        f.truncate(2**30)
    odd = make_package(s.root / "odd") / "systems" / "box.json"
    odd.write_text(json.dumps({**json.loads(odd.read_text()), "number_of_nodes": "²"}))
    make_package(s.root / "pkg")


def _with_lines(path: Path, extra: list[str]) -> None:
    """The log with ``extra`` lines inserted before its run_stop."""
    lines = path.read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if '"run_stop"' in ln)
    path.write_text("\n".join(lines[:at] + extra + lines[at:]) + "\n")


@setup("report-many-evaluations", "report-impossible-accuracy", "report-deep-json", "report-long-number")
@setup("package-long-number", "log-long-lines")
def inputs_over_the_limits(s: Scratch) -> None:
    evaluation = next(ln for ln in log_lines() if '"eval_accuracy"' in ln)
    _with_lines(make_package(s.root / "evals") / "results" / "box" / "resnet" / "result_0.txt", [evaluation] * 10_001)
    for path in (make_package(s.root / "acc") / "results" / "box" / "resnet").iterdir():
        path.write_text(path.read_text().replace('"value": 0.95', '"value": 1000'))
    deep = make_package(s.root / "deep") / "systems" / "box.json"
    deep.write_text(deep.read_text().replace('"division"', f'"x": {"[" * 100_000}{"]" * 100_000}, "division"', 1))
    digits = make_package(s.root / "digits") / "systems" / "box.json"
    digits.write_text(digits.read_text().replace('"number_of_nodes": "1"', f'"number_of_nodes": {"9" * 5000}'))
    seed = make_package(s.root / "digits-log") / "results" / "box" / "resnet" / "result_0.txt"
    seed.write_text(seed.read_text().replace('"value": 1,', f'"value": {"9" * 100},', 1))
    note = MLLOG + json.dumps({"key": "trainperf_note", "value": "A" * 3900, "time_ms": T0, "metadata": {}})
    write_log(s.root / "wide.txt")
    _with_lines(s.root / "wide.txt", [note] * 400)


@setup("package-shell-name")
def a_system_name_a_shell_would_run(s: Scratch) -> None:
    hostile = "x$(touch F);y"
    org = make_package(s.root / "hostile", {i: {"submission_platform": hostile} for i in range(5)})
    (org / "results" / "box").rename(org / "results" / hostile)
    (org / "systems" / "box.json").rename(org / "systems" / f"{hostile}.json")


@setup("output-fifo", "output-link")
def outputs_that_are_not_regular_files(s: Scratch) -> None:
    make_package(s.root / "pkg")
    os.mkfifo(s.root / "fifo")
    (s.root / "elsewhere.json").write_text("{}")
    (s.root / "link.json").symlink_to(s.root / "elsewhere.json")


NOT_OURS = '{"mine": "a file trainperf did not write"}\n'


@setup("review-json-in-package", "outputs-one-path", "compare-seed-negative", "compare-resamples", "output-not-ours")
def a_package_and_a_file_of_the_user(s: Scratch) -> None:
    make_package(s.root / "pkg")
    (s.root / "notes.json").write_text(NOT_OURS)


@setup("review-json-full-disk")
def a_disk_that_fills_up_before_the_verdicts_are_written(s: Scratch) -> None:
    from trainperf import fileio

    def full(path: Path, data: bytes, *, mode: int = 0o644) -> Path:
        raise OSError(28, "No space left on device", str(path))

    make_package(s.root / "pkg")
    s.monkeypatch.setattr(fileio, "atomic_write_bytes", full)


@setup("lock-hard-link")
def a_lock_file_that_is_a_second_name_of_another_file(s: Scratch) -> None:
    (s.root / "out").mkdir()
    (s.root / "notes.txt").write_text(NOT_OURS)
    os.link(s.root / "notes.txt", s.root / "out" / ".trainperf.lock")


@setup("report-folder-escapes")
def a_system_folder_named_with_a_terminal_escape_and_a_command(s: Scratch) -> None:
    org = make_package(s.root / "esc")
    (org / "results" / "box").rename(org / "results" / "x$(touch F)\x1b]0;owned\x07")
    (org / "systems" / "box.json").unlink()


@setup("log-deep-value", "report-deep-value")
def a_log_value_nested_1500_deep(s: Scratch) -> None:
    deep = MLLOG + json.dumps({"key": "trainperf_note", "value": [], "time_ms": T0, "metadata": {}}).replace(
        "[]", "[" * 1500 + "]" * 1500
    )
    recs = _records()
    recs.insert(5, deep)
    _write(s.root / "deep-value.txt", recs)
    path = make_package(s.root / "deep-value") / "results" / "box" / "resnet" / "result_0.txt"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:5] + [deep] + lines[5:]) + "\n")


@setup("second-run")
def another_run_holds_the_folder(s: Scratch) -> AbstractContextManager:
    return hold_out_folder(s.root / "out")  # a second open of the lock file: flock refuses it in this process too


@setup("ctrl-c")
def a_run_interrupted(s: Scratch) -> None:
    from helpers import FAKE_BENCHMARK, FakeWorkload

    from trainperf import registry

    s.monkeypatch.setattr(registry, "benchmark", lambda key: FAKE_BENCHMARK)
    s.monkeypatch.setattr(registry, "workload_class", lambda key: FakeWorkload)
    s.monkeypatch.setattr(FakeWorkload, "interrupt_at_step", 3)  # Ctrl-C arrives during the third step


class _RunsACommand:
    def __reduce__(self):
        return (os.system, ("touch PICKLE_RAN",))


@setup("pickle-checkpoint")
def a_checkpoint_that_needs_pickle(s: Scratch) -> None:
    torch.save({"weight": torch.zeros(1), "payload": _RunsACommand()}, s.root / "evil.pt")
    s.monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # an environment that forces full loading


# --- the tests ---------------------------------------------------------------------------------------------------
def test_every_row_of_the_table_has_a_test():
    assert len(ROWS) >= 20
    assert sorted(SETUPS) == sorted(c for c, r in ROWS.items() if not r.elsewhere)
    assert sorted(ELSEWHERE) == sorted(c for c, r in ROWS.items() if r.elsewhere)
    for case, (path, name, code) in ELSEWHERE.items():
        tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
        assert name in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}, (case, path, name)
        assert ROWS[case].exit == code, case
    for row in ROWS.values():
        assert row.says, f"{row.case}: the message column quotes nothing"
        assert row.elsewhere or row.command, f"{row.case}: the row gives no `trainperf ...` command"


@pytest.mark.parametrize("case", sorted(SETUPS))
def test_each_row_prints_its_message_and_exits_with_its_code(case, tmp_path, monkeypatch, request):
    row = ROWS[case]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "1000")  # rich wraps long lines at the terminal's width
    held = SETUPS[case](Scratch(tmp_path, monkeypatch, request))
    with held or nullcontext():
        code, text = run_cli(row.command)
    assert code == row.exit, text[-3000:]
    at = 0
    for part in row.says:
        found = text.find(part, at)
        assert found >= 0, f"{case}: {part!r} not in the output (after position {at}):\n{text[-3000:]}"
        at = found + len(part)
    assert "\x1b" not in text
    assert not (tmp_path / "PICKLE_RAN").exists()
    if case in ("bad-system-name", "run-seed-digits", "run-seed-negative"):
        assert sorted(p.name for p in tmp_path.iterdir()) == []  # refused before anything was written
    if case in ("output-not-ours", "review-json-in-package", "outputs-one-path"):
        assert (tmp_path / "notes.json").read_text() == NOT_OURS  # nothing replaced, nothing added
        assert not (tmp_path / "same.html").exists()
        assert json.loads((tmp_path / "pkg" / "acme" / "systems" / "box.json").read_text())["system_name"] == "box"
    if case == "lock-hard-link":
        assert (tmp_path / "notes.txt").read_text() == NOT_OURS
