"""Run MLCommons' package checker, result summarizer, compliance checker and rcp_checker for one package in one
interpreter (started by ``official.run_tools``).

    python _batch_tools.py --out RESULTS.jsonl SPEC.json

SPEC is a JSON list of tasks, run in order, each appending one JSON line ``{"task": i, "rc", "out", "err", "log"}``
(``"files"`` for a compliance task: one ``{"file", "rc", "out", "err"}`` per file) to RESULTS, flushed at once:

- ``{"tool": "package_checker" | "result_summarizer", "argv": [...], "cwd": DIR, "log": FILE or null}``: the tool's
  own ``main()`` with ``sys.argv`` set to ``argv``, as ``python -m mlperf_logging.<tool> ARGV`` runs it (its
  exit code, what it printed, its ``--log_output`` file). Before the summarizer, the ``scaling.json`` files that
  the package checker's RCP check wrote are removed, so the summarizer sees the folders as it does run alone.
- ``{"tool": "compliance", "files": [...], "usage", "ruleset", "config" (null: the round's common.yaml)}``: what
  ``trainperf/rules/_batch_checker.py`` gives for those files.
- ``{"tool": "rcp", "spec": [...]}``: what ``_batch_rcp.py`` gives for that spec (one result per folder in
  ``"files"``).

The same work as the four tools run one by one, without what they repeat: mlperf-logging is imported once, each
rule file's YAML parsed once (``_batch_checker``'s parse-once loader), and a compliance check already made in this
process on the same file (the same path and bytes, rule file, usage, ruleset and ``werror``) is not made again: its
log records are given again and its result set on the checker (``quiet`` applied: a quiet checker keeps no
warnings, which change nothing else). The official functions decide every verdict.

Run by path, so that the confined process imports nothing of trainperf: only the standard library, mlperf-logging
and its two sibling scripts. Every result file has passed trainperf's gate before it gets here.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import glob
import hashlib
import importlib.util
import io
import json
import logging
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_batch_checker = _load("_trainperf_batch_checker", _HERE.parent / "rules" / "_batch_checker.py")  # parse-once YAML
_batch_rcp = _load("_trainperf_batch_rcp", _HERE / "_batch_rcp.py")

from mlperf_logging.compliance_checker import mlp_compliance, mlp_parser  # noqa: E402
from mlperf_logging.package_checker import package_checker  # noqa: E402
from mlperf_logging.rcp_checker import rcp_checker  # noqa: E402
from mlperf_logging.result_summarizer import result_summarizer  # noqa: E402


@contextlib.contextmanager
def _capturing() -> Any:
    """Every log record made in the block, whatever the root logger's level, so that they can be given again at any
    level; the handlers get those of the level the logger lets through, as without the block."""
    root = logging.getLogger()
    level, records = root.getEffectiveLevel(), []
    before = root.__dict__.get("handle")
    passed_on = root.handle

    def handle(record: logging.LogRecord) -> None:
        records.append(record)
        if record.levelno >= level:
            passed_on(record)

    root.handle = handle  # type: ignore[method-assign]
    root.setLevel(logging.DEBUG)
    try:
        yield records
    finally:
        root.setLevel(level)
        if before is None:
            del root.handle
        else:
            root.handle = before  # type: ignore[method-assign]


def _digest(path: str) -> tuple[str, str]:
    with open(path, "rb") as f:
        return os.path.realpath(path), hashlib.sha256(f.read()).hexdigest()


def _replay(records: list[logging.LogRecord]) -> None:
    """The records given again, as the ``logging.info``-style calls that made them give them: a root logger without
    handlers is first given logging's basic one (``logging.basicConfig()``)."""
    root = logging.getLogger()
    for record in records:
        if not root.handlers:
            logging.basicConfig()
        if record.levelno >= root.getEffectiveLevel():
            root.handle(record)


def _memoize(owner: Any, name: str, key: Any) -> None:
    """``owner.name`` computed once per ``key(*args, **kwargs)``: a fresh copy of its result and its log records
    given again each time. For functions of a file's bytes and their arguments alone."""
    original = getattr(owner, name)
    done: dict[Any, tuple[list[logging.LogRecord], Any]] = {}

    def once(*args: Any, **kwargs: Any) -> Any:
        k = key(*args, **kwargs)
        if k in done:
            records, result = done[k]
            _replay(records)
            return copy.deepcopy(result)
        with _capturing() as records:
            result = original(*args, **kwargs)
        done[k] = (records, copy.deepcopy(result))
        return result

    setattr(owner, name, once)


class _CheckFile:
    """``ComplianceChecker.check_file`` computed once per (path, bytes, rule file, usage, ruleset, werror)."""

    def __init__(self) -> None:
        self.done: dict[tuple[Any, ...], tuple[list[logging.LogRecord], dict, dict, list]] = {}
        self._check_file = mlp_compliance.ComplianceChecker.check_file

    def install(self) -> None:
        memo = self

        def check_file(checker: Any, filename: str, config_file: str) -> bool:
            return memo.check_file(checker, filename, config_file)

        mlp_compliance.ComplianceChecker.check_file = check_file

    def check_file(self, checker: Any, filename: str, config_file: str) -> bool:
        key = (*_digest(filename), config_file, checker.usage, checker.ruleset, checker.werror)
        if key not in self.done:
            # made as a checker that keeps warnings, its closing log_messages left out; both given below
            quiet, checker.quiet = checker.quiet, False
            checker.log_messages = lambda: None
            try:
                with _capturing() as records:
                    self._check_file(checker, filename, config_file)
            finally:
                del checker.log_messages
                checker.quiet = quiet
            state = (
                copy.deepcopy(checker.warnings),
                copy.deepcopy(checker.overwritable),
                list(checker.not_overwritable),
            )
            self.done[key] = (records, *state)
        else:
            records, warnings, overwritable, not_overwritable = self.done[key]
            _replay(records)
            checker.warnings = copy.deepcopy(warnings)
            checker.overwritable = copy.deepcopy(overwritable)
            checker.not_overwritable = list(not_overwritable)
        if checker.quiet and not checker.werror:
            checker.warnings = {}  # what put_warning keeps for a quiet checker
        checker.log_messages()
        return not checker.has_messages()


def _install() -> None:
    """The memos: compliance checks, the compliance parser's and the rcp_checker's reading of a file, and the
    rcp_checker's search for an RCP's fastest accepted mean (a function of numbers alone)."""
    _CheckFile().install()

    def parsed(filename: str, ruleset: str = "0.6.0") -> Any:
        return (*_digest(filename), ruleset)

    _memoize(mlp_parser, "parse_file", parsed)
    result_summarizer.parse_file = mlp_parser.parse_file
    _memoize(rcp_checker, "read_submission_file", lambda f, ruleset, samples: (*_digest(f), ruleset, samples))

    def bound(checker: Any, mean: Any, stdev: Any, n: Any) -> tuple[Any, ...]:
        return (checker.submission_runs, checker.tolerance, checker.alpha, mean, stdev, n)

    _memoize(rcp_checker.RCP_Checker, "_find_min_acceptable_mean", bound)


def _run_main(main: Any, task: dict[str, Any]) -> dict[str, object]:
    """``main()`` of an official tool as ``python -m`` runs it: its argv, working folder, streams and exit code."""
    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    root.handlers = []
    root.setLevel(logging.WARNING)  # a fresh interpreter's
    argv, cwd = sys.argv, os.getcwd()
    rc = 0
    try:
        os.chdir(task["cwd"])
        sys.argv = list(task["argv"])
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
            except SystemExit as e:
                rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if not isinstance(e.code, int) and e.code is not None:
                    err.write(f"{e.code}\n")
            except Exception:  # noqa: BLE001 - the interpreter prints the traceback and exits 1
                err.write(traceback.format_exc())
                rc = 1
            finally:
                for h in root.handlers:
                    h.flush()
                    h.close()
                root.handlers = []
    finally:
        sys.argv = argv
        os.chdir(cwd)
    log = ""
    if task.get("log") and os.path.isfile(task["log"]):
        with open(task["log"], encoding="utf-8", errors="replace") as f:
            log = f.read()
    return {"rc": rc, "out": out.getvalue(), "err": err.getvalue(), "log": log}


def _scaling_files(argv: list[str]) -> set[str]:
    return set(glob.glob(os.path.join(glob.escape(argv[1]), "results", "*", "*", "scaling.json")))


def _task(task: dict[str, Any], before: set[str]) -> dict[str, object]:
    tool = task["tool"]
    if tool == "package_checker":
        return _run_main(package_checker.main, task)
    if tool == "result_summarizer":
        for path in _scaling_files(task["argv"]) - before:
            os.remove(path)  # written by the package checker's RCP check in this private copy
        return _run_main(result_summarizer.main, task)
    if tool == "compliance":
        config = task["config"] or f"{task['usage']}_{task['ruleset']}/common.yaml"
        checked = []
        for path in task["files"]:  # the bytes checked, for trainperf to compare with those its gate passed
            checked.append(
                {**_batch_checker._check(path, task["usage"], task["ruleset"], config), "sha256": _digest(path)[1]}
            )
        return {"files": checked}
    if tool == "rcp":
        return {"files": [_batch_rcp._check(spec) for spec in task["spec"]]}
    raise ValueError(f"unknown task {tool!r}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("spec")
    args = ap.parse_args()
    with open(args.spec, encoding="utf-8") as f:
        tasks = json.load(f)
    _install()
    before = {p for t in tasks if t["tool"] == "package_checker" for p in _scaling_files(t["argv"])}
    with open(args.out, "a", encoding="utf-8") as results:
        for i, task in enumerate(tasks):
            start = time.perf_counter()
            done = _task(task, before)
            results.write(json.dumps({"task": i, **done, "seconds": time.perf_counter() - start}) + "\n")
            results.flush()


if __name__ == "__main__":
    main()
