"""A fuzz suite that attacks the score: Hypothesis perturbs the times, seeds, epochs and order of a complete mini
resnet log (trainperf's own, and the same run as another submitter's code would log it) and reads each with the
report's reader (the reader of review and compare too).

What no perturbation may buy: a run accepted as a success whose minutes are below what its untouched training records
prove it took (from the first to the last training record whose time the perturbation did not touch; another
submitter's log may train on after run_stop for :data:`trainperf.timeline.TAIL_SHARE` of its run, so its bound is that
span over 1 + TAIL_SHARE). A run whose times were not touched is scored exactly as the unperturbed log, and a target
reached past the spec's progress budget is never a success. A forger who rewrites every time consistently is out of
reach of any rule on one log.

Size: CI runs SCORE_EXAMPLES examples of each kind (derandomized, the 'ci' profile), a few seconds;
``HYPOTHESIS_PROFILE=explore`` draws new ones.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from untrusted import MLLOG, SYSTEM, log_lines, system_description

from trainperf import registry
from trainperf.errors import ResultsError
from trainperf.report.collect import collect
from trainperf.timeline import TAIL_SHARE, TRAINING

SCORE_EXAMPLES = 150
HONEST = [json.loads(line[len(MLLOG) :]) for line in log_lines() if line.startswith(MLLOG)]
FOREIGN_KEYS = ("trainperf_scale", "trainperf_division")
SPEC = registry.get_spec("resnet", "mini")
GROUPS = {  # records an attacker moves together
    "run_start": ("run_start",),
    "run_stop": ("run_stop",),
    "stop and evaluations": ("run_stop", "eval_start", "eval_accuracy", "eval_stop"),
    "evaluations": ("eval_start", "eval_accuracy", "eval_stop"),
    "training": TRAINING,
}
DELTAS = st.one_of(st.integers(-3_000, 3_000), st.sampled_from([-(10**7), -60_000, -1, 1, 60_000, 10**7]))
INDEX = st.integers(0, len(HONEST) - 1)
PERTURBATIONS = st.one_of(
    st.tuples(st.just("time"), INDEX, DELTAS),
    st.tuples(st.just("group"), st.sampled_from(sorted(GROUPS)), DELTAS),
    st.tuples(st.just("seed"), st.integers(0, 2**31)),
    st.tuples(st.just("epoch"), INDEX, st.sampled_from([-1, 0, 0.5, 1, 1.5, 3.5, 4, 5, 40])),
    st.tuples(st.just("move"), INDEX, INDEX),
)


def perturb(records: list[dict[str, Any]], changes: list[tuple]) -> set[int]:
    """Apply ``changes`` to ``records`` (each carries its honest position in ``_id``); the ids of the records whose
    time was changed."""
    retimed: set[int] = set()
    for change in changes:
        kind = change[0]
        if kind == "time" and change[1] < len(records):
            records[change[1]]["time_ms"] += change[2]
            retimed.add(records[change[1]]["_id"])
        elif kind == "group":
            for r in records:
                if r["key"] in GROUPS[change[1]]:
                    r["time_ms"] += change[2]
                    retimed.add(r["_id"])
        elif kind == "seed":
            for r in records:
                if r["key"] == "seed":
                    r["value"] = change[1]
        elif kind == "epoch" and change[1] < len(records):
            meta = records[change[1]]["metadata"]
            meta["first_epoch_num" if "first_epoch_num" in meta else "epoch_num"] = change[2]
        elif kind == "move" and change[1] < len(records):
            records.insert(min(change[2], len(records) - 1), records.pop(change[1]))
    return retimed


def read_run(records: list[dict[str, Any]]) -> Any:
    """The run as ``trainperf report`` reads it (None: refused), from a one-run result folder."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "acme"
        (root / "systems").mkdir(parents=True)
        (root / "systems" / f"{SYSTEM}.json").write_text(json.dumps(system_description()), encoding="utf-8")
        log = root / "results" / SYSTEM / "resnet" / "result_0.txt"
        log.parent.mkdir(parents=True)
        clean = [{k: v for k, v in r.items() if k != "_id"} for r in records]
        log.write_text("".join(MLLOG + json.dumps(r) + "\n" for r in clean), encoding="utf-8")
        try:
            (system,) = collect([root])
        except ResultsError:
            return None
        return system.benchmarks[0].runs[0]


def the_log(foreign: bool) -> list[dict[str, Any]]:
    records = [json.loads(json.dumps({**r, "_id": i})) for i, r in enumerate(HONEST)]
    return [r for r in records if not (foreign and r["key"] in FOREIGN_KEYS)]


def proven_minutes(honest: list[dict[str, Any]], retimed: set[int], foreign: bool) -> float:
    """What the untouched training records prove the run took, in minutes."""
    times = [r["time_ms"] for r in honest if r["key"] in TRAINING and r["_id"] not in retimed]
    span = max(times) - min(times) if len(times) > 1 else 0
    return span / (1 + (TAIL_SHARE if foreign else 0)) / 60000


@pytest.mark.parametrize("foreign", [False, True], ids=["trainperf-log", "other-submitters-log"])
@settings(max_examples=SCORE_EXAMPLES, suppress_health_check=[HealthCheck.too_slow])
@given(changes=st.lists(PERTURBATIONS, min_size=1, max_size=4))
def test_no_perturbation_buys_a_faster_accepted_score(foreign, changes):
    honest = the_log(foreign)
    records = json.loads(json.dumps(honest))
    retimed = perturb(records, changes)
    run = read_run(records)
    if run is None or not run.success:
        return  # refused, or not a success: nothing bought
    baseline = read_run(honest)
    assert baseline is not None and baseline.success
    assert run.minutes >= proven_minutes(honest, retimed, foreign) - 1e-12, (changes, run.minutes)
    if not retimed:
        assert run.minutes == baseline.minutes  # seeds, epochs and order alone change nothing in the score
    if not foreign:
        reached = [p for v, p in zip(run.evaluations, run.progress, strict=True) if SPEC.reached(v)]
        assert any(p - SPEC.epoch_num_offset <= SPEC.max_progress for p in reached), (changes, reached)


def test_the_issues_forgeries_are_not_accepted():
    """The probe's two timeline forgeries of issue 45, on trainperf's own log."""
    later_start = the_log(False)
    perturb(later_start, [("group", "run_start", 1_000)])  # run_start after the first block, epoch and more
    earlier_stop = the_log(False)
    perturb(earlier_stop, [("group", "stop and evaluations", -1_000)])  # the blocks and epochs stay later
    past_budget = the_log(False)
    last_eval = max(i for i, r in enumerate(past_budget) if r["key"] == "eval_accuracy")
    perturb(past_budget, [("epoch", last_eval, 40)])  # the target reached at epoch 40 of a 4-epoch budget
    assert read_run(later_start) is None and read_run(earlier_stop) is None
    assert not read_run(past_budget).success
