"""Olympic scoring as MLPerf scores results."""

import math

import pytest

from trainperf.scoring import olympic_mean, score_results


def test_olympic_mean_drops_fastest_and_slowest():
    assert olympic_mean([5.0, 1.0, 3.0, 2.0, 4.0], 1) == pytest.approx(3.0)


def test_unet3d_drops_four_and_four():
    results = [float(i) for i in range(40)]
    assert olympic_mean(results, 4) == pytest.approx(sum(range(4, 36)) / 32)


def test_one_aborted_run_counts_as_dropped_slowest():
    s = score_results([(True, 1.0), (True, 2.0), (False, 0.5), (True, 3.0), (True, 4.0)], runs_required=5, dropped=1)
    assert s.valid and s.label == "score"
    assert s.minutes == pytest.approx(
        (2.0 + 3.0 + 4.0) / 3
    )  # the aborted 0.5 is not the fastest: it is dropped as slowest


def test_too_many_aborted_runs_leave_no_score():
    s = score_results([(True, 1.0), (False, 2.0), (False, 0.5), (True, 3.0), (True, 4.0)], runs_required=5, dropped=1)
    assert s.minutes is None and not s.valid
    assert "2 of 5 runs aborted" in s.note


def test_fewer_runs_than_required_is_a_preview():
    s = score_results([(True, 1.5)], runs_required=5, dropped=1)
    assert s.label == "preview" and not s.valid
    assert s.minutes == pytest.approx(1.5)
    assert "1 of the 5 runs" in s.note


def test_all_aborted_preview_has_no_score():
    s = score_results([(False, 1.0)], runs_required=5, dropped=1)
    assert s.minutes is None and s.label == "no score"


def test_spread_is_over_successful_runs():
    s = score_results([(True, 1.0), (True, 2.5), (True, 2.0)], runs_required=5, dropped=1)
    assert s.spread == pytest.approx(1.5)
    assert not math.isnan(s.minutes)


# --- exactly N runs, and M > N runs scored by the median window (MLPerf v2.0, "Benchmark Results") ----------
F = (False, 100.0)  # a failed run: its minutes never count, it is infinitely slow


def runs(*minutes) -> list[tuple[bool, float]]:
    return [m if isinstance(m, tuple) else (True, float(m)) for m in minutes]


def test_exactly_n_runs_is_the_one_window():
    s = score_results(runs(5, 1, 3, 2, 4), runs_required=5, dropped=1)
    assert s.valid and s.minutes == pytest.approx(3.0) and s.note == ""
    assert (s.window, s.windows, s.window_runs) == ((0, 5), 1, (0, 1, 2, 3, 4))


def test_an_odd_number_of_windows_takes_the_median_window():
    s = score_results(runs(1, 2, 3, 4, 5, 6, 7), runs_required=5, dropped=1)  # windows score 3, 4, 5
    assert s.valid and s.label == "score" and s.minutes == pytest.approx(4.0)
    assert (s.window, s.windows, s.runs, s.successes) == ((1, 6), 3, 7, 7)
    assert (
        s.note
        == "median of 3 windows of 5 consecutive runs (ordered by result index; start times unknown): runs 2-6 of 7"
    )


def test_an_even_number_of_windows_takes_the_lower_median_window():
    s = score_results(runs(1, 2, 3, 4, 5, 6, 7, 8), runs_required=5, dropped=1)  # windows score 3, 4, 5, 6
    assert s.valid and s.minutes == pytest.approx(4.0) and s.window == (1, 6)
    assert s.note.startswith("lower median of 4 windows of 5 consecutive runs")


def test_failed_runs_inside_windows_count_as_infinitely_slow():
    # windows: [1 F 3 4 5] -> 4, [F 3 4 5 6] -> 5, [3 4 5 6 7] -> 5; ties go to the earlier window
    s = score_results(runs(1, F, 3, 4, 5, 6, 7), runs_required=5, dropped=1)
    assert s.valid and s.minutes == pytest.approx(5.0) and s.window == (1, 6) and s.successes == 6
    # windows: [1 F F 4 5] -> inf, [F F 4 5 6] -> inf, [F 4 5 6 7] -> 6, [4 5 6 7 8] -> 6: lower median is the 4th
    s = score_results(runs(1, F, F, 4, 5, 6, 7, 8), runs_required=5, dropped=1)
    assert s.valid and s.minutes == pytest.approx(6.0) and s.window == (3, 8)


def test_an_invalid_median_window_leaves_no_score():
    # windows: [F F 3 4 5] -> inf, [F 3 4 5 F] -> inf, [3 4 5 F 7] -> 16/3: the median is infinite
    s = score_results(runs(F, F, 3, 4, 5, F, 7), runs_required=5, dropped=1)
    assert s.minutes is None and not s.valid and s.label == "no score"
    assert s.window == (0, 5) and "runs 1-5 of 7 has 2 aborted runs" in s.note and "no score" in s.note


def test_runs_are_ordered_by_start_time_when_every_run_has_one():
    results = runs(9, 8, 1, 2, 3, 4, 5)
    starts = [60.0, 70.0, 10.0, 20.0, 30.0, 40.0, 50.0]  # in start order: 1 2 3 4 5 9 8 -> windows 3, 4, 17/3
    s = score_results(results, runs_required=5, dropped=1, start_times=starts)
    assert s.minutes == pytest.approx(4.0) and s.order == (2, 3, 4, 5, 6, 0, 1)
    assert s.window_runs == (3, 4, 5, 6, 0) and "ordered by run_start time" in s.note
    # one start time unknown: result-index order (9 8 1 2 3 4 5 -> windows 13/3, 3, 3), as if none were given
    s = score_results(results, runs_required=5, dropped=1, start_times=[*starts[:-1], None])
    assert s.minutes == pytest.approx(3.0) and s.window_runs == (2, 3, 4, 5, 6) and "result index" in s.note


def test_mlperf_example_ten_runs_make_six_windows():
    s = score_results(runs(*range(1, 11)), runs_required=5, dropped=1)
    assert s.windows == 6 and s.window == (2, 7) and s.minutes == pytest.approx(5.0)  # scores 3..8, lower median 5


def test_a_preview_has_no_window():
    s = score_results(runs(1, 2), runs_required=5, dropped=1)
    assert s.window is None and s.window_runs == () and s.label == "preview"
