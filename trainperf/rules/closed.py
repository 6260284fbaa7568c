"""Closed-division hyperparameter rules, checked before a run starts.

A benchmark's facts list, per scale, the recipe keys a closed submission may change and how (the rule value
types of :mod:`trainperf.contract.closed_rules`); every other recipe key is fixed at the recipe's value. Open
division: any recipe key may change, and the changes are logged. Nothing here evaluates text.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from trainperf import limits
from trainperf.contract.closed_rules import Rule
from trainperf.errors import RuleError, UsageError


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs from the command line; VALUE is read as JSON (number, bool, list, object) or else
    kept as text. Whether the value fits the recipe is checked against the default (``Recipe.with_overrides``)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set {item!r}: expected KEY=VALUE, e.g. --set opt_base_learning_rate=0.003")
        try:
            value = limits.loads(raw)
        except limits.OverLimit as e:
            raise UsageError(f"--set {key.strip()}=...: the value {e}; give a plain number or text") from None
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
        elif hasattr(rule, "allows_in"):
            continue  # a rule that reads another key (FixedBelow, ScaledByBatch): checked below, on the whole recipe
        elif not rule.allows(value, default):
            raise RuleError(
                f"closed division, rule '{benchmark}/{scale}/{key}': you gave {key}={value!r}; allowed: "
                f"{rule.describe(default)} (use --division open for other values)"
            )
    if division != "closed":
        return
    for key, rule in rules.items():  # rules that read other keys: checked whenever either key changed
        if hasattr(rule, "allows_in") and key in final and (key in overrides or rule.key in overrides):
            if not rule.allows_in(final[key], final):
                describe = rule.describe_in(final) if hasattr(rule, "describe_in") else rule.describe(recipe[key])
                raise RuleError(
                    f"closed division, rule '{benchmark}/{scale}/{key}': {key}={final[key]!r} with "
                    f"{rule.key}={final[rule.key]!r}; allowed: {describe} "
                    "(use --division open for other values)"
                )
