"""The report's charts: matplotlib's Agg canvas (imported only when a report is rendered) with math-text parsing
off, so a system name is drawn as written; each chart comes back as a base64 PNG data URI."""

from __future__ import annotations

import base64
import io
import math

from trainperf.report.collect import BenchmarkResults, SystemResults
from trainperf.report.figures import matplotlib_parts

Group = tuple[str, str, list[tuple[int, SystemResults, BenchmarkResults]]]  # benchmark, scale, (color, sys, res)


def _png(fig, canvas_cls) -> str:
    buf = io.BytesIO()
    canvas_cls(fig).print_png(buf)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _grid(groups: list[Group], draw_one, *, panel_h: float = 2.2, ncols: int = 4) -> str:
    """Small multiples: one panel per (benchmark, scale), ``ncols`` to a row, drawn by ``draw_one(ax, cmap, g)``."""
    matplotlib, Figure, Canvas = matplotlib_parts()
    ncols = max(1, min(ncols, len(groups)))
    nrows = math.ceil(len(groups) / ncols)
    with matplotlib.rc_context({"text.parse_math": False, "font.size": 8}):
        fig = Figure(figsize=(10.5, 0.4 + panel_h * nrows), dpi=96, layout="constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False)
        for k, ax in enumerate(axes.flat):
            if k >= len(groups):
                ax.set_visible(False)
                continue
            draw_one(ax, matplotlib.colormaps["tab10"], groups[k])
            ax.set_title(f"{groups[k][0]} ({groups[k][1]})", fontsize=9)
        return _png(fig, Canvas)


def _log_x(ax) -> None:
    """A log x axis with plain numbers (math text is off, so matplotlib's 10^k labels would print as TeX)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def time_to_train_chart(groups: list[Group]) -> str:
    """One figure for the whole report: a row per (benchmark, scale), a bar per system (its color everywhere),
    on a log scale when the scores span more than a factor of 20."""
    matplotlib, Figure, Canvas = matplotlib_parts()
    systems = {s.label: color for _, _, items in groups for color, s, _ in items}
    rows = sum(len(items) for _, _, items in groups)
    with matplotlib.rc_context({"text.parse_math": False, "font.size": 9}):
        fig = Figure(figsize=(10.5, 1.2 + 0.28 * rows + 0.15 * len(groups)), dpi=96, layout="constrained")
        ax = fig.add_subplot()
        cmap = matplotlib.colormaps["tab10"]
        y, ticks, labels, scores = 0.0, [], [], []
        for bench, scale, items in groups:
            ticks.append(y + (len(items) - 1) / 2)
            labels.append(f"{bench} ({scale})")
            for color, _, b in items:
                m = b.score.minutes
                if m is None:
                    ax.text(0.01, y, "no score", va="center", color="#cf222e", transform=ax.get_yaxis_transform())
                else:
                    ax.barh(y, m, color=cmap(color % 10), hatch=None if b.score.valid else "//", edgecolor="#333")
                    ax.text(m, y, f" {m:.3g}", va="center", fontsize=8)
                    scores.append(m)
                y += 1
            y += 0.6
        ax.set_yticks(ticks, labels)
        ax.invert_yaxis()
        if scores and max(scores) / min(scores) > 20:
            _log_x(ax)
        ax.set_xlabel("minutes to train (olympic score; hatched: preview)")
        ax.margins(x=0.12)
        handles = [matplotlib.patches.Patch(color=cmap(c % 10), label=name) for name, c in systems.items()]
        if len(handles) > 1:
            ax.legend(handles=handles, loc="best", fontsize=8)
        return _png(fig, Canvas)


def _spread_panel(ax, cmap, group: Group) -> None:
    _, _, items = group
    for y, (color, _, b) in enumerate(items):
        ok = [r.minutes for r in b.runs if r.success]
        if len(ok) >= 2:
            try:
                ax.boxplot(ok, positions=[y], orientation="horizontal", widths=0.5, showfliers=False)
            except TypeError:  # matplotlib < 3.10 names it vert=False
                ax.boxplot(ok, positions=[y], vert=False, widths=0.5, showfliers=False)
        for i, r in enumerate(b.runs):
            dy = ((i % 5) - 2) * 0.07  # a fixed jitter so that equal times stay visible
            if r.success:
                ax.plot(r.minutes, y + dy, "o", color=cmap(color % 10), alpha=0.85, markersize=4)
            else:
                ax.plot(r.minutes, y + dy, "x", color="#cf222e", markersize=6)
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    ax.set_yticks([])  # a row per system, in its color (named in the time-to-train chart's legend)
    ax.set_ylim(len(items) - 0.5, -0.5)
    ax.xaxis.set_major_locator(MaxNLocator(4))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.5g}"))  # 3.3030, not 3.30300 and an offset
    ax.set_xlabel("minutes per run")


def _convergence_panel(ax, cmap, group: Group) -> None:
    _, _, items = group
    for color, _, b in items:
        for r in b.runs:
            if r.curve:
                xs, _, qs = zip(*r.curve, strict=True)
                ax.plot(xs, qs, "-" if r.success else ":", marker=".", markersize=3, color=cmap(color % 10), alpha=0.8)
    target = next((b for _, _, b in items if b.target is not None), None)
    if target is not None:
        ax.axhline(target.target, color="#cf222e", linestyle="--", linewidth=1)
        top = max((q for _, _, b in items for r in b.runs for _, _, q in r.curve if math.isfinite(q)), default=0.0)
        if target.target < 1 < top:  # a rate such as WER starts far above 1 before it learns: show 0-1
            ax.set_ylim(bottom=0.0, top=1.0)
    if not any(r.curve for _, _, b in items for r in b.runs):
        ax.text(0.5, 0.5, "no evaluation logged", transform=ax.transAxes, ha="center", color="#555")
    ax.set_xlabel("minutes since run_start")


def spread_chart(groups: list[Group]) -> str:
    return _grid(groups, _spread_panel, panel_h=max(1.6, 0.9 + 0.3 * max(len(g[2]) for g in groups)))


def convergence_chart(groups: list[Group]) -> str:
    return _grid(groups, _convergence_panel)


def strip_chart(strips: list[tuple[str, list[float], float]]) -> str:
    """A row per placed score: the published scores of its round as grey dots, the score as a red diamond."""
    matplotlib, Figure, Canvas = matplotlib_parts()
    with matplotlib.rc_context({"text.parse_math": False, "font.size": 8}):
        fig = Figure(figsize=(10.5, 0.8 + 0.45 * len(strips)), dpi=96, layout="constrained")
        ax = fig.add_subplot()
        for y, (_, pool, mine) in enumerate(strips):
            ax.plot(pool, [y] * len(pool), "o", color="#888", alpha=0.5, markersize=4)
            ax.plot([mine], [y], "D", color="#cf222e", markersize=7)
        ax.set_yticks(range(len(strips)), [label for label, _, _ in strips])
        ax.set_ylim(len(strips) - 0.5, -0.5)
        _log_x(ax)
        ax.set_xlabel("minutes to train (published closed results, log scale)")
        return _png(fig, Canvas)
