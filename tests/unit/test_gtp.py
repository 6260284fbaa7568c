"""A GTP opponent that is missing, crashes, answers garbage or hangs gives a clear error, never a hang."""

from __future__ import annotations

import shutil
import stat
import time

import pytest

from trainperf.errors import TrainperfError
from trainperf.workloads.minigo.arena import Opponent, check_opponent, parse_final_score
from trainperf.workloads.minigo.gtp import GNUGO, GTPClient, OpponentError, gnugo_command


def fake_engine(tmp_path, body: str):
    path = tmp_path / "fake-gtp"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_missing_binary_names_it_and_the_fix(tmp_path):
    missing = str(tmp_path / "no-such-gnugo")
    with pytest.raises(OpponentError, match="no-such-gnugo.*apt-get install gnugo") as e:
        GTPClient([missing, "--mode", "gtp"])
    assert isinstance(e.value, TrainperfError)
    with pytest.raises(OpponentError, match="not found"):
        check_opponent(Opponent(binary=missing), 5, 7.5)


def test_data_verify_reports_a_missing_opponent(tmp_path, monkeypatch):
    import functools

    from trainperf.data.prepare import mini_datasets
    from trainperf.workloads.minigo import arena

    minigo = mini_datasets()["minigo"]  # minigo has no data: `trainperf data verify` checks its opponent
    monkeypatch.setattr(arena, "Opponent", functools.partial(Opponent, binary=str(tmp_path / "no-such-gnugo")))
    [problem] = minigo.verify(tmp_path)
    assert "no-such-gnugo" in problem and "gnugo" in minigo.fix + problem
    assert minigo.prepare(tmp_path) == []


def test_engine_that_crashes(tmp_path):
    binary = fake_engine(tmp_path, "read line\nexit 3\n")
    with GTPClient([binary]) as g, pytest.raises(OpponentError, match="exited.*status 3"):
        g.call("genmove black")


def test_engine_that_answers_garbage(tmp_path):
    binary = fake_engine(tmp_path, "while read line; do printf 'hello world\\n\\n'; done\n")
    with GTPClient([binary]) as g, pytest.raises(OpponentError, match="not GTP"):
        g.call("genmove black")


def test_engine_that_never_answers_times_out(tmp_path):
    binary = fake_engine(tmp_path, "sleep 30\n")
    g = GTPClient([binary], timeout=0.5)
    t = time.monotonic()
    with pytest.raises(OpponentError, match="did not answer.*0.5 s"):
        g.call("genmove black")
    assert time.monotonic() - t < 5
    g.close()


def test_engine_that_answers_without_ending_times_out(tmp_path):
    binary = fake_engine(tmp_path, "read line\nprintf '= C3\\n'\nsleep 30\n")
    with GTPClient([binary], timeout=0.5) as g, pytest.raises(OpponentError, match="did not answer"):
        g.call("genmove black")


def test_refused_command_is_an_error():
    if shutil.which(GNUGO) is None:
        pytest.skip("GNU Go is not installed")
    with GTPClient(gnugo_command(size=5)) as g:
        assert g.call("name") == "GNU Go"
        with pytest.raises(OpponentError, match="refused"):
            g.call("play black Z99")


def test_final_score_parsing():
    assert parse_final_score("B+3.5") == 3.5 and parse_final_score("W+0.5") == -0.5 and parse_final_score("0") == 0
    with pytest.raises(OpponentError):
        parse_final_score("banana")
