"""PNG charts of the history queries, drawn like the MLPerf press-release charts.

matplotlib is imported inside each function and drawn through its Agg canvas directly (no pyplot, no global
backend switch), so importing trainperf stays fast and charts work without a display.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from trainperf.errors import UsageError

_BAR = "#1f5f8b"
_LABEL_SIZE = 7


def _figure(width: float, height: float) -> tuple[Any, Any]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _minutes(value: float) -> str:
    return f"{value:.3g}" if value < 10 else f"{value:.1f}"


def fastest_bar_chart(rows: Sequence[Any], title: str, *, log_scale: bool = True) -> bytes:
    """Bars of minutes per benchmark, each labelled with its org and system; rows are `query.fastest` results.

    Rows from several rounds get one bar each, labelled `benchmark` over `round`.
    """
    if not rows:
        raise UsageError("nothing to chart: the query returned no result with a score")
    several_rounds = len({r.round for r in rows}) > 1
    labels = [f"{r.benchmark}\n{r.round}" if several_rounds else r.benchmark for r in rows]
    minutes = [r.score_min for r in rows]
    fig, ax = _figure(max(6.0, 0.9 * len(rows) + 2), 5.0)
    bars = ax.bar(range(len(rows)), minutes, color=_BAR)
    if log_scale:
        ax.set_yscale("log")
    ax.set_xticks(range(len(rows)), labels, fontsize=8, rotation=0 if len(rows) <= 10 else 45, parse_math=False)
    ax.set_ylabel("minutes to train (lower is better)" + (", log scale" if log_scale else ""))
    ax.set_title(title, parse_math=False)
    ax.grid(axis="y", which="both", alpha=0.3)
    texts = []
    for r in rows:
        n_acc = f"{r.n_acc} acc" if getattr(r, "n_acc", None) else "? acc"
        texts.append(f"{_minutes(r.score_min)}\n{r.org}\n{r.system}\n{n_acc}")
    _label_bars(ax, bars, texts, vertical=len(rows) > 6)
    low, high = min(minutes), max(minutes)  # room above the bars for the labels
    if log_scale:
        ax.set_ylim(low / 3, high * (150 if len(rows) > 6 else 12))
    else:
        ax.set_ylim(0, high * (1.7 if len(rows) > 6 else 1.35))
    return _png(fig)


def _label_bars(ax: Any, bars: Any, texts: Sequence[str], *, vertical: bool) -> None:
    """Write each text above its bar."""
    for bar, text in zip(bars, texts, strict=True):
        ax.annotate(
            text,
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=_LABEL_SIZE,
            parse_math=False,  # cells are untrusted text: `$` must not start mathtext
            rotation=90 if vertical else 0,
        )


def speedup_chart(rows: Sequence[Any], title: str) -> bytes:
    """Bars of speed-up per round (rows are `query.speedup` results), each labelled with minutes and system."""
    if not rows:
        raise UsageError("nothing to chart: the query returned no result with a score")
    fig, ax = _figure(max(6.0, 0.9 * len(rows) + 2), 5.0)
    bars = ax.bar(range(len(rows)), [r.speedup for r in rows], color=_BAR)
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(rows)), [r.round for r in rows], fontsize=8, parse_math=False)
    ax.set_ylabel("speed-up over the baseline round (higher is better)")
    ax.set_title(title, parse_math=False)
    ax.grid(axis="y", alpha=0.3)
    texts = []
    for r in rows:
        base = "" if r.baseline_round == rows[0].baseline_round else f"\nvs {r.baseline_round}"
        texts.append(f"{r.speedup:.2f}x\n{_minutes(r.score_min)} min\n{r.system}{base}")
    _label_bars(ax, bars, texts, vertical=len(rows) > 5)
    ax.set_ylim(0, max(r.speedup for r in rows) * (1.8 if len(rows) > 5 else 1.35))
    return _png(fig)
