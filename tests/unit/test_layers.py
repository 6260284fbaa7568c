"""trainperf's modules in layers, each importing only its own layer and those below it.

From the bottom:

0. foundation: the errors, file writing, default paths, safe text, seeds, ``dist``, the confined-tool runner,
   node options, tensor-only checkpoints and the manifest check (``data.verified``)
1. contract: ``spec.py`` and ``contract/`` (the Workload ABC, the switches and the closed-rule value types as data);
   torch-free
2. workloads: every benchmark's facts (``__init__.py``) and its workload code
3. registry: the list of keys, and ``data.prepare``, which orders the mini datasets the registry declares
4. records: results, scoring, the system description, rules, the published history and the scaling model
5. harness: runs, suites, the step, the clock, the switches applied
6. commands: the CLI and what only it uses (report, submission, ablation, ``*.cli``, launch, slurm)

Every ``import`` counts, at module level, in a function or under ``TYPE_CHECKING`` (a dependency all the same),
and so do the packages an import runs on the way (``trainperf.data`` for ``trainperf.data.verified``).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import trainperf

ROOT = Path(trainperf.__file__).resolve().parent

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "foundation",
        (
            "trainperf",  # the package itself (its version and code hash)
            "trainperf.errors",
            "trainperf.fileio",
            "trainperf.paths",
            "trainperf.text",
            "trainperf.seeds",
            "trainperf.dist",
            "trainperf.confine",
            "trainperf.nodes",
            "trainperf.checkpoint",
            "trainperf.limits",
            "trainperf.arguments",
            "trainperf.data",  # its __init__ is a docstring
            "trainperf.data.verified",
        ),
    ),
    ("contract", ("trainperf.spec", "trainperf.contract", "trainperf.rounds")),
    ("workloads", ("trainperf.workloads",)),
    ("registry", ("trainperf.registry", "trainperf.data.prepare")),
    (
        "records",
        (
            "trainperf.results",
            "trainperf.run_checks",
            "trainperf.timeline",
            "trainperf.published",
            "trainperf.distinct",
            "trainperf.scoring",
            "trainperf.system",
            "trainperf.host",
            "trainperf.rules",
            "trainperf.history",
            "trainperf.scaling",
        ),
    ),
    ("harness", ("trainperf.harness",)),
    (
        "commands",
        (
            "trainperf.cli",
            "trainperf.cli_run",
            "trainperf.cli_list",
            "trainperf.cli_slurm",
            "trainperf.__main__",
            "trainperf.launch",
            "trainperf.slurm",
            "trainperf.report",
            "trainperf.submission",
            "trainperf.ablation",
            "trainperf.history.cli",
            "trainperf.scaling.cli",
        ),
    ),
)

# (importer, imported) -> why: an import up a layer, allowed only in a function, where it keeps torch out of a
# torch-free path. None today; keep it short.
ALLOWED_UPWARD: dict[tuple[str, str], str] = {}


def layer_of(module: str) -> int | None:
    """The layer of ``module``: that of its longest listed prefix (``trainperf`` itself only by name)."""
    best, best_len = None, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            matches = module == prefix or (prefix != "trainperf" and module.startswith(prefix + "."))
            if matches and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    return best


def module_name(path: Path) -> str:
    parts = ["trainperf", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    rel = Path(*name.split(".")[1:])
    return (ROOT / rel).with_suffix(".py").is_file() or (ROOT / rel / "__init__.py").is_file()


def with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _type_checking_only(tree: ast.Module) -> set[int]:
    """The ids of the nodes under ``if TYPE_CHECKING:`` (imported for annotations, never run)."""
    guarded = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            guarded |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return guarded


def trainperf_imports(path: Path, *, run_only: bool = False) -> list[tuple[str, int]]:
    """(module, line) of every trainperf module that ``path`` imports, anywhere in the file, with their packages.
    ``run_only``: without those under ``if TYPE_CHECKING:``."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, int]] = []
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    skip = _type_checking_only(tree) if run_only else set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # `from trainperf import registry` imports the module trainperf.registry
            targets = [f"{source}.{a.name}" if is_module(f"{source}.{a.name}") else source for a in node.names]
        for target in targets:
            if target == "trainperf" or target.startswith("trainperf."):
                found += [(t, node.lineno) for t in with_parents(target)]
    return found


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def upward_imports() -> list[str]:
    """One line for each import up a layer (its deepest module: ``trainperf.rules.gate``, not also
    ``trainperf.rules``)."""
    found: dict[tuple[Path, int], str] = {}
    for name, path in all_modules().items():
        own = layer_of(name)
        for target, line in trainperf_imports(path):
            theirs = layer_of(target)
            if theirs is not None and own is not None and theirs > own and (name, target) not in ALLOWED_UPWARD:
                if len(target) > len(found.get((path, line), "")):
                    found[path, line] = target
    return [
        f"{path.relative_to(ROOT.parent)}:{line}: {module_name(path)} ({LAYERS[layer_of(module_name(path))][0]}) "
        f"imports {target} ({LAYERS[layer_of(target)][0]})"
        for (path, line), target in sorted(found.items())
    ]


def test_every_module_has_a_layer():
    missing = [name for name in all_modules() if layer_of(name) is None]
    assert not missing, f"modules in no layer (add each to LAYERS in {__file__}): {missing}"


def test_no_module_imports_a_layer_above_its_own():
    problems = upward_imports()
    assert not problems, "imports up a layer (move the definition down, or the import up):\n" + "\n".join(problems)


def test_no_import_circle():
    circle = import_circle()
    assert circle is None, "import circle: " + " -> ".join(circle or [])


def import_circle() -> list[str] | None:
    """An import circle among the imports that run (an annotation's import under ``TYPE_CHECKING`` makes none),
    as the modules along it, or None."""
    graph = {n: {t for t, _ in trainperf_imports(p, run_only=True) if t != n} for n, p in all_modules().items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt] if nxt in path else [node, nxt]
            if nxt not in state and (circle := visit(nxt, [*path, nxt])):
                return circle
        state[node] = 2
        return None

    for name in graph:
        if name not in state and (circle := visit(name, [name])):
            return circle
    return None


@pytest.fixture
def copy_of_package(tmp_path, monkeypatch):
    """A copy of trainperf's modules (``.py`` files only) that the checks above read instead of the package."""
    root = tmp_path / "trainperf"
    shutil.copytree(
        ROOT,
        root,
        ignore=lambda d, names: [
            n for n in names if n == "__pycache__" or not (n.endswith(".py") or Path(d, n).is_dir())
        ],
    )
    monkeypatch.setattr(sys.modules[__name__], "ROOT", root)
    return root


def plant(path: Path, code: str) -> int:
    """Append ``code`` to ``path``; the line number of its first line."""
    text = path.read_text(encoding="utf-8")
    path.write_text(text + "\n" + code + "\n", encoding="utf-8")
    return text.count("\n") + 2


@pytest.mark.parametrize(
    ("file", "code", "target"),
    [
        ("spec.py", "from trainperf.harness import runner", "trainperf.harness.runner (harness)"),
        ("spec.py", "def f():\n    from trainperf.cli import main", "trainperf.cli (commands)"),
        ("spec.py", "if TYPE_CHECKING:\n    import trainperf.report.html", "trainperf.report.html (commands)"),
        ("workloads/resnet/data.py", "from ...harness import steps", "trainperf.harness.steps (harness)"),
        ("errors.py", "from trainperf import registry", "trainperf.registry (registry)"),
    ],
)
def test_a_planted_upward_import_fails_the_check(copy_of_package, file, code, target):
    assert upward_imports() == []
    line = plant(copy_of_package / file, code) + [("import " in c) for c in code.split("\n")].index(True)
    problems = upward_imports()
    assert len(problems) == 1 and problems[0].startswith(f"trainperf/{file}:{line}: ")
    assert problems[0].endswith(f"imports {target}")


def test_a_planted_circle_fails_the_check(copy_of_package):
    assert import_circle() is None
    plant(copy_of_package / "errors.py", "from trainperf import fileio")  # fileio imports errors
    assert set(import_circle() or []) == {"trainperf.errors", "trainperf.fileio"}


def test_the_contract_and_every_benchmarks_facts_load_without_torch_or_an_upper_layer():
    """In a fresh interpreter: the contract, then each workload's ``__init__`` (its facts), one at a time; after
    each, neither torch nor a trainperf module of a layer above it has been imported."""
    contract = [m for m in all_modules() if layer_of(m) == 1]
    facts = sorted(m for m in all_modules() if m.count(".") == 2 and m.startswith("trainperf.workloads."))
    facts.remove("trainperf.workloads.common")
    from trainperf import registry

    assert len(facts) == len(registry.BENCHMARKS), facts  # every benchmark of every round that trainperf implements
    code = (
        "import importlib, sys\n"
        "for name in sys.argv[1:]:\n"
        "    importlib.import_module(name)\n"
        "    print(name, *sorted(m for m in sys.modules if m == 'torch' or m.startswith('trainperf.')))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, *contract, *facts], capture_output=True, text=True, timeout=120, check=False
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == len(contract) + len(facts), r.stdout
    for line in lines:
        name, *loaded = line.split()
        assert "torch" not in loaded, f"importing {name} imported torch"
        ceiling = layer_of(name)
        above = [m for m in loaded if (layer_of(m) or 0) > ceiling]
        assert not above, f"importing {name} (layer {ceiling}) imported {above}"
