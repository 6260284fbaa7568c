"""Extract a published MLPerf Training results repository's packages (``<org>/systems/`` and ``<org>/results/``) from a
git directory, for ``benchmarks/real_round.py``.

    python benchmarks/round_files.py GIT_DIR OUT

``git archive`` stops at the first blob a partial mirror does not hold (its largest log files); this reads each blob
of HEAD with ``git cat-file --batch`` instead, writes those it has under OUT, and leaves out every (system, benchmark)
folder missing one of its ``result_*.txt`` files, so that no pair is reviewed on part of its runs. Printed: the files
written, and each pair left out with the count of its result files absent. Links and files outside ``systems/`` and
``results/`` are not written; paths are the repository's own (a name holding ``..`` or starting with ``/`` is skipped).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path, PurePosixPath


def wanted(git_dir: str) -> list[tuple[str, str]]:
    """(blob id, path) of HEAD's regular files under ``<org>/systems/`` and ``<org>/results/``."""
    out = subprocess.run(["git", "-C", git_dir, "ls-tree", "-r", "-z", "HEAD"], capture_output=True, check=True)
    found = []
    for entry in out.stdout.split(b"\0"):
        if not entry:
            continue
        meta, raw = entry.split(b"\t", 1)
        mode, kind, sha = meta.split()
        path = raw.decode("utf-8", "surrogateescape")
        parts = PurePosixPath(path).parts
        safe = not path.startswith("/") and ".." not in parts
        if kind == b"blob" and mode != b"120000" and safe and len(parts) >= 3 and parts[1] in ("systems", "results"):
            found.append((sha.decode(), path))
    return found


def extract(git_dir: str, out: Path) -> tuple[int, Counter[str]]:
    """Write the blobs git has; the (org/results/system/benchmark) folders with absent result files, counted."""
    cat = subprocess.Popen(["git", "-C", git_dir, "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert cat.stdin is not None and cat.stdout is not None
    written, absent = 0, Counter()
    for sha, path in wanted(git_dir):
        cat.stdin.write(sha.encode() + b"\n")
        cat.stdin.flush()
        header = cat.stdout.readline().split()
        if header[-1] == b"missing":
            parts = PurePosixPath(path).parts
            if parts[1] == "results" and len(parts) >= 5 and parts[-1].startswith("result_"):
                absent["/".join(parts[:4])] += 1
            continue
        data = cat.stdout.read(int(header[2]))
        cat.stdout.read(1)
        dst = out / path
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(data)
        written += 1
    cat.stdin.close()
    cat.wait()
    return written, absent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("git_dir", help="the results repository's git directory (a bare mirror will do)")
    ap.add_argument("out", type=Path, help="where the packages go (one <org>/ folder each)")
    args = ap.parse_args(argv)
    written, absent = extract(args.git_dir, args.out)
    print(f"{written} files written", file=sys.stderr)
    for folder, n in sorted(absent.items()):
        left = len(list((args.out / folder).glob("result_*"))) if (args.out / folder).is_dir() else 0
        print(f"left out {folder}: {n} of {n + left} result files absent from the git directory")
        shutil.rmtree(args.out / folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
