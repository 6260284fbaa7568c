"""6.1 mini logs and the official open rule files that fix reference-scale values.

training_6.1.0/open_gpt_oss_20b.yaml asks an open submission for the reference's sequence length (8,192) and quality
target (3.34); training_6.1.0/open_deepseekv3_671b.yaml for its batch (>= 15,360), evaluation set (1,024 sequences),
sequence length (4,096) and quality target (3.6). A trainperf mini log is logged as open and judged by its mini
rules: those checks, read from the installed file, are said as warnings for it; every other check applies, to a mini
log as to any other, and a log of the reference scale is held to all of them. Each fixture is seed 100001 of the
benchmark's mini calibration (`benchmarks/calibrate.py <benchmark>`), its source paths made relative.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from trainperf.rules.compliance import check_log


@dataclass(frozen=True)
class Fixture:
    log: str  # beside this file
    open_file: str  # the installed open rule file whose reference-scale checks are warnings for a mini log
    reference_values: dict[str, str]  # each reference-scale check's value: what it fixes (one warning apiece)
    target: str  # the mini target, as a problem names it
    last_eval: str  # the deciding evaluation's value, as logged
    other_checks: tuple[tuple[str, str, str], ...]  # (key, its logged value, a value the open file's check fails)

    @property
    def path(self) -> Path:
        return Path(__file__).with_name(self.log)


FIXTURES = [
    Fixture(
        log="gpt_oss_20b_mini_log.txt",
        open_file="open_gpt_oss_20b.yaml",
        reference_values={"8192": "sequence length", "3.34": "quality target"},
        target="5.75",
        last_eval="5.72544826567173",
        other_checks=(("opt_name", '"adamw"', '"sgd"'),),
    ),
    Fixture(
        log="deepseekv3_671b_mini_log.txt",
        open_file="open_deepseekv3_671b.yaml",
        reference_values={
            "15360": "batch size",
            "1024": "evaluation set size",
            "4096": "sequence length",
            "3.6": "quality target",
        },
        target="5.15",
        last_eval="5.09913731738925",
        other_checks=(("opt_name", '"adamw"', '"sgd"'), ("gradient_accumulation_steps", "1", "0")),
    ),
]
IDS = [f.log.removesuffix("_mini_log.txt") for f in FIXTURES]


def edited(fixture: Fixture, tmp_path: Path, old: str, new: str) -> Path:
    text = fixture.path.read_text()
    assert text.count(old) == 1, old
    out = tmp_path / "result_0.txt"
    out.write_text(text.replace(old, new))
    return out


def names(text: str, value: str) -> bool:
    """Whether ``text`` names the number ``value`` (not as a part of a longer number)."""
    return re.search(rf"(?<![\d.]){re.escape(value)}(?!\d|\.\d)", text) is not None


def said_for(fixture: Fixture, texts: list[str], value: str) -> list[str]:
    return [t for t in texts if fixture.open_file in t and names(t, value)]


@pytest.mark.parametrize("fixture", FIXTURES, ids=IDS)
def test_a_mini_log_passes_with_the_reference_scale_checks_said_as_warnings(fixture):
    res = check_log(fixture.path)
    assert res.passed and res.scale == "mini" and res.ruleset == "6.1.0", res.problems
    said = [w for w in res.warnings if fixture.open_file in w]
    assert len(said) == len(fixture.reference_values), res.warnings
    for value, subject in fixture.reference_values.items():
        [warning] = said_for(fixture, said, value)
        assert f"the reference's {subject} " in warning and f"whose {subject} is the mini scale's own" in warning
        others = set(fixture.reference_values.values()) - {subject}
        assert not any(other in warning for other in others), warning


@pytest.mark.parametrize("fixture", FIXTURES, ids=IDS)
def test_the_mini_target_still_decides(fixture, tmp_path):
    worse = f"{float(fixture.last_eval) + 0.08!r}"
    log = edited(fixture, tmp_path, f'"value": {fixture.last_eval}', f'"value": {worse}')
    res = check_log(log)
    assert not res.passed
    assert any(fixture.target in p for p in res.problems), res.problems


@pytest.mark.parametrize(
    ("fixture", "key", "old", "new"),
    [(f, *check) for f in FIXTURES for check in f.other_checks],
    ids=[f"{i}-{check[0]}" for f, i in zip(FIXTURES, IDS, strict=True) for check in f.other_checks],
)
def test_every_other_check_of_the_open_file_still_applies_to_a_mini_log(fixture, key, old, new, tmp_path):
    log = edited(fixture, tmp_path, f'"key": "{key}", "value": {old}', f'"key": "{key}", "value": {new}')
    res = check_log(log)
    assert not res.passed
    assert any(key in p for p in res.problems), res.problems


@pytest.mark.parametrize("fixture", FIXTURES, ids=IDS)
def test_a_reference_scale_log_is_held_to_the_open_files_reference_values(fixture, tmp_path):
    scale = '"key": "trainperf_scale", "value": '
    log = edited(fixture, tmp_path, scale + '"mini"', scale + '"reference"')
    res = check_log(log)
    assert not res.passed
    for value in fixture.reference_values:
        assert any(names(p, value) for p in res.problems), (value, res.problems)
