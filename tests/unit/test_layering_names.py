"""A benchmark's facts live in its own folder: no code outside ``trainperf/workloads/`` and the list of keys in
``trainperf/registry.py`` names a benchmark key.

The rule the test applies, to every ``.py`` file under ``trainperf/`` except ``workloads/**`` and ``registry.py``
(parsed with :mod:`ast`, so the code is read, not its text):

- a string constant, an f-string's literal text included, names a key when the key stands in it in lower case
  between characters that are not letters or digits (``"resnet"``, ``f"rcps_rnnt.json"``, ``"x ssd y"``; not
  ``"NVMe SSD"``, not ``"roberta"``);
- an identifier (a variable, attribute, function, class, argument, keyword or imported module) names a key when
  one of its ``_``- or ``.``-separated words is the key, in any case (``CLOSED_RESNET_OPT_NAMES``,
  ``bert_train_samples``, ``trainperf.workloads.dlrm``).

Comments and docstrings are prose, not code: they may name a benchmark as an example. Files that are not Python
are data, not code, and are not read: the history module's published results (``history/data/*.csv``), the
generated mini rule files (``rules/mini/*.yaml``), the RCP tables (``rules/rcps/``) and the READMEs.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from trainperf import registry

PACKAGE = Path(registry.__file__).resolve().parent
_KEYS = "|".join(map(re.escape, registry.BENCHMARKS))
_IN_TEXT = re.compile(rf"(?<![A-Za-z0-9])({_KEYS})(?![A-Za-z0-9])")
_IN_NAME = re.compile(rf"(?:^|[._])({_KEYS})(?:$|[._])", re.IGNORECASE)


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            value = first.value if isinstance(first, ast.Expr) else None
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found.add(id(value))
    return found


def _identifier(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return node.name
    if isinstance(node, ast.arg):
        return node.arg
    if isinstance(node, ast.keyword):
        return node.arg
    if isinstance(node, ast.alias):
        return node.asname or node.name
    if isinstance(node, ast.ImportFrom):
        return node.module
    return None


def names_of_benchmarks(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string constant or identifier in ``source`` that names a benchmark key."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings and _IN_TEXT.search(node.value):
                found.append((node.lineno, node.value))
        elif (name := _identifier(node)) and _IN_NAME.search(name):
            found.append((getattr(node, "lineno", 0), name))
    return found


def _checked_files() -> list[Path]:
    files = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not (rel.startswith("workloads/") or rel == "registry.py"):
            files.append(path)
    return files


def test_no_code_outside_the_workloads_names_a_benchmark():
    files = _checked_files()
    assert len(files) > 50 and PACKAGE / "scaling" / "facts.py" in files and PACKAGE / "rules" / "gate.py" in files
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {text[:80]!r}"
        for path in files
        for line, text in names_of_benchmarks(path.read_text(encoding="utf-8"))
    ]
    assert not found, (
        "these name a benchmark key outside trainperf/workloads/ and registry.py; put the fact on the Benchmark or "
        "its BenchmarkSpec (trainperf/spec.py), set it in the workload's __init__.py and read it through the "
        "registry:\n" + "\n".join(found)
    )


@pytest.mark.parametrize(
    "planted",
    [
        'x = "resnet"',
        'if key == "minigo":\n    pass',
        'name = f"rcps_{key}.json" if key != "rnnt" else "rcps_rnnt.json"',
        'unit = "samples" if key in ("bert", "dlrm") else "epochs"',
        "CLOSED_RESNET_OPT_NAMES = ()",
        "def f(*, bert_train_samples=False):\n    return bert_train_samples",
        "from trainperf.workloads.unet3d import data",
        "import trainperf.workloads.ssd",
        'msg = f"{key}: maskrcnn has no such field"',
    ],
)
def test_a_planted_name_is_found(planted):
    assert names_of_benchmarks(planted)


def test_prose_and_other_words_are_not_names():
    source = '''"""A module about resnet and bert (a docstring)."""
# a comment naming dlrm
def f(key):
    """unet3d in a docstring."""
    return ("NVMe SSD", "roberta", "bertha", key, registry.BENCHMARKS[0])
'''
    assert names_of_benchmarks(source) == []


def test_a_name_planted_in_a_real_module_fails_the_check():
    source = (PACKAGE / "report" / "html.py").read_text(encoding="utf-8")
    assert names_of_benchmarks(source) == []
    assert names_of_benchmarks(source + '\nx = "resnet"\n') == [(source.count("\n") + 2, "resnet")]
