"""The ablation of the optimization switches in a report: its JSON read back (as untrusted data) and its bar chart.

``trainperf ablate`` writes ``<out>/ablation/<benchmark>-<scale>.json``; the report of that folder reads every
such file, checks each field's type before using it (a file from elsewhere is data, never a path or code),
and draws the speed-ups as horizontal bars with each repeat's ratio as a whisker.
"""

from __future__ import annotations

import html
import io
import math
from pathlib import Path
from typing import Any

from trainperf import limits
from trainperf.errors import ResultsError
from trainperf.report.figures import matplotlib_parts

MAX_CONFIGURATIONS = 64


def find_ablations(roots: list[Path]) -> list[Path]:
    """The ablation files under each result folder, in order (plain files only: a link is not followed)."""
    found = []
    for root in roots:
        folder = root / "ablation"
        if folder.is_dir() and not folder.is_symlink():
            found += sorted(p for p in folder.glob("*.json") if p.is_file() and not p.is_symlink())
    return found


def read_ablation(path: Path) -> dict[str, Any]:
    """An ablation file, its fields checked; a ResultsError naming the file and the field otherwise."""
    try:
        data = limits.read_json(path, limits.MAX_DOCUMENT_BYTES)
    except limits.OverLimit as e:
        raise ResultsError(
            f"{path} {e}: refused (an ablation file is a few KiB, 3 deep); run `trainperf ablate` again"
        ) from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ResultsError(
            f"{path}: not a readable ablation file ({type(e).__name__}); run `trainperf ablate` again"
        ) from None
    return check_ablation(data, str(path))


def check_ablation(data: Any, where: str) -> dict[str, Any]:
    def bad(field: str, why: str) -> ResultsError:
        return ResultsError(
            f"{where}: field {field!r} {why}; it is not a trainperf ablation file as written by `trainperf ablate`"
        )

    if not isinstance(data, dict) or data.get("format") != "trainperf ablation":
        raise bad("format", "is not 'trainperf ablation'")
    for key in ("benchmark", "scale", "device", "data"):
        if not isinstance(data.get(key), str):
            raise bad(key, "is not text")
    for key in ("steps", "repeats", "global_batch_size"):
        if not _count(data.get(key)):
            raise bad(key, "is not a positive whole number")
    configs = data.get("configurations")
    if not isinstance(configs, list) or not configs or len(configs) > MAX_CONFIGURATIONS:
        raise bad("configurations", f"is not a list of 1 to {MAX_CONFIGURATIONS} configurations")
    for i, c in enumerate(configs):
        field = f"configurations[{i}]"
        if not isinstance(c, dict):
            raise bad(field, "is not an object")
        for key in ("name", "flags", "status", "optimizer", "error"):
            if not isinstance(c.get(key, ""), str):
                raise bad(f"{field}.{key}", "is not text")
        for key in ("speedup", "median_samples_per_second", "compile_seconds"):
            if c.get(key) is not None and not _number(c[key]):
                raise bad(f"{field}.{key}", "is not a finite non-negative number")
        ratios = c.get("speedup_per_repeat", [])
        if not isinstance(ratios, list) or not all(_number(v) for v in ratios):
            raise bad(f"{field}.speedup_per_repeat", "is not a list of finite non-negative numbers")
    skipped = data.get("skipped", [])
    if not isinstance(skipped, list) or not all(
        isinstance(s, dict) and isinstance(s.get("name"), str) and isinstance(s.get("reason"), str) for s in skipped
    ):
        raise bad("skipped", "is not a list of {name, reason}")
    return data


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def chart_png(data: dict[str, Any]) -> bytes:
    """Horizontal bars: each configuration's median speed-up over the baseline; whiskers: its repeats' range."""
    matplotlib, Figure, Canvas = matplotlib_parts()
    configs = data["configurations"]
    with matplotlib.rc_context({"text.parse_math": False, "font.size": 9}):
        fig = Figure(figsize=(7.5, 1.4 + 0.4 * len(configs)), dpi=96, layout="constrained")
        ax = fig.add_subplot()
        for y, c in enumerate(configs):
            s = c.get("speedup")
            if c.get("status") == "failed" or s is None:
                ax.text(1.0, y, "  failed", va="center", color="#cf222e")
                continue
            color = "#888888" if c["name"] == "baseline" else "#1a7f37" if s >= 1 else "#cf222e"
            ax.barh(y, s, color=color, edgecolor="#333")
            ratios = c.get("speedup_per_repeat") or []
            if ratios and c["name"] != "baseline":
                ax.plot([min(ratios), max(ratios)], [y, y], color="#222", linewidth=1.2)
            shared = "†" if c.get("compile_shared") is True else ""  # after another configuration compiled
            extra = f", compile {c['compile_seconds']:.0f} s{shared}" if c.get("compile_seconds") is not None else ""
            ax.text(max(s, max(ratios, default=s)), y, f"  ×{s:.2f}{extra}", va="center")
        ax.axvline(1.0, color="#555", linestyle="--", linewidth=1)
        ax.set_yticks(range(len(configs)), [c["name"] for c in configs])
        ax.invert_yaxis()
        ax.set_xlabel("training throughput × the baseline's (median of interleaved repeats; line: their range)")
        ax.set_title(f"{data['benchmark']} ({data['scale']}) on {data['device']}", fontsize=9)
        ax.margins(x=0.3)
        buf = io.BytesIO()
        Canvas(fig).print_png(buf)
        return buf.getvalue()


def html_section(ablations: list[dict[str, Any]]) -> str:
    """The report's section: per ablation, the chart, a table of the configurations and the skipped switches."""
    import base64

    def e(v: object) -> str:
        return html.escape(str(v), quote=True)

    parts = []
    for a in ablations:
        img = "data:image/png;base64," + base64.b64encode(chart_png(a)).decode("ascii")
        title = f"{a['benchmark']} ({a['scale']}) on {a['device']}"
        rows = []
        for c in a["configurations"]:
            s, med, comp = c.get("speedup"), c.get("median_samples_per_second"), c.get("compile_seconds")
            cells = [
                f"<td>{e(c['name'])}</td><td>{e(c.get('flags', ''))}</td>",
                '<td class="n">' + ("–" if med is None else f"{med:,.1f}") + "</td>",
                '<td class="n">' + ("failed" if s is None else f"×{s:.2f}") + "</td>",
                '<td class="n">'
                + ("" if comp is None else f"{comp:.1f}" + ("†" if c.get("compile_shared") is True else ""))
                + "</td>",
                f"<td>{e(c.get('error', '') or c.get('optimizer', ''))}</td>",
            ]
            rows.append("<tr>" + "".join(cells) + "</tr>")
        table = (
            "<table><tr><th>configuration</th><th>switches</th><th>samples/s</th><th>speed-up</th>"
            "<th>compile (s)</th><th>optimizer / error</th></tr>" + "".join(rows) + "</table>"
        )
        skipped = "".join(f"<li>{e(s['name'])}: {e(s['reason'])}</li>" for s in a.get("skipped", []))
        parts.append(
            f'<figure><img src="{img}" alt="{e(title)} ablation"><figcaption>{e(title)}: {e(a["data"])}, global '
            f"batch {a['global_batch_size']}, median of {a['repeats']} interleaved repeats of {a['steps']} "
            "steps</figcaption></figure>"
            + table
            + (f'<p class="note">skipped:</p><ul class="note">{skipped}</ul>' if skipped else "")
        )
    note = (
        '<p class="note">Training throughput of each optimization switch alone and all together, from '
        "<code>trainperf ablate</code>; compile time is the warm-up's time beyond its steps (on the clock in a real "
        "run; †: after another configuration compiled in the same process, whose caches it may reuse).</p>"
    )
    return note + "\n".join(parts)
