"""Closed-division hyperparameter rules, as data, checked before a run starts.

A benchmark's workload lists, per scale, the recipe keys a closed submission may change and how
(``Tunable``, ``OneOf``, ``PowerOfTwoTimes``, ``MultipleOf``, ``IntegerAtLeast``, and ``FixedBelow``, whose
allowed values depend on another key of the recipe); every other recipe key is fixed at the recipe's value. Open division: any recipe key may change, and the changes are logged. Nothing here
evaluates text.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainperf.errors import RuleError, UsageError


@dataclass(frozen=True)
class Tunable:
    """Any value of the recipe's type (positive for numbers)."""

    def allows(self, value: Any, default: Any) -> bool:
        if isinstance(default, bool) or isinstance(value, bool):
            return isinstance(value, bool)
        if isinstance(default, (int, float)):
            return isinstance(value, (int, float)) and value > 0 and (isinstance(default, float) or value == int(value))
        if isinstance(default, (list, tuple)):  # a list of numbers (boundaries, rates, decay steps)
            return isinstance(value, (list, tuple)) and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in value
            )
        return isinstance(value, type(default))

    def describe(self, default: Any) -> str:
        if isinstance(default, (list, tuple)):
            return "any list of positive numbers"
        return "any positive number" if isinstance(default, (int, float)) else f"any {type(default).__name__}"


@dataclass(frozen=True)
class OneOf:
    values: tuple[Any, ...]

    def allows(self, value: Any, default: Any) -> bool:
        return value in self.values

    def describe(self, default: Any) -> str:
        return "one of " + ", ".join(repr(v) for v in self.values)


@dataclass(frozen=True)
class PowerOfTwoTimes:
    """``base * 2**N`` for an integer N (MLPerf's LARS weight decay rule)."""

    base: float

    def allows(self, value: Any, default: Any) -> bool:
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            return False
        n = math.log2(value / self.base)
        return abs(n - round(n)) < 1e-9

    def describe(self, default: Any) -> str:
        return f"{self.base:g} * 2^N for an integer N (e.g. {self.base / 2:g}, {self.base:g}, {self.base * 2:g})"


@dataclass(frozen=True)
class IntegerAtLeast:
    """A whole number >= ``minimum`` (MLPerf RetinaNet's warm-up epochs: "integer >= 0")."""

    minimum: int

    def allows(self, value: Any, default: Any) -> bool:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return False
        return value == int(value) and value >= self.minimum

    def describe(self, default: Any) -> str:
        return f"a whole number >= {self.minimum}"


@dataclass(frozen=True)
class FixedBelow:
    """Fixed at ``value`` while the recipe's ``key`` is below ``threshold``; any positive number from it on
    (MLPerf ResNet's LARS momentum: "0.9 for batch<32k, otherwise arbitrary constant")."""

    value: float
    key: str
    threshold: float

    def allows_in(self, value: Any, recipe: Mapping[str, Any]) -> bool:
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            return False
        return recipe[self.key] >= self.threshold or value == self.value

    def allows(self, value: Any, default: Any) -> bool:  # without the rest of the recipe: the strict case
        return value == self.value

    def describe(self, default: Any) -> str:
        return f"{self.value:g} while {self.key} < {self.threshold:g}, any positive number from {self.threshold:g} on"


Rule = Tunable | OneOf | PowerOfTwoTimes


@dataclass(frozen=True)
class MultipleOf:
    """An integer multiple of ``base`` (MLPerf Mask R-CNN's learning rate: k * 0.02)."""

    base: float

    def allows(self, value: Any, default: Any) -> bool:
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            return False
        k = value / self.base
        return abs(k - round(k)) < 1e-9 and round(k) >= 1

    def describe(self, default: Any) -> str:
        return f"an integer multiple of {self.base:g} (e.g. {self.base:g}, {2 * self.base:g}, {3 * self.base:g})"


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs from the command line; VALUE is read as JSON (number, bool, list, object) or else
    kept as text. Whether the value fits the recipe is checked against the default (``Recipe.with_overrides``)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set {item!r}: expected KEY=VALUE, e.g. --set opt_base_learning_rate=0.003")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        if isinstance(value, float) and not math.isfinite(value):
            raise UsageError(f"--set {item!r}: the value must be a finite number")
        if value is None:
            raise UsageError(f"--set {item!r}: the value must be a number, true/false, text, a list or an object")
        out[key.strip()] = value
    return out


def check_overrides(
    benchmark: str,
    scale: str,
    division: str,
    recipe: Mapping[str, Any],
    rules: Mapping[str, Rule],
    overrides: Mapping[str, Any],
) -> None:
    """Raise before any run when an override is unknown or breaks a closed-division rule."""
    final = {**recipe, **overrides}
    for key, value in overrides.items():
        if key not in recipe:
            raise UsageError(
                f"--set {key}: {benchmark} ({scale}) has no hyperparameter {key!r}; its recipe keys are "
                + ", ".join(sorted(recipe))
            )
        if division != "closed":
            continue
        default = recipe[key]
        rule = rules.get(key)
        if rule is None:
            if value != default:
                raise RuleError(
                    f"closed division, rule '{benchmark}/{scale}/{key}': {key} is fixed at {default!r}; you gave "
                    f"{value!r}. Allowed: {default!r} only (use --division open to change it)"
                )
        elif isinstance(rule, FixedBelow):
            continue  # checked below, against the whole recipe
        elif not rule.allows(value, default):
            raise RuleError(
                f"closed division, rule '{benchmark}/{scale}/{key}': you gave {key}={value!r}; allowed: "
                f"{rule.describe(default)} (use --division open for other values)"
            )
    if division != "closed":
        return
    for key, rule in rules.items():  # rules that read other keys: checked whenever either key changed
        if isinstance(rule, FixedBelow) and key in final and (key in overrides or rule.key in overrides):
            if not rule.allows_in(final[key], final):
                raise RuleError(
                    f"closed division, rule '{benchmark}/{scale}/{key}': {key}={final[key]!r} with "
                    f"{rule.key}={final[rule.key]!r}; allowed: {rule.describe(recipe[key])} "
                    "(use --division open for other values)"
                )
