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
