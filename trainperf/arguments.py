"""The numbers of a command line, checked while it is parsed: before anything is read, computed or written.

Each option that takes a number names its range here (``type=whole_number(0, SEED_MAX)``); a value outside it,
or one that is not a number of that kind, stops the command with argparse's error (exit 2, no traceback):
``argument --seed: needs a whole number, at least 0 and at most 9,223,372,036,854,765,807, not '-5'``.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable

# A seed is a 63-bit whole number: numpy, torch and the MLLOG `seed` value all take it, and `run --seed S` adds the
# run's index (at most MAX_RUNS) to it.
SEED_MAX = 2**63 - 1
MAX_RUNS = 10_000  # runs of one benchmark in one suite (MLPerf asks 5 to 40)
_WHOLE = re.compile(r"[+-]?[0-9]{1,30}")  # 30 digits: far past every range here, far below int()'s limit


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else f"{text[:20]}...{text[-8:]}")


def whole_number(low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type``: a whole number written in the digits 0-9, from ``low`` to ``high``."""

    def parse(text: str) -> int:
        value = int(text) if _WHOLE.fullmatch(text.strip()) else None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"needs a whole number, at least {low:,} and at most {high:,}, not {_shown(text)}"
            )
        return value

    parse.__name__ = "whole number"  # argparse names the type in some messages
    return parse


def real_number(low: float, high: float, *, above_low: bool = False) -> Callable[[str], float]:
    """An argparse ``type``: a finite number from ``low`` (excluded with ``above_low``) to ``high``."""

    def parse(text: str) -> float:
        try:
            value = float(text) if len(text) <= 64 else math.nan
        except ValueError:
            value = math.nan
        fits = math.isfinite(value) and (low < value if above_low else low <= value) and value <= high
        if not fits:
            frm = f"above {low:g}" if above_low else f"at least {low:g}"
            raise argparse.ArgumentTypeError(f"needs a finite number, {frm} and at most {high:g}, not {_shown(text)}")
        return value

    parse.__name__ = "number"
    return parse


def add_force_argument(parser: argparse.ArgumentParser) -> None:
    """``--force``: the one option that lets a command replace an existing file that trainperf did not write."""
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace an existing output file even when trainperf did not write it (never a link, a folder or an "
        "input)",
    )


__all__ = ["add_force_argument", "MAX_RUNS", "SEED_MAX", "real_number", "whole_number"]
