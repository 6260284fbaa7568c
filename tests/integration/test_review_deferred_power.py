"""A review reads the power logs its copy leaves out whatever they hold (numbered from 1, which the installed tools
refuse) while the official tools run: the same layout, and the same findings in the same order, as when the copy reads
them first. Hand-written logs (tests/power_logs.py), no copy of a published one."""

from __future__ import annotations

import pytest
from power_logs import add_power, node_log, switch_log
from round_logs import APR_2024, package, plain_records
from untrusted import SYSTEM

from trainperf.submission import review as review_module
from trainperf.submission.layout import copy_package
from trainperf.submission.review import review, review_json

pytest.importorskip("mlperf_logging")
DAY = 86_400_000
KEY = (SYSTEM, "resnet")


def numbered_from_one(tmp_path):
    """A v4.0 resnet package whose runs log power on node_1 and node_2 (node_2 slower than 1 Hz: a rule finding), a
    switch, and a file in each power folder and in the result folder that is neither (warnings of the copy)."""
    recs_of = [plain_records(APR_2024 + i * DAY, "resnet", i + 1, minutes=2 + i * 0.5) for i in range(5)]
    org = package(tmp_path, "resnet", recs_of)
    for i, recs in enumerate(recs_of):
        logs = {f"node_{n}.txt": node_log(recs, 1000 - 100 * n, every=1500 * (n - 1) or 500) for n in (1, 2)}
        folder = add_power(org, "resnet", i, {**logs, "sw_0.txt": switch_log(recs, 200)})
        (folder / "nodes_1_to_2.png").write_bytes(b"\x89PNG")
    (org / "results" / SYSTEM / "resnet" / "notes.md").write_text("notes\n", encoding="utf-8")
    return org


def parsed(layout):
    return {run: [(log.name, log.lines, log.in_file) for log in p.logs] for run, p in layout.power_logs[KEY].items()}


def test_power_logs_read_after_the_copy_give_the_copys_layout(tmp_path):
    org = numbered_from_one(tmp_path)
    first = copy_package(org, tmp_path / "first" / "acme")
    later = copy_package(org, tmp_path / "later" / "acme", defer_power=True)
    assert later.deferred_power and KEY not in later.power_logs and KEY not in later.power_withheld
    assert not (later.root / "results" / SYSTEM / "resnet" / "power").exists()
    later.finish_power()
    assert not later.deferred_power
    assert later.warnings_of == first.warnings_of and later.power_withheld == first.power_withheld
    assert parsed(later) == parsed(first) and len(parsed(first)) == 5
    assert not (later.root / "results" / SYSTEM / "resnet" / "power").exists()  # the tools never see them


def test_review_findings_are_those_of_the_logs_read_first(tmp_path, monkeypatch):
    org = numbered_from_one(tmp_path)
    deferred = review(org)
    monkeypatch.setattr(review_module, "copy_package", lambda src, dest, **_: copy_package(src, dest))
    assert review_json(review(org)) == review_json(deferred)
    (verdict,) = deferred.verdicts
    assert verdict.power_withheld and verdict.energy_joules is not None
    order = [
        next(i for i, w in enumerate(verdict.warnings) if text in w)
        for text in (
            "notes.md is not a result file",
            "nodes_1_to_2.png is not a power log",
            "the node logs are not node_0.txt to node_1.txt",
            "slower than the 1 Hz",
        )
    ]
    assert order == sorted(order), verdict.warnings
