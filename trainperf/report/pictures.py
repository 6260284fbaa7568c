"""The report's pictures: what a run's model drew at each evaluation (``<out>/pictures/<system>/<benchmark>/
result_<i>.png``, stored by the harness from ``Workload.pictures``), shown for each system and benchmark that has
them.

A results folder may come from elsewhere, so a picture is read only when it is a regular file (not a link) inside the
folder, at most :data:`MAX_BYTES`, and a PNG by its signature; anything else is named in the report and not shown.
"""

from __future__ import annotations

import base64
import html
import re
import stat
from pathlib import Path

from trainperf.results import PICTURES

MAX_BYTES = 4 * 2**20
PNG = b"\x89PNG\r\n\x1a\n"
NAME = re.compile(r"^result_(\d+)\.png$")


def found(source: Path, system: str, benchmark: str) -> list[Path]:
    """The run pictures of ``benchmark`` on ``system`` under the output folder ``source``, by run number."""
    folder = Path(source) / PICTURES / system / benchmark
    if not folder.is_dir() or folder.is_symlink():
        return []
    named = [(int(m.group(1)), p) for p in folder.iterdir() if (m := NAME.match(p.name))]
    return [p for _, p in sorted(named)]


def read(path: Path, root: Path) -> bytes:
    """The PNG's bytes; a ValueError saying why it is not shown."""
    st = path.lstat()
    if not stat.S_ISREG(st.st_mode):
        raise ValueError("not a regular file")
    if not path.resolve().is_relative_to(Path(root).resolve()):
        raise ValueError("outside the results folder")
    if st.st_size > MAX_BYTES:
        raise ValueError(f"{st.st_size} bytes, over {MAX_BYTES}")
    with open(path, "rb") as f:
        data = f.read(MAX_BYTES + 1)
    if not data.startswith(PNG):
        raise ValueError("not a PNG")
    return data


def section(items: list[tuple[str, str, Path, str]]) -> str:
    """HTML for (system label, benchmark, output folder, system name): the first run's picture of each, with how
    many runs drew one and where the others are; "" when none has pictures."""
    parts = []
    for label, benchmark, source, system in items:
        paths = found(source, system, benchmark)
        if not paths:
            continue
        where = html.escape(str(paths[0].parent))
        try:
            png = read(paths[0], source)
        except (OSError, ValueError) as e:
            parts.append(f"<p>{html.escape(label)} · {html.escape(benchmark)}: {html.escape(paths[0].name)} not shown "
                         f"({html.escape(str(e))})</p>")  # fmt: skip
            continue
        img = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
        caption = (
            f"{html.escape(label)} · {html.escape(benchmark)}: {html.escape(paths[0].name)}, a row per evaluation "
            f"(samples trained), a column per fixed caption; {len(paths)} run(s) drew one, in {where}"
        )
        alt = f"{benchmark} generated images"
        parts.append(f'<figure><img src="{img}" alt="{html.escape(alt)}"><figcaption>{caption}</figcaption></figure>')
    return "\n".join(parts)
