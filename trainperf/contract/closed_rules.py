"""The closed division's rule value types: which values of one recipe key a closed submission may use.

A benchmark's facts list, per scale, the recipe keys a closed submission may change and how (``Tunable``,
``OneOf``, ``PowerOfTwoTimes``, ``MultipleOf``, ``IntegerAtLeast``, ``AtLeast``, and ``FixedBelow``,
``MultipleOrFractionBelow`` and ``ScaledByBatch``, whose allowed values depend on another key of the recipe).
Each is a frozen dataclass that says whether a value is allowed and describes the allowed values; checking a
run's overrides against them is :func:`trainperf.rules.closed.check_overrides`. Nothing here evaluates text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


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
class AtLeast:
    """Any number >= ``minimum`` of the recipe's kind: a whole number where the default is one (MLPerf v2.0's
    "arbitrary constant" and "unconstrained" for a warm-up length, a warm-up or decay factor, a momentum or a
    weight decay, where 0 is a value the hyperparameter can take and a negative one is not)."""

    minimum: float = 0.0

    def allows(self, value: Any, default: Any) -> bool:
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            return False
        whole = isinstance(default, int) and not isinstance(default, bool)
        return value >= self.minimum and (not whole or value == int(value))

    def describe(self, default: Any) -> str:
        kind = "whole number" if isinstance(default, int) and not isinstance(default, bool) else "number"
        return f"any {kind} >= {self.minimum:g}"


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


def is_whole(x: float) -> bool:
    """Whole to within 1e-5, as the MLPerf checker's ``is_integer`` (mlperf_logging/compliance_checker/
    mlp_compliance.py:18-19), so that a rate such as 0.14 / 0.02 = 7.000000000000001 counts as 7."""
    return abs(round(x) - x) < 1e-5


def _positive_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


@dataclass(frozen=True)
class MultipleOf:
    """``base * K`` for a whole K >= 1 (a positive integer multiple of ``base``)."""

    base: float

    def allows(self, value: Any, default: Any) -> bool:
        return _positive_number(value) and is_whole(value / self.base) and round(value / self.base) >= 1

    def describe(self, default: Any) -> str:
        return f"an integer multiple of {self.base:g} (e.g. {self.base:g}, {2 * self.base:g}, {3 * self.base:g})"


@dataclass(frozen=True)
class MultipleOrFractionBelow:
    """``base * K`` for a whole K >= 1; while the recipe's ``key`` is below ``threshold``, also ``base / K``
    (MLPerf v2.0 Mask R-CNN's learning rate, training_rules.adoc: "0.02 * K for any integer K. For
    global_batch_size < 16, 0.02 / K for any integer K is also allowed"; closed_maskrcnn.yaml: ``is_integer(v /
    0.02) or (s['global_batch_size'] < 16 and is_integer(0.02 / v))``). K >= 1 both ways: the rules' K = 0 or
    K < 0 gives a rate of zero or below, which does not train, and the yaml's ``0.02 / v`` of any rate over 2000
    is within its tolerance of 0."""

    base: float
    key: str
    threshold: float

    def allows_in(self, value: Any, recipe: Mapping[str, Any]) -> bool:
        if MultipleOf(self.base).allows(value, None):
            return True
        if not _positive_number(value) or recipe[self.key] >= self.threshold:
            return False
        return is_whole(self.base / value) and round(self.base / value) >= 1

    def allows(self, value: Any, default: Any) -> bool:  # without the rest of the recipe: the multiples only
        return MultipleOf(self.base).allows(value, default)

    def describe(self, default: Any) -> str:
        b = self.base
        return (
            f"{b:g} * K for an integer K >= 1 (e.g. {b:g}, {2 * b:g}, {3 * b:g}); while {self.key} < "
            f"{self.threshold:g}, also {b:g} / K (e.g. {b / 2:g}, {b / 4:g}, {b / 8:g})"
        )

    def describe_in(self, recipe: Mapping[str, Any]) -> str:
        b, batch = self.base, recipe[self.key]
        if batch < self.threshold:
            return self.describe(None)
        return (
            f"{b:g} * K for an integer K >= 1 (e.g. {b:g}, {2 * b:g}, {3 * b:g}) at {self.key}={batch}; {b:g} / K "
            f"(e.g. {b / 8:g}) only while {self.key} < {self.threshold:g}"
        )


@dataclass(frozen=True)
class ScaledByBatch:
    """Steps that scale inversely with the batch: ``base * (1 + K / 10) * reference_batch / batch`` for one integer
    K > -10 shared by all steps, where ``batch`` is the recipe's ``key`` (MLPerf Mask R-CNN's decay steps,
    training_rules.adoc: "(60000, 80000) * (1 + K / 10) * 16 / global_batch_size where K is integer"). A step
    the formula makes fractional may be either neighbouring whole step. An empty value means "derived from
    the batch with K = 0" (:meth:`steps`) and is always allowed."""

    base: tuple[int, ...]
    reference_batch: int
    key: str = "global_batch_size"

    def exact(self, batch: int, k: int) -> list[float]:
        return [b * (1 + k / 10) * self.reference_batch / batch for b in self.base]

    def steps(self, batch: int, k: int = 0) -> tuple[int, ...]:
        """The whole steps of the formula (each rounded to the nearest)."""
        return tuple(max(1, round(s)) for s in self.exact(batch, k))

    def k_of(self, value: Any, batch: Any) -> int | None:
        """The K that gives ``value`` at ``batch``, or None when no integer K does."""
        if not isinstance(value, list | tuple) or len(value) != len(self.base) or isinstance(batch, bool):
            return None
        if not all(isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for v in value):
            return None
        if not isinstance(batch, int | float) or batch <= 0:
            return None
        k = round(10 * (value[0] * batch / (self.base[0] * self.reference_batch) - 1))
        if k <= -10:
            return None
        exact = self.exact(batch, k)
        return k if all(abs(v - e) < 1 for v, e in zip(value, exact, strict=True)) else None

    def allows_in(self, value: Any, recipe: Mapping[str, Any]) -> bool:
        if isinstance(value, list | tuple) and len(value) == 0:
            return True
        return self.k_of(value, recipe[self.key]) is not None

    def allows(self, value: Any, default: Any) -> bool:  # without the rest of the recipe: only the derived default
        return isinstance(value, list | tuple) and len(value) == 0

    def describe_in(self, recipe: Mapping[str, Any]) -> str:
        batch = recipe[self.key]
        base = ", ".join(str(b) for b in self.base)
        examples = "; ".join(f"K={k}: {list(self.steps(batch, k))}" for k in (0, 1, -1))
        return (
            f"({base}) * (1 + K/10) * {self.reference_batch} / {self.key} for an integer K, at {self.key}={batch}: "
            f"{examples}, ... (or [] to derive them with K=0)"
        )

    def describe(self, default: Any) -> str:
        base = ", ".join(str(b) for b in self.base)
        return f"({base}) * (1 + K/10) * {self.reference_batch} / {self.key} for an integer K"
