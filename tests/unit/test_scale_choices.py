"""A scale's choices are data: each workload looks its scale up in a table (``FLAVOURS[self.spec.scale]``) and
reads named fields of what it found, instead of comparing the scale's name (``if self.spec.scale == "mini"``).

The rule, applied to every ``.py`` file under ``trainperf/workloads/`` (parsed with :mod:`ast`): no comparison
(``==``, ``!=``, ``in``, ``not in``, ``is``, ``is not``) and no ``match`` has a ``scale`` (a name or an attribute,
``spec.scale``, ``self.spec.scale``) as an operand. None is left; one that had to stay would be listed in
``ALLOWED`` with its count and why, and the list can only shrink: a new comparison fails, and so does a removed
one until its entry is updated.
"""

from __future__ import annotations

import ast
from pathlib import Path

from trainperf import registry

WORKLOADS = Path(registry.__file__).resolve().parent / "workloads"
# File (relative to trainperf/workloads/) -> comparisons of the scale left in it.
ALLOWED: dict[str, int] = {}
_OPS = (ast.Eq, ast.NotEq, ast.In, ast.NotIn, ast.Is, ast.IsNot)


def _is_scale(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "scale") or (
        isinstance(node, ast.Attribute) and node.attr == "scale"
    )


def scale_comparisons(source: str) -> list[int]:
    """Lines of ``source`` where a comparison or a ``match`` tests a scale's name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(isinstance(op, _OPS) for op in node.ops):
            if any(_is_scale(n) for n in (node.left, *node.comparators)):
                found.append(node.lineno)
        elif isinstance(node, ast.Match) and _is_scale(node.subject):
            found.append(node.lineno)
    return sorted(found)


def test_the_rule_finds_scale_comparisons_and_passes_table_lookups():
    assert scale_comparisons("if self.spec.scale == 'mini':\n    pass\n") == [1]
    assert scale_comparisons("x = 3 if 'reference' != spec.scale else 13\n") == [1]
    assert scale_comparisons("ok = scale in ('mini',)\nmatch self.spec.scale:\n    case _:\n        pass\n") == [1, 2]
    assert scale_comparisons("flavour = FLAVOURS[self.spec.scale]\nroot = data_dir / spec.scale\n") == []
    assert scale_comparisons("if self.flavour.generated and spec.key == 'ssd':\n    pass\n") == []


def test_workloads_take_their_scale_s_choices_from_tables():
    found = {}
    for path in sorted(WORKLOADS.rglob("*.py")):
        lines = scale_comparisons(path.read_text(encoding="utf-8"))
        if lines:
            found[path.relative_to(WORKLOADS).as_posix()] = lines
    extra = {f: lines for f, lines in found.items() if len(lines) > ALLOWED.get(f, 0)}
    assert not extra, (
        f"scale comparisons (file: lines) {extra}: put the scale's choice in the workload's flavour table "
        "(FLAVOURS[self.spec.scale], as dlrm's or unet3d's) and read its named field"
    )
    fewer = {f: n for f, n in ALLOWED.items() if len(found.get(f, [])) < n}
    assert not fewer, f"fewer scale comparisons than ALLOWED lists in {sorted(fewer)}: lower (or drop) their entries"
