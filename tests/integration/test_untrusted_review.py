"""`trainperf review` of crafted packages, built by hand (no training): no value in a package leads an official tool
to a file of its choosing, the verdict names the value, and the private copy holds only what the tools read."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from untrusted import ORG, PATH_KEYS, SYSTEM, make_package, plant, system_description

from trainperf import limits
from trainperf.errors import ResultsError
from trainperf.submission.layout import copy_package
from trainperf.submission.review import review

pytest.importorskip("mlperf_logging")
ESC = "\x1b"
SHADY_PLATFORM = f"{ESC}[31m{SYSTEM}{ESC}[0m"


def crafted_package(root: Path) -> tuple[Path, dict[str, tuple[str, Path]]]:
    """result_0-2 point one key each at a rule file planted inside the package; result_3 logs an ANSI escape;
    result_4 is clean. Returns (the <org> folder, key -> (value, marker))."""
    org = root / ORG
    planted = {key: plant(org / "benchmarks" / "planted", key) for key in PATH_KEYS}
    logs = {i: {**PATH_KEYS[key][1], key: planted[key][0]} for i, key in enumerate(PATH_KEYS)}
    logs[3] = {"submission_platform": SHADY_PLATFORM}
    return make_package(root, logs), planted


@pytest.fixture(scope="module")
def crafted(tmp_path_factory):
    org, planted = crafted_package(tmp_path_factory.mktemp("crafted"))
    return org, planted, review(org)


def test_the_planted_rule_file_runs_under_the_official_package_checker_alone(tmp_path):
    """The exploit is real: the official package checker, given the package as it is, executes the planted file."""
    org, planted = crafted_package(tmp_path)
    cmd = [sys.executable, "-m", "mlperf_logging.package_checker", str(org), "training", "2.0.0"]
    subprocess.run(cmd + ["--log_output", str(tmp_path / "pc.log")], cwd=tmp_path, capture_output=True, timeout=300)
    _, marker = planted["submission_division"]
    assert marker.read_text() == "the planted rule file ran"


def test_review_never_runs_a_planted_rule_file(crafted):
    _, planted, _ = crafted
    assert not [m.name for _, m in planted.values() if m.exists()]


def test_the_verdict_names_each_refused_value(crafted):
    _, planted, result = crafted
    assert not result.passed
    (verdict,) = result.verdicts
    assert verdict.runs == 5
    for i, (key, (value, _)) in enumerate(planted.items()):
        (problem,) = [p for p in verdict.problems if p.startswith(f"result_{i}.txt: refused")]
        assert f"'{key}' has value {value!r}" in problem, problem
    (shady,) = [p for p in verdict.problems if p.startswith("result_3.txt: refused")]
    assert ESC not in shady and "\\x1b[31mbox\\x1b[0m" in shady


def test_the_official_tools_ran_on_the_clean_file_only(crafted):
    _, _, result = crafted
    log = result.raw["package_checker"]
    assert "result_4.txt" in log and "found 1, expected 5" in log
    assert not any(f"result_{i}.txt" in log for i in range(4))
    assert "result_summarizer" in result.raw
    assert result.confinement.startswith(("confined: ", "not confined: "))


def test_the_review_command_prints_escapes_only(crafted):
    org, planted, _ = crafted
    r = subprocess.run(
        [sys.executable, "-m", "trainperf", "review", str(org), "--verbose"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert ESC not in r.stdout + r.stderr and "\\x1b[31mbox" in r.stdout
    assert "official tools confined: " in r.stdout or "official tools not confined: " in r.stdout
    assert not [m.name for _, m in planted.values() if m.exists()]


# --- the private copy -------------------------------------------------------------------------------------
def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_the_copy_holds_only_system_descriptions_and_result_files(tmp_path):
    org = make_package(tmp_path / "pkg")
    bench = org / "results" / SYSTEM / "resnet"
    (org / "README.md").write_text("notes\n")
    (org / "benchmarks" / "resnet" / "impl").mkdir(parents=True)
    (org / "benchmarks" / "resnet" / "impl" / "train.py").write_text("print('code')\n")
    (org / "benchmarks" / "resnet" / "impl" / "data").symlink_to("/etc")  # not read, so not refused
    (org / "systems" / "notes.txt").write_text("not a description\n")
    (bench / "scaling.json").write_text('{"scaling_factor": 0.5}')
    (org / "results" / SYSTEM / "package_checker_params").write_text("rcp-bypass")
    (bench / "notes.txt").write_text("an aside\n")
    (bench / "power").mkdir()
    with (bench / "result_4.txt").open("r+b") as f:
        f.truncate(2**30)  # sparse: 1 GiB apparent, refused by that size before a byte is read
    layout = copy_package(org, tmp_path / "copy" / ORG)
    assert tree(tmp_path / "copy") == [f"{ORG}/results/{SYSTEM}/resnet/result_{i}.txt" for i in range(4)] + [
        f"{ORG}/systems/{SYSTEM}.json"
    ]
    key = (SYSTEM, "resnet")
    assert layout.benchmarks[key] == [f"result_{i}.txt" for i in range(4)]
    (why,) = layout.refused[key]["result_4.txt"]
    assert "1024 MiB (its apparent size), over the 16 MiB allowed" in why
    assert any("scaling.json scales the result_summarizer's score" in p for p in layout.problems_of[key])
    assert any("package_checker_params bypasses" in p for p in layout.system_problems[SYSTEM])
    assert {w.split()[0].rsplit("/", 1)[-1] for w in layout.warnings_of[key]} == {"notes.txt", "power"}


def test_a_clean_package_is_copied_byte_for_byte(tmp_path):
    org = make_package(tmp_path / "pkg")
    layout = copy_package(org, tmp_path / "copy" / ORG)
    assert not layout.problems and not layout.refused and layout.system_problems == {SYSTEM: []}
    for name in tree(org):
        assert (tmp_path / "copy" / ORG / name).read_bytes() == (org / name).read_bytes()


@pytest.mark.parametrize(
    ("where", "target"),
    [
        ("results/box/resnet/result_4.txt", "result_0.txt"),
        ("systems/box.json", "../README.md"),
        ("results/box", "/tmp"),
    ],
)
def test_links_are_never_followed(tmp_path, where, target):
    org = make_package(tmp_path / "pkg")
    (org / "README.md").write_text("notes\n")
    link = org / where
    shutil.rmtree(link) if link.is_dir() else link.unlink()
    link.symlink_to(target)
    with pytest.raises(ResultsError, match=rf"refused: {where} is a link to .*Links in a package are never followed"):
        copy_package(org, tmp_path / "copy" / ORG)


def test_names_that_would_be_read_as_paths_or_patterns_are_left_out(tmp_path):
    org = make_package(tmp_path / "pkg")
    for odd in ("box[1]", "{box,x}", "box\\x"):
        shutil.copytree(org / "results" / SYSTEM, org / "results" / odd)
        (org / "systems" / f"{odd}.json").write_text(json.dumps(system_description(system_name=odd)))
    layout = copy_package(org, tmp_path / "copy" / ORG)
    assert sorted(layout.benchmarks) == [(SYSTEM, "resnet")]
    assert len([p for p in layout.problems if "left out of the check" in p]) == 6  # 3 folders, 3 descriptions
    assert tree(tmp_path / "copy" / ORG)[0] == f"results/{SYSTEM}/resnet/result_0.txt"
    odd_org = tmp_path / "odd" / "ac{me}"
    shutil.copytree(org, odd_org)
    with pytest.raises(ResultsError, match=r"the package folder's name 'ac\{me\}' contains '\{'"):
        copy_package(odd_org, tmp_path / "copy2" / "ac{me}")


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("system_name", f"box{ESC}[2J", "field 'system_name' holds the control character U+001B"),
        ("submitter", "acme/..", "field 'submitter' is 'acme/..', which contains a path separator"),
        ("hw_notes", f"{ESC}]0;owned{ESC}\\", "field 'hw_notes' holds the control character U+001B"),
    ],
)
def test_a_system_description_with_a_path_or_control_character_is_not_given_to_the_tools(
    tmp_path, field, value, expected
):
    org = make_package(tmp_path / "pkg")
    (org / "systems" / f"{SYSTEM}.json").write_text(json.dumps(system_description(**{field: value})))
    layout = copy_package(org, tmp_path / "copy" / ORG)
    assert SYSTEM in layout.unusable_systems
    (problem,) = layout.system_problems[SYSTEM]
    assert expected in problem and ESC not in problem
    assert not (tmp_path / "copy" / ORG / "systems").exists()


def test_the_package_size_is_capped(tmp_path, monkeypatch):
    org = make_package(tmp_path / "pkg")
    size = (org / "results" / SYSTEM / "resnet" / "result_0.txt").stat().st_size
    monkeypatch.setattr(limits, "MAX_PACKAGE_BYTES", 3 * size)
    with pytest.raises(ResultsError, match=r"refused: the system descriptions and result files of the package"):
        copy_package(org, tmp_path / "copy" / ORG)


def test_a_result_file_named_with_a_control_character_is_refused_escaped(tmp_path):
    org = make_package(tmp_path / "pkg")
    bench = org / "results" / SYSTEM / "resnet"
    os.rename(bench / "result_4.txt", bench / f"result_{ESC}[2J.txt")
    layout = copy_package(org, tmp_path / "copy" / ORG)
    ((name, (why,)),) = layout.refused[(SYSTEM, "resnet")].items()
    assert name == f"result_{ESC}[2J.txt" and why == "its name contains the control character U+001B"
    (problem,) = [p for p in review_problems(org) if "refused" in p]
    assert ESC not in problem and "result_\\x1b[2J.txt" in problem


def review_problems(org: Path) -> list[str]:
    (verdict,) = review(org).verdicts
    return verdict.problems
