"""A package's official tools in one confined process: what review asks of :mod:`trainperf.submission.official`
declared up front (:class:`ToolPlan`) and made by :mod:`trainperf.submission._batch_tools` on the first request.

The package checker, the result summarizer, trainperf's compliance checks and the RCP checks of one package repeat
one another's work: each checks every result file's compliance again, reads every file again, and each process
imports mlperf-logging (a second of its own). In one process that work is made once, and the official functions
still decide every verdict (see ``_batch_tools``). Where the process stops without reporting on a tool, that tool is
run alone as before; one that runs past its time limit has timed out, as it would alone.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainperf.confine import confinement, start_confined
from trainperf.rules.compliance import CHECKER_TIMEOUT_S
from trainperf.submission.official import TOOL_TIMEOUT_S, USAGE, RcpJob, ToolRun, _rcp_specs

_BATCH_TOOLS = Path(__file__).with_name("_batch_tools.py")
_POLL_S = 0.02


@dataclass(frozen=True)
class ComplianceGroup:
    """Result files the compliance checker is to check with one rule file (None: the round's) and ruleset."""

    files: list[Path]
    config: Path | None
    ruleset: str


@dataclass(kw_only=True)
class ToolPlan:
    """Every official tool run a review of one package will ask for, made in one confined process
    (:mod:`._batch_tools`) on the first such request, in this order: the package checker, the result summarizer,
    the compliance groups, the RCP jobs. :func:`run_package_checker`, :func:`run_result_summarizer` and
    :func:`run_rcp_checkers` take their result from it while it is registered (:func:`planned`); a tool the process
    does not report on (it crashed) is run alone, and one that runs past its time limit has timed out."""

    org_dir: Path
    workdir: Path
    ruleset: str
    package_checker: bool = True
    summarizer: bool = True
    compliance: list[ComplianceGroup] = field(default_factory=list)
    rcp: list[RcpJob] = field(default_factory=list)
    progress: Callable[[int, int], None] | None = None
    _outcomes: dict[tuple[str, str | None, str], dict[str, Any]] | None = field(default=None, repr=False)
    results: list[dict[str, Any] | None] | None = None  # per task, once run
    confinement: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def tasks(self) -> list[tuple[str, dict[str, Any], float]]:
        """(name, the task for _batch_tools, its time limit in seconds)."""
        work = self.workdir.resolve()
        out: list[tuple[str, dict[str, Any], float]] = []
        org, pc, rs = str(self.org_dir), work / "package_checker", work / "result_summarizer"
        if self.package_checker:
            argv = ["package_checker", org, USAGE, self.ruleset, "--log_output", str(pc / "package_checker.log")]
            task = {"tool": "package_checker", "argv": argv, "cwd": str(pc), "log": str(pc / "package_checker.log")}
            out.append(("package_checker", task, TOOL_TIMEOUT_S))
        if self.summarizer:
            argv = ["result_summarizer", org, USAGE, self.ruleset, "--csv", str(rs / "summary.csv")]
            out.append(
                ("result_summarizer", {"tool": "result_summarizer", "argv": argv, "cwd": str(rs)}, TOOL_TIMEOUT_S)
            )
        for g in self.compliance:
            task = {"tool": "compliance", "files": [str(f) for f in g.files], "usage": USAGE, "ruleset": g.ruleset}
            task["config"] = str(g.config) if g.config is not None else None
            out.append(("compliance", task, CHECKER_TIMEOUT_S * len(g.files)))
        if self.rcp:
            out.append(
                ("rcp", {"tool": "rcp", "spec": _rcp_specs(self.rcp, self.ruleset)}, TOOL_TIMEOUT_S * len(self.rcp))
            )
        return out

    def result(self, name: str, spec: Any = None) -> Any:
        """The task's result (a ToolRun; for "result_summarizer", the ToolRun and the path of its CSV; for "rcp", a
        ToolRun or None per job), None when it was not reported."""
        with self._lock:
            if self.results is None:
                self.results = _run_plan(self)
        for (tool, task, _), res in zip(self.tasks(), self.results, strict=True):
            if tool == name and (spec is None or task.get("spec") == spec):
                if tool == "rcp":
                    return _rcp_runs(res, task, self)
                ran = _tool_run(tool, res, self.confinement)
                if tool == "result_summarizer" and ran is not None:
                    return ran, Path(task["argv"][-1])  # and the CSV it wrote
                return ran
        return None

    def compliance_outcome(self, path: Path, config: Path | None, ruleset: str) -> dict[str, Any] | None:
        """The checker's output on one file, where the process ran it (None: it did not, or the plan did not run)."""
        if self.results is None:
            return None
        if self._outcomes is None:  # indexed once: a look-up per file over every file's output grew with its square
            self._outcomes = self._index_outcomes()
        return self._outcomes.get((str(path), str(config) if config is not None else None, ruleset))

    def _index_outcomes(self) -> dict[tuple[str, str | None, str], dict[str, Any]]:
        """(file, rule file, ruleset) -> the checker's output on that file, the first for each, as it reported them."""
        found: dict[tuple[str, str | None, str], dict[str, Any]] = {}
        for (tool, task, _), res in zip(self.tasks(), self.results or [], strict=True):
            if tool != "compliance" or res is None:
                continue
            for rec in res.get("files", []):
                if isinstance(rec, dict) and isinstance(rec.get("file"), str):
                    found.setdefault((rec["file"], task["config"], task["ruleset"]), rec)
        return found


def _tool_run(tool: str, res: dict[str, Any] | None, note: str) -> ToolRun | None:
    if res is None:
        return None
    if res.get("timed_out"):
        return ToolRun(tool=tool, rc=None, out="", err="", confinement=note)
    try:
        return ToolRun(
            tool=tool,
            rc=int(res["rc"]),
            out=str(res["out"]),
            err=str(res["err"]),
            log=str(res["log"]),
            confinement=note,
        )
    except (KeyError, TypeError, ValueError):
        return None


def _rcp_runs(res: dict[str, Any] | None, task: dict[str, Any], plan: ToolPlan) -> list[ToolRun | None]:
    files = res.get("files") if isinstance(res, dict) else None
    files = files if isinstance(files, list) else []
    runs = [_tool_run("rcp_checker", rec if isinstance(rec, dict) else None, plan.confinement) for rec in files]
    return (runs + [None] * len(task["spec"]))[: len(task["spec"])]


def _run_plan(plan: ToolPlan) -> list[dict[str, Any] | None]:
    """Run the plan's tasks in one confined process; each task's result, None where it did not report (the process
    stopped), ``{"timed_out": True}`` where it ran past its limit (the process is then stopped)."""
    tasks = plan.tasks()
    work = plan.workdir
    for _, task, _ in tasks:
        if "cwd" in task:
            Path(task["cwd"]).mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    spec, results = work / "tools.json", work / "tools.jsonl"
    spec.write_text(json.dumps([task for _, task, _ in tasks]), encoding="utf-8")
    env = {"PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
    confined = confinement(writable=[work, plan.org_dir])
    plan.confinement = confined.note
    cmd = [sys.executable, str(_BATCH_TOOLS), "--out", str(results), str(spec)]
    done: list[dict[str, Any] | None] = []
    with (work / "tools.out").open("wb") as out, (work / "tools.err").open("wb") as err:
        proc = start_confined(confined, cmd, cwd=work, env=env, stdout=out, stderr=err)
        try:
            since = time.monotonic()
            while len(done) < len(tasks):
                finished = proc.poll() is not None
                for line in _lines(results)[len(done) :]:
                    done.append(_record(line))
                    since = time.monotonic()
                    if plan.progress is not None:
                        plan.progress(len(done), len(tasks))
                if finished or len(done) == len(tasks):
                    break
                if time.monotonic() - since > tasks[len(done)][2]:
                    done.append({"timed_out": True})
                    break
                time.sleep(_POLL_S)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    return (done + [None] * len(tasks))[: len(tasks)]


def _lines(path: Path) -> list[str]:
    """The complete lines written so far."""
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8", errors="replace")
    return text.split("\n")[:-1]


def _record(line: str) -> dict[str, Any] | None:
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    return rec if isinstance(rec, dict) else None
