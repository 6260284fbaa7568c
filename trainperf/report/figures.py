"""matplotlib for the report's charts, imported only when a chart is drawn, with an actionable error when it is
missing."""

from __future__ import annotations

from trainperf.errors import TrainperfError


def matplotlib_parts():
    """(matplotlib, Figure, FigureCanvasAgg): the pieces the charts draw with, off screen."""
    try:
        import matplotlib
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise TrainperfError(
            "the HTML report draws its charts with matplotlib, which is not installed: pip install matplotlib"
        ) from None
    return matplotlib, Figure, FigureCanvasAgg
