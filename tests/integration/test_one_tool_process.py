"""A package's official tools in one process (trainperf/submission/tool_plan.py, _batch_tools.py): what it reports
is what each tool reports run alone, and a crash or a time limit of that process gives the findings of the tools
run alone."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from untrusted import ORG, SYSTEM, foreign_log, make_package

from trainperf.rules import compliance, explain
from trainperf.submission import official, tool_plan
from trainperf.submission.official import planned
from trainperf.submission.review import review, review_json
from trainperf.submission.tool_plan import ComplianceGroup, ToolPlan

pytest.importorskip("mlperf_logging")
RULESET = "1.1.0"


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    """A v1.1 package by another submitter: five resnet runs, two of which log no run_stop (non-compliant: more
    than olympic scoring drops)."""
    org = make_package(tmp_path_factory.mktemp("one") / "pkg")
    for i, log in enumerate(sorted((org / "results" / SYSTEM / "resnet").glob("result_*.txt"))):
        foreign_log(log, {"seed": i + 1}, drop=("run_stop",) if i in (2, 3) else (), run=i)
    return org


def _copy(package: Path, where: Path) -> Path:
    shutil.copytree(package, where / ORG)
    return where / ORG


def _same(text: str, a: Path, b: Path) -> str:
    return text.replace(str(a), "COPY").replace(str(b), "COPY")


def test_the_one_process_reports_what_each_tool_reports_alone(package, tmp_path):
    together, alone = _copy(package, tmp_path / "a"), _copy(package, tmp_path / "b")
    files = sorted((together / "results" / SYSTEM / "resnet").glob("result_*.txt"))
    jobs = [official.RcpJob(together / "results" / SYSTEM / "resnet", tmp_path / "a-rcp")]
    plan = ToolPlan(
        org_dir=together,
        workdir=tmp_path / "a-work",
        ruleset=RULESET,
        compliance=[ComplianceGroup(files, None, RULESET)],
        rcp=jobs,
    )
    with planned(plan):
        pc = official.run_package_checker(together, tmp_path / "a-work" / "pc", RULESET)
        summary = official.run_result_summarizer(together, tmp_path / "a-work" / "rs", ["resnet"], RULESET)
        (rcp,) = official.run_rcp_checkers(jobs, tmp_path / "a-rcp-batch", together, RULESET)
    assert plan.results is not None and all(r is not None for r in plan.results)

    pc_alone = official.run_package_checker(alone, tmp_path / "b-work" / "pc", RULESET)
    summary_alone = official.run_result_summarizer(alone, tmp_path / "b-work" / "rs", ["resnet"], RULESET)
    job = official.RcpJob(alone / "results" / SYSTEM / "resnet", tmp_path / "b-rcp")
    (rcp_alone,) = official.run_rcp_checkers([job], tmp_path / "b-batch", alone, RULESET)
    assert (pc.finished, pc.found_errors, pc.general, pc.errors, pc.warnings) == (
        pc_alone.finished,
        pc_alone.found_errors,
        pc_alone.general,
        pc_alone.errors,
        pc_alone.warnings,
    )
    assert pc.errors  # the runs without run_stop are found, as alone
    assert _same(pc.ran.log, together, alone) == _same(pc_alone.ran.log, together, alone)
    assert pc.ran.rc == pc_alone.ran.rc == 0
    assert (summary.scores, summary.notices) == (summary_alone.scores, summary_alone.notices)
    assert _same(summary.ran.raw, together, alone) == _same(summary_alone.ran.raw, together, alone)
    assert (rcp.passed, rcp.message, rcp.submission_epochs) == (
        rcp_alone.passed,
        rcp_alone.message,
        rcp_alone.submission_epochs,
    )

    # the compliance checker's output on each file: that of trainperf's own checker batch on the same bytes
    pending = [compliance._prepare(f, key="resnet", ruleset=RULESET) for f in files]
    batch = compliance._run_batch(pending, None, RULESET)  # type: ignore[arg-type]
    for p, (rc, _, err, _) in zip(pending, batch, strict=True):
        rec = plan.compliance_outcome(p.path, None, RULESET)  # type: ignore[union-attr]
        assert rec is not None and (rec["rc"], explain.messages(rec["err"])) == (rc, explain.messages(err))


def test_a_crash_of_the_one_process_gives_the_findings_of_the_tools_run_alone(package, tmp_path, monkeypatch):
    reviewed = review_json(review(package))
    crash = tmp_path / "crash.py"
    crash.write_text("raise SystemExit(3)\n", encoding="utf-8")
    monkeypatch.setattr(tool_plan, "_BATCH_TOOLS", crash)
    again = review_json(review(package))
    assert again["verdicts"] == reviewed["verdicts"] and again["errors"] == reviewed["errors"]
    assert reviewed["verdicts"][0]["errors"]  # the runs without run_stop


def test_a_tool_past_its_time_limit_has_timed_out(package, monkeypatch):
    monkeypatch.setattr(tool_plan, "TOOL_TIMEOUT_S", 0.05)  # the package checker's limit in the one process
    r = review(package)
    assert any(f"did not finish within {official.TOOL_TIMEOUT_S} s" in p for p in r.problems), r.problems
    assert r.verdicts[0].summarizer_minutes is not None or r.verdicts[0].problems  # the others ran alone
