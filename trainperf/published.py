"""Result files MLCommons published although they break trainperf's timeline rule, which their round's tools do not
enforce: known by their bytes, accepted with a warning that says why.

The timeline rule (:mod:`trainperf.timeline`) is trainperf's own and stricter than any round's tools: it refuses a
log whose ``run_stop`` comes before training or an evaluation it should time, the trace a forger leaves who moves
``run_stop`` earlier. Two published results break it (docs/measurements.md, "v1.0" and "v3.1"): Google's v1.0
``tpu-v4-128-TF/ssd`` trains on for longer after ``run_stop`` than the run took, and four of xFusion's v3.1
``G5500V7x8xL40S/bert`` files log the evaluation that reaches the target after ``run_stop``. MLCommons accepted and
scored both, and the rounds' own tools do not compare those times, so trainperf accepts those very files too.

A file is known by the SHA-256 of its bytes (``history/data/published_exceptions.csv``, one row a file: round,
org, path in the package, digest, the finding accepted and the evidence). Any edit, a moved ``run_stop`` among
them, changes the digest and meets the rule again; so does the same finding in any other log. Only the timeline
rule's problems that name the row's ``finding`` are accepted; every other rule still applies to the file.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from trainperf.errors import DataError
from trainperf.timeline import RULE

TABLE = Path(__file__).parent / "history" / "data" / "published_exceptions.csv"
COLUMNS = ("round", "org", "path", "sha256", "finding", "evidence")
_DIGEST = re.compile(r"[0-9a-f]{64}")
_ROUND = re.compile(r"v\d+\.\d+")


@dataclass(frozen=True)
class PublishedFile:
    """One published result file that breaks the timeline rule: where MLCommons published it and why it stands."""

    round: str
    org: str
    path: str  # results/<system>/<benchmark>/<file> in the org's package
    sha256: str
    finding: str  # the words every accepted problem of the timeline rule holds
    evidence: str


def table() -> dict[str, PublishedFile]:
    """The rows of :data:`TABLE` by digest; a :class:`DataError` naming the row when one is malformed."""
    return _read(TABLE)


@functools.cache
def _read(path: Path) -> dict[str, PublishedFile]:
    rows: dict[str, PublishedFile] = {}
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise DataError(f"{path}: the columns must be {', '.join(COLUMNS)}; restore the file trainperf ships")
        for n, row in enumerate(reader, start=2):
            entry = PublishedFile(**{k: (row[k] or "").strip() for k in COLUMNS})
            wrong = [
                field
                for field, ok in (
                    ("round", _ROUND.fullmatch(entry.round)),
                    ("sha256", _DIGEST.fullmatch(entry.sha256)),
                    ("path", entry.path.startswith("results/") and ".." not in entry.path.split("/")),
                    ("finding", entry.finding),
                    ("evidence", entry.evidence),
                    ("org", entry.org),
                )
                if not ok
            ]
            if wrong or entry.sha256 in rows:
                why = f"bad {', '.join(wrong)}" if wrong else f"digest {entry.sha256} listed twice"
                raise DataError(f"{path}: row at line {n}: {why}; restore the file trainperf ships")
            rows[entry.sha256] = entry
    return rows


def accepted(problems: list[str], data: bytes) -> tuple[list[str], list[str]]:
    """(the problems left, a warning for those accepted): the timeline rule's problems naming the finding of the row
    whose digest is ``data``'s, when there is one; else ``problems`` as they are."""
    if not any(p.startswith(RULE) for p in problems):
        return problems, []
    entry = table().get(hashlib.sha256(data).hexdigest())
    if entry is None:
        return problems, []
    kept = [p for p in problems if not (p.startswith(RULE) and entry.finding in p)]
    gone = [p for p in problems if p not in kept]
    if not gone:
        return problems, []
    more = f" (and {len(gone) - 1} more such problem(s))" if len(gone) > 1 else ""
    return kept, [
        f"{gone[0]}{more}: accepted, because this file is byte for byte {entry.org}'s {entry.path} as MLCommons "
        f"published it in {entry.round} (sha256 {entry.sha256[:16]}...), and the timeline rule is trainperf's own, "
        f"not its round's: {entry.evidence}"
    ]
