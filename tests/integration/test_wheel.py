"""trainperf as a user installs it: a built wheel carries every file trainperf reads at run time, installs
into a clean virtual environment, and runs there outside the source tree.

A data file that the code opens beside itself but that ``[tool.setuptools.package-data]`` forgets works in
the source checkout (and in the editable install of ``make setup``) and fails only after ``pip install``:
this test is where that shows.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

import trainperf
from trainperf import registry
from trainperf.history.energy import DEFAULT_ENERGY_CSV
from trainperf.history.query import DEFAULT_CSV
from trainperf.rules.compliance import TARGET_PROBLEM
from trainperf.rules.mini_rules import shipped_rule_path
from trainperf.submission.package import mini_rcp_path
from trainperf.workloads.bert.mini import SHIPPED_VOCAB

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "trainperf"
CODE_SUFFIXES = (".py",)
COMPILED = {"trainperf/workloads/resnet/_window.c": "trainperf/workloads/resnet/_window."}  # source: its build's prefix


def _files_beside_the_code() -> set[str]:
    """Every file of the package in the source tree (tracked, or new and not ignored), as wheel names."""
    if (ROOT / ".git").exists() and shutil.which("git"):
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "trainperf"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout.decode()
        names = {n for n in out.split("\0") if n and (ROOT / n).is_file()}  # a deleted, uncommitted file is gone
    else:
        names = {p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*") if p.is_file()}
    return {n for n in names if "__pycache__" not in n and not n.endswith(".pyc")}


def _files_the_code_opens() -> set[str]:
    """The data files trainperf's modules open through paths beside their own code, named by the code itself."""
    paths = [DEFAULT_CSV, DEFAULT_ENERGY_CSV, SHIPPED_VOCAB]
    for key in registry.BENCHMARKS:
        if key in registry.available():
            paths.append(PACKAGE / "workloads" / key / "README.md")  # the measurements behind its targets
        if shipped_rule_path(key).is_file():
            paths.append(shipped_rule_path(key))
        if mini_rcp_path(key).is_file():
            paths.append(mini_rcp_path(key))
    return {Path(p).resolve().relative_to(ROOT).as_posix() for p in paths}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built from a copy of the sources so that a stale ``build/`` in the checkout cannot leak in."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    shutil.copy2(ROOT / "pyproject.toml", src)
    shutil.copy2(ROOT / "README.md", src)
    shutil.copy2(ROOT / "setup.py", src)  # the compiled module
    shutil.copytree(PACKAGE, src / "trainperf", ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so"))
    out = tmp / "dist"
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(src), "-w", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    [whl] = out.glob("trainperf-*.whl")
    return whl


def test_the_wheel_carries_every_file_beside_the_code(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    opened = _files_the_code_opens()
    beside = _files_beside_the_code()
    # a README per benchmark, a rule file per mini scale, the table and the vocabulary: the sweep sees them all
    assert len(opened) >= len(registry.available()) + len(registry.available("mini")) + 2 and opened <= beside
    for source, built in COMPILED.items():  # a compiled module's source travels as its build
        beside.discard(source)
        assert any(n.startswith(built) and n.endswith(".so") for n in names), f"{source} not built into the wheel"
    missing = sorted(beside - names)
    assert not missing, (
        f"files of the package left out of the wheel: {missing}; add them to [tool.setuptools.package-data] "
        "in pyproject.toml (or delete them if nothing reads them)"
    )
    data = {n for n in beside if not n.endswith(CODE_SUFFIXES)}
    assert opened <= data and "trainperf/history/data/mlperf_training_results.csv" in data


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh virtual environment with the wheel installed; returns its folder.

    A full ``pip install -c constraints.txt`` of the wheel with its dependencies was measured at 107 s and
    6.0 GB on the two-core CI machine (torch's CUDA libraries), every time the test runs; it resolves and
    installs (torch 2.14.1, torchvision 0.29.1, ...) and ``trainperf list`` runs from it. So that this test
    stays near a minute, the environment gets only the wheel (``--no-deps``, by this interpreter's pip aimed
    at the new one with ``--python``) and then sees the running interpreter's installed packages through a
    ``.pth`` file, written after the install so that pip never sees the checkout's own (editable) trainperf. A ``.pth``
    line that is a path is only appended to ``sys.path``:
    the ``.pth`` files in that folder, the editable install's import hook among them, do not run, and the new
    environment's own site-packages comes first, so ``import trainperf`` finds the wheel's.
    """
    env_dir = tmp_path_factory.mktemp("venv") / "env"
    r = subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    new_python = env_dir / "bin" / "python"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(new_python),
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=env_dir,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    new_site = subprocess.run(
        [str(new_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))  # this interpreter's packages
    (Path(new_site) / "trainperf-test-base.pth").write_text("".join(f"{p}\n" for p in ours))
    return env_dir


def _run(env_dir: Path, *args, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """A command of the installed environment, run outside the source tree and without its PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["COLUMNS"] = "250"
    return subprocess.run(
        [str(env_dir / "bin" / args[0]), *map(str, args[1:])],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )


def test_the_installed_wheel_is_the_whole_package(installed, tmp_path):
    r = _run(
        installed,
        "python",
        "-c",
        "import json, trainperf; print(json.dumps([trainperf.__file__, trainperf.code_hash()]))",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    where, code_hash = json.loads(r.stdout)
    assert Path(where).resolve().is_relative_to(installed.resolve()), f"imported {where}, not the wheel's trainperf"
    assert code_hash == trainperf.code_hash()  # every .py and rule file, byte for byte


def test_the_installed_command_runs_outside_the_source_tree(installed, tmp_path):
    r = _run(installed, "trainperf", "list", "--round", "all", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for key in registry.BENCHMARKS:
        assert key in r.stdout
    r = _run(installed, "trainperf", "history", "fastest", "--round", "v2.0", "--single-node", cwd=tmp_path)
    assert r.returncode == 0, r.stderr  # the published-results table
    assert "resnet" in r.stdout


def test_an_installed_mini_run_is_checked_against_the_shipped_rules(installed, tmp_path):
    """A mini dry run (a few steps on synthetic batches, no data needed) and its log checked by the installed
    ``trainperf check``: the mini target in the verdict comes from the wheel's ``rules/mini/resnet.yaml``."""
    r = _run(installed, "trainperf", "run", "resnet", "--dry-run", "--out", tmp_path / "out", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    [log] = (tmp_path / "out" / "results").rglob("result_0.txt")
    r = _run(installed, "trainperf", "check", log, cwd=tmp_path)
    out = " ".join(r.stdout.split())
    target = registry.get_spec("resnet", "mini").target
    assert r.returncode == 1 and "resnet, mini, ruleset 2.0.0 + trainperf mini rules" in out, out
    problems = [line[4:] for line in r.stdout.splitlines() if line.startswith("  - ")]
    # a dry run stops after a few steps: the mini rules' target and successful-status checks are its only faults
    [on_target] = [p for p in problems if p.startswith(TARGET_PROBLEM)]
    [on_status] = [p for p in problems if not p.startswith(TARGET_PROBLEM)]
    assert f">= {target:g}" in on_target and "status 'aborted', not 'success'" in on_status, out
