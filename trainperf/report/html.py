"""The one-file HTML report (inline CSS, charts as base64 PNG data URIs, no external URL) and a Markdown table.

Every string that came from a result or system file is HTML-escaped; the charts (``charts.py``) are drawn with
matplotlib's Agg canvas (imported only when a report is rendered) with math-text parsing off, so a system name is
drawn as written.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import math
from collections.abc import Iterable
from pathlib import Path

from trainperf.errors import ResultsError, TrainperfError, UsageError
from trainperf.fileio import Output, atomic_write_text, check_outputs
from trainperf.registry import BENCHMARKS
from trainperf.report import pictures
from trainperf.report.charts import Group, convergence_chart, spread_chart, strip_chart, time_to_train_chart
from trainperf.report.collect import BenchmarkResults, SystemResults, collect, result_roots
from trainperf.report.energy import energy_score
from trainperf.text import markdown_text

_PNG = b"\x89PNG\r\n\x1a\n"
# What every report and Markdown table trainperf writes holds in its first bytes: another file is not replaced
HTML_MARK = b"<title>trainperf report</title>"
MARKDOWN_MARK = b"| system | benchmark | scale | runs ok/total |"
_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:1100px;color:#222;
padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.6em 0;font-size:13px}
th,td{border:1px solid #ddd;padding:.3em .6em;text-align:left}
th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}
.score{color:#1a7f37;font-weight:600}.preview{color:#9a6700;font-weight:600}.no-score{color:#cf222e;font-weight:600}
.note,.meta,figcaption{color:#555;font-size:12.5px}nav a{margin-right:1em}figure{margin:1em 0}img{max-width:100%}
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _min(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def _energy(joules: float) -> str:
    return f"{joules / 1000:.2f} kJ ({joules / 3600:.2f} Wh)"


def _groups(systems: list[SystemResults]) -> list[Group]:
    """(benchmark, scale) across systems, round by round (oldest first) in MLPerf's benchmark order; a system keeps
    one color everywhere. One benchmark of two rounds is two groups, each labelled with its round."""
    found: dict[tuple[str, str, str], list] = {}
    for color, s in enumerate(systems):
        for b in s.benchmarks:
            found.setdefault((b.round, b.benchmark, b.scale), []).append((color, s, b))
    several = len({(k[1], k[2]) for k in found}) < len(found)

    def order(k: tuple[str, str, str]) -> tuple:
        version = tuple(int(x) for x in k[0].removeprefix("v").split(".")) if k[0] else ()
        return (k[0] == "", version, BENCHMARKS.index(k[1]) if k[1] in BENCHMARKS else len(BENCHMARKS), k[1:])

    return [(f"{k[1]} {k[0]}" if several and k[0] else k[1], k[2], found[k]) for k in sorted(found, key=order)]


def _check_price(price_per_hour: float | None) -> None:
    if price_per_hour is not None and (not math.isfinite(price_per_hour) or price_per_hour < 0):
        raise UsageError(f"--price-per-hour must be a non-negative number, got {price_per_hour}")


def _placement(pairs: list[tuple[SystemResults, BenchmarkResults]], history_round: str | None) -> str:
    """Each reference-scale score placed among the published closed results of its benchmark (``history_round``,
    or the benchmark's latest round): its rank, and one strip chart per benchmark with the published scores."""
    from trainperf.history import query

    ref = [(s, b) for s, b in pairs if b.scale == "reference" and b.score.minutes is not None]
    if not ref:
        return ""
    published = query.load_results()
    rows, strips = [], []
    for s, b in ref:
        try:
            p = query.place(published, b.benchmark, b.score.minutes, round=history_round)
        except TrainperfError as e:  # a benchmark or round the published table lacks: said in the row
            rows.append([_e(s.label), _e(b.benchmark), _min(b.score.minutes), "–", "–", _e(str(e))])
            continue
        rows.append(
            [
                _e(s.label), _e(b.benchmark), _min(b.score.minutes), _e(p.round),
                f"{p.rank} of {p.count + 1}", f"faster than {p.faster_than:.0%} of them",
            ]
        )  # fmt: skip
        pool = [
            r.score_min
            for r in published
            if r.benchmark == p.benchmark and r.round == p.round and r.division == p.division and r.score_min
        ]
        strips.append((f"{b.benchmark} {p.round}\n{s.label[:24]}", pool, b.score.minutes))
    body = _table(["system", "benchmark", "score (min)", "round", "rank", "among the published"], rows, (2,))
    if strips:
        body += f'<figure><img src="{strip_chart(strips)}" alt="scores among the published results"><figcaption>'
        body += "each published closed result of the round (grey) and this report's score (red), log scale"
        body += "</figcaption></figure>"
    return body


# --- HTML ---------------------------------------------------------------------------------------------
def _comparison(a: SystemResults, b: SystemResults) -> str:
    """`trainperf compare` of the report's two systems: each benchmark both ran at one scale and target."""
    from trainperf.report.compare import compare_systems

    found = compare_systems(a, b)
    if not found:
        return ""
    rows = []
    for c in found:
        interval = "–" if c.ci is None else f"{c.ci[0]:.3f}–{c.ci[1]:.3f}"
        rows.append(
            [
                _e(c.benchmark), f"{c.a.successes}/{len(c.a.runs)}", f"{c.b.successes}/{len(c.b.runs)}",
                "–" if c.ratio is None else f"{c.ratio:.3f}", interval,
                "–" if c.p_value is None else f"{c.p_value:.3g}",
                _e(c.verdict + ("; the two ran different trainperf code" if "code" in c.differences else "")),
            ]
        )  # fmt: skip
    head = ["benchmark", f"runs ok {_e(a.label)}", f"runs ok {_e(b.label)}", "score ratio", "95 % interval", "p",
            "verdict"]  # fmt: skip
    note = (
        f'<p class="note">Score ratio: {_e(a.label)} / {_e(b.label)} (below 1: {_e(a.label)} is faster), with a '
        "percentile bootstrap interval of the olympic scores; p: a two-sided Mann-Whitney U test of the run minutes "
        "(a run short of its target counts as the slowest). The same as <code>trainperf compare</code>.</p>"
    )
    return _table(head, rows, (1, 2, 3, 4, 5)) + note


def _table(head: Iterable[str], rows: Iterable[Iterable[str]], numeric: Iterable[int] = ()) -> str:
    """``head`` is trusted text; each cell is already-escaped HTML; ``numeric`` columns align right."""
    right = set(numeric)
    out = ["<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for row in rows:
        cells = "".join(f'<td class="n">{c}</td>' if i in right else f"<td>{c}</td>" for i, c in enumerate(row))
        out.append(f"<tr>{cells}</tr>")
    return "\n".join(out) + "</table>"


def _label_html(b: BenchmarkResults) -> str:
    label = b.score.label
    return f'{_min(b.score.minutes)} <span class="{label.replace(" ", "-")}">{label}</span>'


_TTT = "each benchmark's score in minutes, a bar per system (its color in every chart)"
_SPREAD = (
    "each run's minutes (run_start to run_stop), a row and a box per system in its color; x marks a run that did "
    "not converge"
)
_CONVERGENCE = "quality at each evaluation of every run (dotted: did not converge); dashed red: the target"


def _figure(img: str, alt: str, caption: str) -> str:
    return f'<figure><img src="{img}" alt="{_e(alt)}"><figcaption>{caption}</figcaption></figure>'


def render_html(
    systems: list[SystemResults],
    *,
    price_per_hour: float | None,
    history_png: bytes | None = None,
    ablations: list[dict] | None = None,
    history_round: str | None = None,
) -> str:
    """One self-contained HTML document: tables, charts as data URIs, no external reference. ``ablations``: the
    checked files of `trainperf ablate` (:mod:`trainperf.report.ablation`), drawn in their own section."""
    _check_price(price_per_hour)
    if history_png is not None and not history_png.startswith(_PNG):
        raise UsageError("the history chart must be PNG bytes")
    groups = _groups(systems)
    pairs = [(s, b) for _, _, items in groups for _, s, b in items]
    sec: list[tuple[str, str, str]] = []  # id, title, body
    sec.append(("summary", "Summary", _summary(pairs)))
    sec.extend(_charts(groups, pairs))
    if len(systems) == 2:
        body = _comparison(*systems)
        if body:
            sec.append(("compare", f"{_e(systems[0].label)} against {_e(systems[1].label)}", body))
    placed = _placement(pairs, history_round)
    if placed:
        sec.append(("published", "Among the published results", placed))
    if any(s.processors != 1 for s in systems):  # on one processor each it repeats the summary's scores
        sec.append(("per-accelerator", "Per-accelerator time", _per_accelerator(pairs)))
    if price_per_hour is not None:
        sec.append(("cost", "Cost to train", _cost(pairs, price_per_hour)))
    sec.append(("energy", "Energy to train", _energy_section(pairs)))
    drawn = pictures.section([(s.label, b.benchmark, s.source, s.name) for s, b in pairs])
    if drawn:
        sec.append(("pictures", "What the models drew", drawn))
    if ablations:
        from trainperf.report.ablation import html_section

        sec.append(("ablation", "Optimization switches", html_section(ablations)))
    if history_png is not None:
        img = "data:image/png;base64," + base64.b64encode(history_png).decode("ascii")
        sec.append(
            ("history", "Published MLPerf history", f'<figure><img src="{img}" alt="published history"></figure>')
        )
    sec.append(("systems", "Systems", _systems_table(systems)))
    return _document(sec, len(systems), len(groups))


Pairs = list[tuple[SystemResults, BenchmarkResults]]


def _summary(pairs: Pairs) -> str:
    rows = [
        [
            _e(s.label), _e(b.round or "–"), _e(b.benchmark), _e(b.scale), f"{b.score.successes}/{b.score.runs}",
            _label_html(b), _min(b.score.spread), _e(b.target_text),
            _e("; ".join(x for x in (b.score.note, b.spec_note, *b.run_notes) if x) or "valid olympic score"),
        ]
        for s, b in pairs
    ]  # fmt: skip
    head = ["system", "round", "benchmark", "scale", "runs ok/total", "score (min)", "spread (min)", "target", "note"]
    return _table(head, rows, (4, 5, 6))


def _charts(groups: list[Group], pairs: Pairs) -> list[tuple[str, str, str]]:
    """The time-to-train, run-spread and convergence sections (id, title, body)."""
    sec = [("time-to-train", "Time to train", _figure(time_to_train_chart(groups), "time to train", _TTT))]
    if any(len(b.runs) > 1 for _, b in pairs):  # one run each has no spread to draw (a one-run suite)
        sec.append(("spread", "Run spread", _figure(spread_chart(groups), "run spread", _SPREAD)))
    sec.append(("convergence", "Convergence", _figure(convergence_chart(groups), "convergence", _CONVERGENCE)))
    return sec


def _per_accelerator(pairs: Pairs) -> str:
    rows = [
        [
            _e(s.label), _e(f"{b.benchmark} ({b.scale})"), _min(b.score.minutes),
            _e(f"{s.accelerators} × {s.accelerator_model}"
               if s.accelerators else f"{s.nodes} host processor (CPU-only)"),
            _min(None if b.score.minutes is None else b.score.minutes * s.processors),
        ]
        for s, b in pairs
    ]  # fmt: skip
    body = _table(["system", "benchmark", "score (min)", "processors", "per-accelerator time (min)"], rows, (2, 4))
    return body + '<p class="note">Score minutes × accelerators; a CPU-only host counts as 1 processor.</p>'


def _cost(pairs: Pairs, price_per_hour: float) -> str:
    rows = [
        [
            _e(s.label), _e(f"{b.benchmark} ({b.scale})"), _min(b.score.minutes),
            "–" if b.score.minutes is None else f"{b.score.minutes / 60 * price_per_hour:.4g}",
            f"{sum(r.minutes for r in b.runs) / 60 * price_per_hour:.4g}",
        ]
        for s, b in pairs
    ]  # fmt: skip
    body = _table(["system", "benchmark", "score (min)", "cost to train", "cost of all runs"], rows, (2, 3, 4))
    return body + f'<p class="note">Minutes / 60 × {price_per_hour:g} per system-hour (one price for every system).</p>'


def _energy_section(pairs: Pairs) -> str:
    runs = [(s, b, r) for s, b in pairs for r in b.runs]
    if not any(r.energy_joules is not None for _, _, r in runs):
        return (
            "<p>Energy to train: <strong>not measured</strong>. No run record carries an energy reading "
            "(trainperf measures it with RAPL and NVML where the machine allows).</p>"
        )
    scored = [(s, b, *energy_score(b)) for s, b in pairs]
    head = ["system", "benchmark", "score (min)", "energy to train", "how"]
    body = _table(
        head,
        [
            [_e(s.label), _e(f"{b.benchmark} ({b.scale})"), _min(b.score.minutes),
             "–" if joules is None else _energy(joules), _e(how)]
            for s, b, joules, how in scored
        ],
        (2, 3),
    )  # fmt: skip
    body += (
        '<p class="note">A benchmark\'s energy to train is scored as MLCommons scores it: the mean energy of the '
        "runs its time score keeps, the fastest and slowest dropped by their minutes (a failed run is one of the "
        "slowest), not scaled by a scaling.json factor.</p>"
    )
    rows = [
        [
            _e(s.label), _e(f"{b.benchmark} ({b.scale})"), _e(r.path.name), _e(r.counted_status), _min(r.minutes),
            _energy(r.energy_joules) if r.energy_joules is not None else "not measured", _e(r.energy_note),
        ]
        for s, b, r in runs
    ]  # fmt: skip
    return body + _table(["system", "benchmark", "run", "status", "minutes", "energy to train", "how"], rows, (4, 5))


def _systems_table(systems: list[SystemResults]) -> str:
    rows = [
        [
            _e(s.label), _e(s.source), str(s.nodes), str(s.accelerators), _e(s.accelerator_model),
            _e(s.host_processor_model), _e("; ".join(s.notes) or "–"),
        ]
        for s in systems
    ]  # fmt: skip
    head = ["system", "from", "nodes", "accelerators", "accelerator", "host processor", "notes"]
    return _table(head, rows, (2, 3))


def _document(sec: list[tuple[str, str, str]], n_systems: int, n_groups: int) -> str:
    """The page around the sections (id, title, body): the header, the stamp, a link to each section."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    nav = " ".join(f'<a href="#{i}">{t}</a>' for i, t, _ in sec)
    sections = "\n".join(f'<section id="{i}"><h2>{t}</h2>\n{b}\n</section>' for i, t, b in sec)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>trainperf report</title><style>{_CSS}</style></head><body>\n"
        f'<h1>trainperf report</h1><p class="meta">{n_systems} system(s), {n_groups} benchmark(s); '
        f"made {stamp} by trainperf {_version()}. A score is the olympic mean of the runs' minutes "
        "(MLPerf Training v2.0 rules); with more runs than the rules require, that of the median window of "
        "consecutive runs (by start time); fewer runs make a preview. A run counts as a success only when "
        "an evaluation it logged reaches the target.</p>\n"
        f"<nav>{nav}</nav>\n{sections}\n</body></html>\n"
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("trainperf")
    except PackageNotFoundError:
        return "(not installed)"


# --- Markdown -----------------------------------------------------------------------------------------
_md = markdown_text  # text from the files (system names, labels) as plain text in a cell


def render_markdown(systems: list[SystemResults], price_per_hour: float | None = None) -> str:
    """A Markdown table, one row per system × benchmark, to paste into an issue."""
    _check_price(price_per_hour)
    head = ["system", "round", "benchmark", "scale", "runs ok/total", "score (min)", "spread (min)", "target"]
    head += ["per-accelerator (min)", "energy to train"] + (["cost to train"] if price_per_hour is not None else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, _, items in _groups(systems):
        for _, s, b in items:
            m = b.score.minutes
            joules, how = energy_score(b)
            energy = how if joules is None else f"{_energy(joules)} {how}"
            row = [
                _md(s.label), _md(b.round or "–"), _md(b.benchmark), _md(b.scale),
                f"{b.score.successes}/{b.score.runs}", f"{_min(m)} {b.score.label}", _min(b.score.spread),
                _md(b.target_text),
                _min(None if m is None else m * s.processors), energy,
            ]  # fmt: skip
            if price_per_hour is not None:
                row.append("–" if m is None else f"{m / 60 * price_per_hour:.4g}")
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


# --- writing --------------------------------------------------------------------------------------------
def _atomic_write(path: Path, text: str) -> None:
    try:
        atomic_write_text(path, text)
    except OSError as e:
        raise ResultsError(f"cannot write {path}: {e.strerror or e}; choose another output path") from None


def _refuse_input(target: Path, roots: list[Path], systems: list[SystemResults]) -> None:
    """A ResultsError when ``target`` is (or would land among) what the report reads.

    Protected, after resolving links: every result file and system description read, each results
    folder's ``summary.json`` and ``trainperf.json``, and everything under its ``results/`` and
    ``systems/`` folders (a report written there would be read back as a result next time).
    """
    where = target.resolve()
    files = {r.path.resolve() for s in systems for b in s.benchmarks for r in b.runs}
    files |= {(s.source / "systems" / f"{s.name}.json").resolve() for s in systems}
    for root in roots:
        files |= {(root / "summary.json").resolve(), (root / "trainperf.json").resolve()}
        for folder in ((root / "results").resolve(), (root / "systems").resolve()):
            if where.is_relative_to(folder):
                raise ResultsError(
                    f"{target} is inside {folder}, a folder of the input files; the report must not be written "
                    f"among the results it reads: choose another -o (e.g. {root / 'report.html'})"
                )
    if where in files:
        raise ResultsError(
            f"{target} is one of the input files ({where}); the report must not overwrite a result, a system "
            "description or a summary it reads: choose another -o"
        )


def write_report(
    paths: list[Path],
    out: Path,
    *,
    price_per_hour: float | None = None,
    markdown: Path | None = None,
    history_png: bytes | None = None,
    history_round: str | None = None,
    force: bool = False,
) -> Path:
    """Collect ``paths``, render, and write the HTML report to ``out`` (and the Markdown table if asked).

    Everything is rendered before anything is written, and each file is written to a temporary file and
    renamed, so a failure leaves no half-written report. Nothing is written except ``out`` and ``markdown``, and
    neither replaces a file that trainperf did not write unless ``force`` (:func:`trainperf.fileio.check_outputs`).
    """
    _check_price(price_per_hour)
    out = Path(out)
    targets = [out] + ([Path(markdown)] if markdown is not None else [])
    for target in targets:
        if target.is_dir():
            raise ResultsError(f"{target} is a folder; give a file name such as {target / 'report.html'}")
    systems = collect([Path(p) for p in paths])
    roots = result_roots([Path(p) for p in paths])
    for target in targets:
        _refuse_input(target, roots, systems)
    outputs = [Output(out, "-o", HTML_MARK)]
    outputs += [Output(Path(markdown), "--markdown", MARKDOWN_MARK)] if markdown is not None else []
    check_outputs(outputs, force=force)  # before the charts are drawn: one path each, never a FIFO, a link, ...
    from trainperf.report.ablation import find_ablations, read_ablation

    ablations = [read_ablation(p) for p in find_ablations(roots)]  # <root>/ablation/*.json of `trainperf ablate`
    text = render_html(
        systems,
        price_per_hour=price_per_hour,
        history_png=history_png,
        ablations=ablations,
        history_round=history_round,
    )
    md = render_markdown(systems, price_per_hour) if markdown is not None else None
    _atomic_write(out, text)
    if markdown is not None and md is not None:
        _atomic_write(Path(markdown), md)
    return out


__all__ = ["render_html", "render_markdown", "write_report"]
