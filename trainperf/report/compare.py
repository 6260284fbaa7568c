"""`trainperf compare A B`: is A faster than B, with evidence.

A speed claim in this field is a claim about two distributions of run times, not about two numbers read by
eye: each benchmark's runs on side A against its runs on side B. For every benchmark both sides ran, this
module gives

- the two sets of run minutes (a run that did not reach its target counts as infinitely slow, as olympic
  scoring counts it),
- the ratio of their olympic scores (A / B: below 1 means A is faster) with a percentile bootstrap
  confidence interval (runs resampled with replacement on each side, each resample olympic-scored),
- a two-sided Mann-Whitney U test of the runs (scipy; exact for small samples without ties) and its p-value,
- a plain verdict, and when there is no evidence, about how many runs each side would need to show a 5 %
  difference at the spread measured (the normal approximation of a two-sample test, divided by the
  Mann-Whitney test's asymptotic relative efficiency 3/pi).

Sides are trainperf output folders, MLCommons submission folders or ``summary.json`` files (their folder is
read), read by :func:`trainperf.report.collect.collect`, so a run counts exactly as the report counts it.
Two sides of another scale, target or trainperf code are refused unless the caller allows that difference.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from trainperf.arguments import SEED_MAX, real_number, whole_number
from trainperf.errors import UsageError

if TYPE_CHECKING:
    from trainperf.report.collect import BenchmarkResults, SystemResults

DIFFERENCES = ("round", "scale", "target", "code")  # what --allow-different can name
# Bootstrap resamples at most: each holds the runs' indices (40 runs of unet3d: 320 bytes a side), so 100,000 take
# about 64 MB; 10^9 would take 640 GB.
MAX_RESAMPLES = 100_000
_FRACTION = real_number(0, 1, above_low=True)  # --alpha, --confidence (1 itself is refused by cmd_compare)
DETECT = 0.05  # the relative difference the "runs needed" estimate is for
POWER_Z = 0.8416212335729143  # the standard normal's 80th percentile: the power the estimate is for
MW_EFFICIENCY = 3 / math.pi  # Mann-Whitney U against the t-test on normal data (asymptotic relative efficiency)


@dataclass(frozen=True, kw_only=True)
class Side:
    label: str
    runs: tuple[float, ...]  # minutes per run; math.inf for a run that did not reach its target
    score: float | None  # the olympic mean of all its runs (inf when too many did not converge)
    scale: str
    target: str
    code: tuple[str, ...]  # the trainperf_code values its runs logged ("" where a run logged none)
    round: str = ""  # the MLPerf round of its logs ("v2.0", "v6.1"; "" where none fits)

    @property
    def successes(self) -> int:
        return sum(math.isfinite(m) for m in self.runs)


@dataclass(frozen=True, kw_only=True)
class Comparison:
    benchmark: str
    a: Side
    b: Side
    ratio: float | None  # score A / score B
    ci: tuple[float, float] | None  # the bootstrap interval of the ratio
    confidence: float
    p_value: float | None
    alpha: float
    verdict: str
    runs_needed: int | None  # about how many runs per side would show a DETECT difference; None when shown
    differences: tuple[str, ...]  # the allowed differences between the sides (scale, target, code)


def olympic(values: Sequence[float], dropped: int) -> float:
    """The mean after dropping ``dropped`` of the fastest and of the slowest (fewer when there are few runs, so
    that one run is always kept); ``inf`` when a kept run did not converge."""
    drop = min(dropped, (len(values) - 1) // 2)
    kept = sorted(values)[drop : len(values) - drop]
    return math.inf if any(math.isinf(v) for v in kept) else statistics.fmean(kept)


def bootstrap_ratio(
    a: Sequence[float], b: Sequence[float], *, dropped: int, confidence: float, resamples: int, seed: int
) -> tuple[float, float] | None:
    """The percentile bootstrap interval of olympic(A) / olympic(B); None when either side has one run (nothing
    to resample) or the interval's ends are not finite (too many failed runs in the resamples)."""
    import numpy as np

    if len(a) < 2 or len(b) < 2:
        return None
    rng = np.random.default_rng(seed)
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ia = rng.integers(0, len(xa), size=(resamples, len(xa)))
    ib = rng.integers(0, len(xb), size=(resamples, len(xb)))
    ratios = np.array([olympic(xa[i], dropped) / olympic(xb[j], dropped) for i, j in zip(ia, ib, strict=True)])
    with np.errstate(invalid="ignore"):
        lo, hi = np.quantile(ratios, [(1 - confidence) / 2, (1 + confidence) / 2])
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    return float(lo), float(hi)


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float | None:
    """The two-sided Mann-Whitney U test's p-value (scipy chooses the exact test for small samples without
    ties); None when a side is empty. Failed runs (inf) rank as the slowest."""
    from scipy.stats import mannwhitneyu

    if not a or not b:
        return None
    big = max((v for v in (*a, *b) if math.isfinite(v)), default=1.0) * 10 + 1  # inf ranks last; scipy wants finite
    fa = [v if math.isfinite(v) else big for v in a]
    fb = [v if math.isfinite(v) else big for v in b]
    if fa + fb == [fa[0]] * (len(fa) + len(fb)):
        return 1.0  # every run the same: no difference to find (scipy warns and answers nan)
    return float(mannwhitneyu(fa, fb, alternative="two-sided").pvalue)


def runs_needed(a: Sequence[float], b: Sequence[float], *, alpha: float, detect: float = DETECT) -> int | None:
    """About how many runs per side a two-sided test at ``alpha`` needs to show a relative difference of
    ``detect`` with 80 % power, at the runs' pooled coefficient of variation; None without two converged runs a
    side."""
    from scipy.stats import norm

    fa, fb = [v for v in a if math.isfinite(v)], [v for v in b if math.isfinite(v)]
    if len(fa) < 2 or len(fb) < 2:
        return None
    cv = math.sqrt(
        (statistics.variance(fa) / statistics.fmean(fa) ** 2 + statistics.variance(fb) / statistics.fmean(fb) ** 2) / 2
    )
    z = norm.ppf(1 - alpha / 2) + POWER_Z
    return max(2, math.ceil(2 * (z * cv / detect) ** 2 / MW_EFFICIENCY))


def compare_sides(
    benchmark: str,
    a: Side,
    b: Side,
    *,
    dropped: int,
    alpha: float = 0.05,
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
    differences: tuple[str, ...] = (),
) -> Comparison:
    """Compare one benchmark's runs on two sides (see the module's docstring)."""
    ratio = None
    if a.score is not None and b.score is not None and math.isfinite(a.score) and math.isfinite(b.score):
        ratio = a.score / b.score
    ci = bootstrap_ratio(a.runs, b.runs, dropped=dropped, confidence=confidence, resamples=resamples, seed=seed)
    p = mann_whitney_p(a.runs, b.runs)
    needed = None
    runs = f"{len(a.runs)} run{'s' * (len(a.runs) != 1)} of {a.label} and {len(b.runs)} of {b.label}"
    if p is not None and p < alpha and ratio is not None and ratio != 1:
        faster, slower = (a.label, b.label) if ratio < 1 else (b.label, a.label)
        verdict = f"{faster} faster than {slower}, p = {p:.3g} ({runs})"
    else:
        needed = runs_needed(a.runs, b.runs, alpha=alpha)
        verdict = f"no evidence of a difference with {runs}" + (f", p = {p:.3g}" if p is not None else "")
        if needed is not None:
            verdict += f": about {needed} runs each would show a {DETECT:.0%} difference at this spread"
    return Comparison(
        benchmark=benchmark,
        a=a,
        b=b,
        ratio=ratio,
        ci=ci,
        confidence=confidence,
        p_value=p,
        alpha=alpha,
        verdict=verdict,
        runs_needed=needed,
        differences=differences,
    )


def _codes(paths: Sequence[Path]) -> tuple[str, ...]:
    from trainperf.results import first_values, read_mllog

    return tuple(str(first_values(read_mllog(p)).get("trainperf_code") or "") for p in paths)


def read_sides(path: Path, system_name: str | None = None, *, label: str = "") -> dict[str, Side]:
    """Every benchmark of one side (one folder, or one summary.json's folder), by benchmark key. A folder with
    several systems (a submission package) needs ``system_name``: a comparison is between two systems."""
    from trainperf.report.collect import collect

    folder = path.parent if path.is_file() and path.suffix == ".json" else path
    systems = collect([folder])
    names = ", ".join(s.name for s in systems)
    if system_name is not None:
        systems = [s for s in systems if s.name == system_name]
        if len(systems) != 1:
            raise UsageError(f"{path} has {len(systems) or 'no'} system named {system_name!r}; its systems: {names}")
    if len(systems) > 1:
        raise UsageError(f"{path} holds {len(systems)} systems ({names}): name one with --system-a / --system-b")
    [system] = systems
    return {bench.benchmark: side_of(bench, label or str(path)) for bench in system.benchmarks}


def side_of(bench: BenchmarkResults, label: str) -> Side:
    """One benchmark's runs of one system, as read by :func:`trainperf.report.collect.collect`."""
    minutes = [r.minutes if r.success else math.inf for r in bench.runs]
    return Side(
        label=label,
        runs=tuple(minutes),
        score=olympic(minutes, bench.runs_dropped),
        scale=bench.scale,
        target=bench.target_text,
        code=_codes([r.path for r in bench.runs]),
        round=bench.round,
    )


def compare_systems(a: SystemResults, b: SystemResults, *, resamples: int = 10_000) -> list[Comparison]:
    """The report's comparison of its two systems: every benchmark both ran in the same round at the same scale and
    target (the rest do not compare, and the report does not pretend they do); a code difference is named, not
    refused."""
    out = []
    theirs = {(x.benchmark, x.round, x.scale, x.target_text): x for x in b.benchmarks}
    for bench in a.benchmarks:
        other = theirs.get((bench.benchmark, bench.round, bench.scale, bench.target_text))
        if other is None or not bench.runs or not other.runs:
            continue
        x, y = side_of(bench, a.label), side_of(other, b.label)
        differences = ("code",) if set(x.code) != set(y.code) else ()
        out.append(
            compare_sides(
                bench.benchmark, x, y, dropped=bench.runs_dropped, resamples=resamples, differences=differences
            )
        )
    return out


def _dropped(key: str, scale: str) -> int:
    from trainperf import registry
    from trainperf.errors import TrainperfError

    try:
        return registry.get_spec(key, scale).runs_dropped
    except TrainperfError:
        return 1


def compare_paths(
    a: Path,
    b: Path,
    *,
    benchmarks: Sequence[str] = (),
    systems: tuple[str | None, str | None] = (None, None),
    allow: Sequence[str] = (),
    alpha: float = 0.05,
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
) -> list[Comparison]:
    """Compare every benchmark both sides ran (or those named), refusing sides that differ in scale, target
    or code unless ``allow`` names the difference."""
    sa, sb = read_sides(a, systems[0], label="A"), read_sides(b, systems[1], label="B")
    keys = list(benchmarks) or [k for k in sa if k in sb]
    if not keys:
        raise UsageError(f"{a} ({', '.join(sa)}) and {b} ({', '.join(sb)}) have no benchmark in common to compare")
    out = []
    for key in keys:
        missing = [str(p) for p, s in ((a, sa), (b, sb)) if key not in s]
        if missing:
            raise UsageError(f"{' and '.join(missing)} has no {key} runs: name a benchmark both sides ran")
        x, y = sa[key], sb[key]
        found = []
        if x.round != y.round:  # one benchmark under two rounds' rules (bert of v2.0 and of v2.1, say)
            found.append(("round", f"{x.round or 'no round'} against {y.round or 'no round'}"))
        if x.scale != y.scale:
            found.append(("scale", f"{x.scale} against {y.scale}"))
        if x.target != y.target:
            found.append(("target", f"{x.target!r} against {y.target!r}"))
        if set(x.code) != set(y.code):
            found.append(
                ("code", f"trainperf code {', '.join(sorted(set(x.code)))} against {', '.join(sorted(set(y.code)))}")
            )
        refused = [f"{what} ({text})" for what, text in found if what not in allow]
        if refused:
            raise UsageError(
                f"{key}: the two sides differ in {'; '.join(refused)}: their times do not compare as they are; "
                f"to compare them anyway, say so with --allow-different {','.join(w for w, _ in found)}"
            )
        out.append(
            compare_sides(
                key,
                x,
                y,
                dropped=_dropped(key, x.scale),
                alpha=alpha,
                confidence=confidence,
                resamples=resamples,
                seed=seed,
                differences=tuple(w for w, _ in found),
            )
        )
    return out


def _jsonable(x: object) -> object:
    """JSON has no infinity: a run that did not converge is written as null minutes."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    return x


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "–" if x is None else ("inf" if math.isinf(x) else format(x, spec))


def cmd_compare(args: argparse.Namespace) -> int:
    allow = tuple(w.strip() for w in (args.allow_different or "").split(",") if w.strip())
    bad = [w for w in allow if w not in DIFFERENCES]
    if bad:
        raise UsageError(f"--allow-different {','.join(bad)}: name any of {', '.join(DIFFERENCES)}")
    if not 0 < args.alpha < 1 or not 0 < args.confidence < 1:
        raise UsageError("--alpha and --confidence are fractions between 0 and 1, such as 0.05 and 0.95")
    if args.resamples < 100:
        raise UsageError(f"--resamples {args.resamples}: at least 100 resamples make an interval")
    results = compare_paths(
        args.a,
        args.b,
        benchmarks=args.benchmark or (),
        systems=(args.system_a, args.system_b),
        allow=allow,
        alpha=args.alpha,
        confidence=args.confidence,
        resamples=args.resamples,
        seed=args.seed,
    )
    if args.json:
        print(json.dumps(_jsonable([asdict(c) for c in results]), indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    names = [
        f"{path}" + (f" (system {system})" if system else "")
        for path, system in ((args.a, args.system_a), (args.b, args.system_b))
    ]
    table = Table(title=Text(f"A = {names[0]}   B = {names[1]}"))
    for name, justify in [
        ("round", "left"),
        ("benchmark", "left"),
        ("runs A", "right"),
        ("runs B", "right"),
        ("score A", "right"),
    ]:
        table.add_column(name, justify=justify)
    for name in ("score B", "A / B", f"{args.confidence:.0%} interval", "p"):
        table.add_column(name, justify="right")
    for c in sorted(results, key=lambda c: c.a.round):  # round by round, as the report groups them
        table.add_row(
            Text(c.a.round if c.a.round == c.b.round else f"{c.a.round or '–'} / {c.b.round or '–'}"),
            *map(Text, (c.benchmark, f"{c.a.successes}/{len(c.a.runs)}", f"{c.b.successes}/{len(c.b.runs)}")),
            *map(Text, (_fmt(c.a.score), _fmt(c.b.score), _fmt(c.ratio))),
            Text("–" if c.ci is None else f"{c.ci[0]:.3f}–{c.ci[1]:.3f}"),
            Text(_fmt(c.p_value, ".3g")),
        )
    from trainperf.report.table import for_output

    console = for_output(Console())
    console.print(table)
    for c in results:
        allowed = f" (allowed differences: {', '.join(c.differences)})" if c.differences else ""
        console.print(Text(f"{c.benchmark}: {c.verdict}{allowed}"))
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "compare",
        help="is A faster than B? each benchmark's runs compared, with a confidence interval and a p-value",
        description="Compare the runs of two result folders (trainperf output folders, MLCommons submission "
        "folders, or summary.json files), benchmark by benchmark: the ratio of the olympic scores A / B with a "
        "bootstrap confidence interval, a two-sided Mann-Whitney U test of the run times with its p-value, and "
        "a verdict. With few runs and no evidence it says about how many runs would show a 5 %% difference. "
        "Rows come round by round (v2.0, v6.1). Sides of another round, scale, target or trainperf code are refused "
        "unless --allow-different names it.",
    )
    p.add_argument("a", type=Path, metavar="A", help="the first result folder (or its summary.json)")
    p.add_argument("b", type=Path, metavar="B", help="the second result folder (or its summary.json)")
    p.add_argument(
        "--benchmark", action="append", metavar="KEY", help="compare only this benchmark (repeatable; default: all)"
    )
    p.add_argument("--system-a", metavar="NAME", help="the system of A, when A is a package of several systems")
    p.add_argument("--system-b", metavar="NAME", help="the system of B, when B is a package of several systems")
    p.add_argument(
        "--allow-different",
        metavar="WHAT",
        default="",
        help="compare anyway when the sides differ in these, comma-separated: round, scale, target, code",
    )
    p.add_argument("--alpha", type=_FRACTION, default=0.05, help="the test's significance level (default 0.05)")
    p.add_argument("--confidence", type=_FRACTION, default=0.95, help="the interval's confidence (default 0.95)")
    p.add_argument(
        "--resamples",
        type=whole_number(100, MAX_RESAMPLES),
        default=10_000,
        help=f"bootstrap resamples, 100 to {MAX_RESAMPLES:,} (default 10000)",
    )
    p.add_argument(
        "--seed", type=whole_number(0, SEED_MAX), default=0, help="the bootstrap's seed (default 0: reproducible)"
    )
    p.add_argument("--json", action="store_true", help="print JSON for scripts instead of the table")
    p.set_defaults(func=cmd_compare)
    return p


__all__ = ["Comparison", "Side", "add_parser", "compare_paths", "compare_sides", "olympic", "runs_needed"]
