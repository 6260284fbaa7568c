"""`trainperf review` scores distinct runs only: one run copied under several result files is refused whatever its
seeds say; runs overlapping in time and identical files under two systems are warnings, as MLCommons accepted them.
`trainperf report` (and `compare`, which reads runs the same way) counts each copy as a failed run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from untrusted import MLLOG, SYSTEM, make_package, system_description

from trainperf import distinct
from trainperf.report.collect import collect
from trainperf.submission.review import review

pytest.importorskip("mlperf_logging")
RESULTS = Path("results") / SYSTEM / "resnet"


def edit(path: Path, *, seed: int | None = None, shift_ms: int = 0) -> None:
    """The same log with another seed (the copy an attacker makes), or every time moved by ``shift_ms``."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith(MLLOG):
            record = json.loads(line[len(MLLOG) :])
            record["time_ms"] += shift_ms
            if record["key"] == "seed" and seed is not None:
                record["value"] = seed
            line = MLLOG + json.dumps(record)
        out.append(line)
    path.write_text("\n".join(out) + "\n", encoding="utf-8")


def test_the_hand_written_package_passes_with_no_distinct_runs_finding(tmp_path):
    result = review(make_package(tmp_path))
    (verdict,) = result.verdicts
    assert result.passed, (result.problems, verdict.problems)
    assert not [w for w in [*verdict.warnings, *result.warnings] if "overlap" in w or "same bytes" in w]


def copied(tmp_path: Path) -> Path:
    """A package whose result_0.txt is copied over the other four runs, each copy with another seed."""
    org = make_package(tmp_path)
    runs = org / RESULTS
    for i in range(1, 5):
        shutil.copy(runs / "result_0.txt", runs / f"result_{i}.txt")
        edit(runs / f"result_{i}.txt", seed=100 + i)
    return org


def test_one_run_copied_with_other_seeds_is_refused(tmp_path):
    result = review(copied(tmp_path))
    (verdict,) = result.verdicts
    assert not result.passed
    (problem,) = [p for p in verdict.problems if p.startswith(distinct.RULE)]
    assert "result_0.txt and result_1.txt and result_2.txt and result_3.txt and result_4.txt" in problem
    assert "to the millisecond" in problem and "whatever their seeds say" in problem


def test_runs_overlapping_in_time_are_a_warning(tmp_path):
    """Published v2.0 result sets (NVIDIA's, Dell's, Azure's) hold runs that overlap in time: accepted, so a warning."""
    org = make_package(tmp_path)
    runs = org / RESULTS
    edit(runs / "result_1.txt", shift_ms=-3_600_000 + 500)  # run 1 starts 0.5 s into run 0, which takes 1.5 s
    result = review(org)
    (verdict,) = result.verdicts
    assert result.passed, verdict.problems
    assert any("runs overlap in time on system box: result_0.txt and result_1.txt" in w for w in verdict.warnings)


def test_identical_files_under_two_systems_are_a_warning_naming_both(tmp_path):
    org = make_package(tmp_path)
    (org / "systems" / "box2.json").write_text(
        json.dumps(system_description(system_name="box2"), indent=2), encoding="utf-8"
    )
    shutil.copytree(org / RESULTS, org / "results" / "box2" / "resnet")
    result = review(org)
    assert [v.passed for v in result.verdicts] == [True, True], [v.problems for v in result.verdicts]
    (warning,) = [w for w in result.warnings if "same bytes" in w]
    assert "results/box/resnet/result_0.txt and results/box2/resnet/result_0.txt" in warning


def test_report_counts_each_copy_as_a_failed_run(tmp_path):
    honest = collect([make_package(tmp_path / "honest")])[0].benchmarks[0]
    assert honest.score.valid and not honest.run_notes
    (bench,) = collect([copied(tmp_path / "copied")])[0].benchmarks
    assert [r.success for r in bench.runs] == [True, False, False, False, False]
    assert bench.score.minutes is None and bench.score.successes == 1
    assert bench.run_notes[0].startswith("result_1.txt of resnet: the same run as result_0.txt to the millisecond")
    assert all("counted as failed" in n for n in bench.run_notes)
