"""Rounds as data: what each round names, that it agrees with the official tools and with the benchmarks' own
facts, and how `trainperf list` and `trainperf run` take --round."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from mlperf_logging import benchmark_meta

from trainperf import registry, rounds
from trainperf.errors import NotAvailableError, UsageError


def test_the_rounds_are_v2_0_and_the_current_one():
    assert rounds.versions() == ("2.0", "6.1")
    assert rounds.get("v6.1") is rounds.get("6.1.0") is rounds.get("6.1")
    with pytest.raises(UsageError, match="unknown round '5.9'"):
        rounds.get("5.9")


@pytest.mark.parametrize("version", ["2.0", "6.1"])
def test_a_round_names_the_benchmarks_and_runs_of_the_official_tools(version):
    r = rounds.get(version)
    assert set(r.keys) == set(benchmark_meta.get_allowed_benchmarks("training", version))
    counts = benchmark_meta._ALL_RESULT_FILE_COUNTS["training"]
    assert {b.key: b.runs for b in r.benchmarks} == {k: counts[k] for k in r.keys}


def test_the_v2_0_round_is_what_trainperf_always_ran():
    assert rounds.get("2.0").implemented == ("resnet", "ssd", "maskrcnn", "unet3d", "rnnt", "bert", "dlrm", "minigo")
    assert registry.available("mini", "2.0") == list(rounds.get("2.0").implemented)
    assert registry.available("mini", "6.1") == [
        "llama31_8b",
        "gpt_oss_20b",
        "deepseekv3_671b",
        "llama2_70b_lora",
        "flux1",
    ]


def test_an_implemented_benchmark_agrees_with_its_round():
    for r in rounds.all_rounds():
        for entry in r.benchmarks:
            if entry.implemented:
                spec = registry.benchmark(entry.key).specs["reference"]
                assert (spec.runs_required, spec.runs_dropped) == (entry.runs, entry.dropped), entry.key
                assert registry.round_of(entry.key) is r


def test_a_benchmark_of_the_round_not_built_yet_says_so():
    with pytest.raises(NotAvailableError, match="dlrmv4' of MLPerf Training 6.1 is not implemented"):
        registry.benchmark("dlrmv4")
    with pytest.raises(UsageError, match="unknown benchmark 'gpt5'"):
        registry.benchmark("gpt5")


def _trainperf(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainperf", *args], capture_output=True, text=True, timeout=120)


def test_list_shows_the_round_asked_for():
    default = _trainperf("list")
    assert default.returncode == 0 and "v2.0" in default.stdout and "llama31_8b" not in default.stdout
    current = _trainperf("list", "--round", "6.1")
    assert current.returncode == 0
    rows = {line.split()[0]: line for line in current.stdout.splitlines() if line.strip()[:1].isalpha()}
    for key in rounds.get("6.1").keys:
        assert key in rows
    assert "not implemented yet" in rows["dlrmv4"] and "0.75" in rows["dlrmv4"]
    ready = [line.split()[:3] for line in current.stdout.splitlines() if line.split()[:1] == ["llama31_8b"]]
    assert ready == [["llama31_8b", "mini", "ready"], ["llama31_8b", "reference", "ready"]]
    moe = [line.split()[:3] for line in current.stdout.splitlines() if line.split()[:1] == ["gpt_oss_20b"]]
    assert moe == [["gpt_oss_20b", "mini", "ready"], ["gpt_oss_20b", "reference", "ready"]]
    assert "3.34" in rows["gpt_oss_20b"]
    deepseek = [line.split()[:3] for line in current.stdout.splitlines() if line.split()[:1] == ["deepseekv3_671b"]]
    assert deepseek == [["deepseekv3_671b", "mini", "ready"], ["deepseekv3_671b", "reference", "ready"]]
    lora = [line.split()[:3] for line in current.stdout.splitlines() if line.split()[:1] == ["llama2_70b_lora"]]
    assert lora == [["llama2_70b_lora", "mini", "ready"], ["llama2_70b_lora", "reference", "ready"]]
    flux = [line.split()[:3] for line in current.stdout.splitlines() if line.split()[:1] == ["flux1"]]
    assert flux == [["flux1", "mini", "ready"], ["flux1", "reference", "ready"]] and "0.586" in rows["flux1"]


def test_list_json_and_a_bad_round():
    r = _trainperf("list", "--round", "all", "--json")
    assert r.returncode == 0
    doc = json.loads(r.stdout)
    assert [d["round"] for d in doc] == ["2.0", "6.1"]
    llama = {b["benchmark"]: b for b in doc[1]["benchmarks"]}["llama31_8b"]
    assert llama["scales"]["mini"]["available"] and llama["scales"]["reference"]["target"] == "log_perplexity <= 3.3"
    bad = _trainperf("list", "--round", "9.9")
    assert bad.returncode != 0 and "unknown round '9.9'" in bad.stderr and "Traceback" not in bad.stderr


def test_run_refuses_a_benchmark_of_another_round():
    r = _trainperf("run", "resnet", "--round", "6.1", "--dry-run", "--out", "/nonexistent/never")
    assert r.returncode != 0 and "not in round 6.1" in r.stderr and "Traceback" not in r.stderr


def test_a_package_is_of_one_round():
    from trainperf.submission.package import _check_round

    _check_round({"resnet", "bert"}, None)
    _check_round({"llama31_8b"}, "6.1")
    with pytest.raises(UsageError, match="several rounds"):
        _check_round({"resnet", "llama31_8b"}, None)
    with pytest.raises(UsageError, match=r"--round 2.0: the results hold llama31_8b \(round 6.1\)"):
        _check_round({"resnet", "llama31_8b"}, "2.0")


def test_check_takes_the_round_by_name():
    r = _trainperf("check", "--round", "6.1", "/nonexistent/result_0.txt")
    assert r.returncode != 0 and "Traceback" not in r.stderr
