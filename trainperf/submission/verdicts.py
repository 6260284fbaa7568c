"""A package review's result (:mod:`trainperf.submission.review`): one :class:`Verdict` per (system, benchmark),
the :class:`Review`, and the review as JSON-ready data."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainperf.rules import rulesets
from trainperf.scoring import Score, score_results
from trainperf.spec import MLPERF_RULESET
from trainperf.submission import official
from trainperf.submission.bench_checks import _Bench, _runs_required
from trainperf.submission.power import RULE as POWER_RULE
from trainperf.submission.power import joules_text


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """The review of one benchmark of one system: passed when it has no problems."""

    system: str
    benchmark: str
    scale: str
    runs: int
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    rcp: str = "not checked"
    score: Score | None = None  # trainperf's olympic score
    summarizer_minutes: float | None = None  # the official result_summarizer's score
    scaling: float | None = None  # the review committee's factor (scaling.json); None: none
    energy_joules: float | None = None  # trainperf's energy score from the power logs (None: none)
    summarizer_energy_joules: float | None = None  # the official result_summarizer's energy score
    has_power: bool = False  # whether the benchmark's power logs were read
    power_withheld: bool = False  # read by the round's formula, kept from the installed summarizer (cannot read them)

    @property
    def scaled_minutes(self) -> float | None:
        """trainperf's score as MLCommons publishes it: the raw olympic score times scaling.json's factor."""
        if self.score is None or self.score.minutes is None:
            return None
        return self.score.minutes * (self.scaling or 1.0)

    @property
    def scaled_energy_joules(self) -> float | None:
        """The energy score as MLCommons publishes it: scaled by scaling.json's factor, as the summarizer scales it."""
        return None if self.energy_joules is None else self.energy_joules * (self.scaling or 1.0)

    @property
    def passed(self) -> bool:
        return not self.problems


@dataclass(frozen=True, kw_only=True)
class Review:
    package: Path
    org: str
    verdicts: list[Verdict]
    problems: list[str] = field(default_factory=list)  # about the package as a whole
    warnings: list[str] = field(default_factory=list)  # about the package as a whole
    raw: dict[str, str] = field(default_factory=dict)  # each official tool's output
    confinement: str = ""  # how the official tools ran: "confined: ..." or "not confined: <why>"; "" if none ran
    ruleset: str = MLPERF_RULESET  # the MLPerf Training ruleset the package was reviewed by (its round's)
    ruleset_source: str = ""  # where that ruleset comes from, in words

    @property
    def passed(self) -> bool:
        return bool(self.verdicts) and not self.problems and all(v.passed for v in self.verdicts)


def _verdict(bench: _Bench, summary: official.Summary | None, scaling: float | None = None) -> Verdict:
    need, dropped = _runs_required(bench)
    results = [
        (True, r.logged.minutes)
        if r.compliant and r.logged and r.logged.success and r.logged.minutes is not None
        else (False, math.inf)
        for r in bench.runs
    ]
    starts = [r.logged.start_ms if r.logged else None for r in bench.runs]
    ours = score_results(results, runs_required=need, dropped=dropped, start_times=starts) if results else None
    theirs = summary.scores.get((bench.system, bench.benchmark)) if summary else None
    warnings = list(bench.warnings)
    if summary:
        where = f"{bench.system}/{bench.benchmark}"
        warnings += [f"result_summarizer: {n}" for n in summary.notices if where in n]
    a = ours.minutes if ours else None
    if summary and ((a is None) != (theirs is None) or (a is not None and not math.isclose(a, theirs, rel_tol=1e-9))):
        why = _why_scores_differ(bench, ours, summary)
        warnings.append(
            f"trainperf's score ({minutes_text(a)}) differs from result_summarizer's ({minutes_text(theirs)})"
            + (f": {why}" if why else "")
        )
    warnings += _energy_differs(bench, summary)
    return Verdict(
        system=bench.system,
        benchmark=bench.benchmark,
        scale=bench.scale,
        runs=len(bench.runs),
        problems=list(dict.fromkeys(bench.problems)),
        warnings=list(dict.fromkeys(warnings)),
        rcp=bench.rcp,
        score=ours,
        summarizer_minutes=theirs,
        scaling=scaling,
        energy_joules=bench.energy_joules,
        summarizer_energy_joules=summary.energy.get((bench.system, bench.benchmark)) if summary else None,
        has_power=bench.has_power,
        power_withheld=bench.power_withheld,
    )


def _energy_differs(bench: _Bench, summary: official.Summary | None) -> list[str]:
    """A warning where trainperf's energy score and the summarizer's differ (both read the same power logs)."""
    if summary is None or summary.ran.crashed or not bench.has_power or bench.power_withheld:
        return []
    a, b = bench.energy_joules, summary.energy.get((bench.system, bench.benchmark))
    if (a is None) == (b is None) and (a is None or math.isclose(a, b, rel_tol=1e-9)):
        return []
    return [f"trainperf's energy score ({joules_text(a)}) differs from result_summarizer's ({joules_text(b)})"]


def _why_scores_differ(bench: _Bench, ours: Score | None, summary: official.Summary) -> str:
    reasons = []
    if ours is not None and not ours.valid:
        reasons.append(f"trainperf's is a {ours.label} ({ours.note})")
    dropped = " ".join(n for n in summary.notices if "Compliance check failed" in n)
    kept = [r for r in bench.runs if r.records and not r.compliant and f"/{r.name}" not in dropped]
    aborted = [r.name for r in kept if r.logged and r.logged.status == "aborted"]
    other = [r.name for r in kept if r.name not in aborted]
    if aborted:
        reasons.append(
            f"the summarizer counts the minutes of {', '.join(aborted)}, which stopped with status 'aborted' "
            f"(the {rulesets.round_name(bench.ruleset)} open rules do not check run_stop's status); trainperf counts "
            "them as the slowest"
        )
    if other:
        reasons.append(
            f"the summarizer counts {', '.join(other)}, which fail(s) trainperf's checks above but pass(es) the "
            "official rules it applies; trainperf does not count them"
        )
    return "; ".join(reasons)


def minutes_text(m: float | None) -> str:
    return "no score" if m is None else f"{m:.4f} min"


def finding_kind(text: str) -> str:
    """A short name for the kind of a finding (an error or a warning), for tables: its source and rule."""
    kinds = (
        ("package_checker: Seed checker", "package_checker seeds"),
        ("package_checker: RCP", "package_checker RCP"),
        ("package_checker: System description", "package_checker system description"),
        ("package_checker:", "package_checker"),
        ("result_summarizer:", "result_summarizer"),
        ("RCP check", "RCP"),
        ("distinct-runs rule", "runs not distinct"),
        ("runs overlap in time", "runs overlapping in time"),
        ("systems/", "system description"),
        ("trainperf's score", "score differs from the summarizer's"),
        ("trainperf's energy score", "energy differs from the summarizer's"),
    )
    for prefix, kind in kinds:
        if text.startswith(prefix):
            return kind
    for words, kind in (
        ("as MLCommons published it in", "published file: timeline finding accepted"),
        ("refused before the official tools", "gate"),
        (POWER_RULE, "power rules"),
        ("official summarizer cannot read it", "power logs left out"),
        ("is not a power log", "power logs left out"),
        ("power folder", "power logs left out"),
        ("accepted under olympic scoring", "non-compliant file dropped (olympic scoring)"),
        ("Results Resubmission", "resubmitted log"),
        ("are the same bytes under", "same files under two systems"),
        ("can be ignored for 1.1.0", "weights_initialization (v1.1: a warning)"),
        ("logs no seed", "seeds"),
        ("seeds", "seeds"),
        ("same seed", "seeds"),
        ("submission_org is", "submission_org vs folder"),
        ("submission_platform is", "submission_platform vs folder"),
        ("scaling.json", "scaling.json"),
        ("rules):", "compliance"),
        ("is logged", "compliance (repeated key)"),
        ("stopped without reaching the target", "aborted runs"),
        ("result files, but a", "result count"),
        ("not a result file", "file not a result"),
    ):
        if words in text:
            return kind
    return "other"


def review_json(r: Review) -> dict[str, Any]:
    """The review as JSON-ready data: one entry per (system, benchmark), findings classified by kind."""

    def findings(texts: list[str]) -> list[dict[str, str]]:
        return [{"kind": finding_kind(t), "text": t} for t in texts]

    return {
        "written_by": "trainperf review",
        "package": str(r.package),
        "org": r.org,
        "ruleset": r.ruleset,
        "ruleset_source": r.ruleset_source,
        "passed": r.passed,
        "errors": findings(r.problems),
        "warnings": findings(r.warnings),
        "confinement": r.confinement,
        "verdicts": [
            {
                "system": v.system,
                "benchmark": v.benchmark,
                "scale": v.scale,
                "runs": v.runs,
                "accepted": v.passed,
                "score_minutes": v.score.minutes if v.score else None,
                "score_valid": bool(v.score and v.score.valid),
                "scaling_factor": v.scaling,
                "scaled_minutes": v.scaled_minutes,
                "summarizer_minutes": v.summarizer_minutes,
                "power_logs": v.has_power,
                "power_withheld": v.power_withheld,
                "energy_joules": v.energy_joules,
                "summarizer_energy_joules": v.summarizer_energy_joules,
                "scaled_energy_joules": v.scaled_energy_joules,
                "rcp": v.rcp,
                "errors": findings(v.problems),
                "warnings": findings(v.warnings),
            }
            for v in r.verdicts
        ],
    }
