"""A 6.1 mini log and the official open rule files that fix reference-scale values.

training_6.1.0/open_gpt_oss_20b.yaml asks an open submission for the reference's sequence length (8,192) and quality
target (3.34). A trainperf mini log is logged as open and judged by its mini rules: those two checks, read from the
installed file, are said as warnings for it; every other check applies, to a mini log as to any other, and a log of
the reference scale is held to all of them. The fixture is seed 100001 of gpt_oss_20b's mini calibration
(`benchmarks/calibrate.py gpt_oss_20b`), its source paths made relative.
"""

from __future__ import annotations

from pathlib import Path

from trainperf.rules.compliance import check_log

LOG = Path(__file__).with_name("gpt_oss_20b_mini_log.txt")


def edited(tmp_path: Path, old: str, new: str) -> Path:
    text = LOG.read_text()
    assert text.count(old) == 1, old
    out = tmp_path / "result_0.txt"
    out.write_text(text.replace(old, new))
    return out


def test_a_mini_log_passes_with_the_reference_scale_checks_said_as_warnings():
    res = check_log(LOG)
    assert res.passed and res.scale == "mini" and res.ruleset == "6.1.0", res.problems
    said = [w for w in res.warnings if "open_gpt_oss_20b.yaml" in w]
    assert len(said) == 2 and any("8192" in w for w in said) and any("3.34" in w for w in said), res.warnings


def test_the_mini_target_still_decides(tmp_path):
    log = edited(tmp_path, '"value": 5.72544826567173', '"value": 5.80544826567173')
    res = check_log(log)
    assert not res.passed
    assert any("5.75" in p for p in res.problems), res.problems


def test_every_other_check_of_the_open_file_still_applies_to_a_mini_log(tmp_path):
    log = edited(tmp_path, '"key": "opt_name", "value": "adamw"', '"key": "opt_name", "value": "sgd"')
    res = check_log(log)
    assert not res.passed
    assert any("opt_name" in p for p in res.problems), res.problems


def test_a_reference_scale_log_is_held_to_the_open_files_sequence_length_and_target(tmp_path):
    scale = '"key": "trainperf_scale", "value": '
    log = edited(tmp_path, scale + '"mini"', scale + '"reference"')
    res = check_log(log)
    assert not res.passed
    assert any("8192" in p for p in res.problems) and any("3.34" in p for p in res.problems), res.problems
