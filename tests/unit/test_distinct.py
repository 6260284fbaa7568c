"""The distinct-runs rule on records alone (trainperf/distinct.py): which runs are one run, which overlap, which files
are the same under two systems."""

from __future__ import annotations

from pathlib import Path

from trainperf import distinct

T0 = 1_650_000_000_000


def run(start: int, *, step: int = 100, blocks: int = 2, accuracy: float = 0.9) -> list[tuple[int, dict]]:
    """A run's records as the reader gives them: run_start, ``blocks`` blocks each with an evaluation, run_stop."""
    recs = [{"key": "run_start", "time_ms": start}]
    t = start
    for _ in range(blocks):
        recs += [{"key": "block_start", "time_ms": (t := t + step)}, {"key": "block_stop", "time_ms": (t := t + step)}]
        recs.append({"key": "eval_accuracy", "time_ms": t, "value": accuracy})
    recs.append({"key": "run_stop", "time_ms": t + step})
    return list(enumerate(recs, start=1))


def test_a_copy_moved_in_time_is_the_same_run_and_another_run_is_not():
    runs = [("result_0.txt", run(T0)), ("result_1.txt", run(T0 + 10**7)), ("result_2.txt", run(T0, step=101))]
    (problem,) = distinct.same_run_problems(runs)
    assert problem.startswith("distinct-runs rule: result_0.txt and result_1.txt have the same training timeline")
    named = [(n, distinct.fingerprints(lines)) for n, lines in runs]
    assert distinct.copies(named) == {"result_1.txt": "result_0.txt"}


def test_the_evaluation_curve_alone_names_a_copy_and_a_short_timeline_alone_does_not():
    one_block = [("a", run(T0, blocks=1)), ("b", run(T0 + 5, blocks=1))]
    assert [what for what, _, _ in distinct.same_runs([(n, distinct.fingerprints(x)) for n, x in one_block])] == [
        "evaluation curve"
    ]
    other_accuracy = [("a", run(T0, blocks=1)), ("b", run(T0 + 5, blocks=1, accuracy=0.91))]
    assert not distinct.same_run_problems(other_accuracy)
    assert distinct.fingerprints([(1, {"key": "block_start", "time_ms": T0})]) == ()  # no run_start: nothing


def test_every_run_that_starts_inside_another_is_named():
    long, inside, later = run(T0, step=1000), run(T0 + 100), run(T0 + 1500)  # long: T0..T0+5000
    (warning,) = distinct.overlapping_runs(
        "box", [("r0", long), ("r1", inside), ("r2", later), ("r3", run(T0 + 10**6))]
    )
    assert "on system box: r0 and r1 (" in warning and "r0 and r2 (" in warning and "r3" not in warning
    assert not distinct.overlapping_runs("box", [("r0", run(T0)), ("r1", run(T0 + 10**6))])


def test_the_same_files_under_two_systems_are_one_warning_naming_them(tmp_path: Path):
    files = {}
    for system in ("a", "b"):
        for i in range(5):
            path = tmp_path / system / f"result_{i}.txt"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"run {i}")
        files[(system, "resnet")] = sorted((tmp_path / system).iterdir())
    (warning,) = distinct.identical_across_systems(files)
    assert warning.startswith("results/a/resnet/result_0.txt and results/b/resnet/result_0.txt, ")
    assert "(and 2 more) are the same bytes under 2 systems (a, b)" in warning
