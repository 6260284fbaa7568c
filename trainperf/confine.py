"""Running the official MLCommons tools confined, where the machine allows it: a second wall behind the gate.

The official tools execute code from YAML rule files, and mlperf-logging 4.1.68's v2.0 rules let a log
choose which file (see :mod:`trainperf.rules.gate`, the first wall, which keeps such values away from
them). Each tool therefore runs, in this order of preference:

- under bubblewrap (``bwrap``), when installed and working: the whole file system read-only except the
  folders the tool must write (its working folder, the private copy of a package), no network, its own
  user, process, IPC and UTS namespaces, a new session (no access to the terminal);
- under util-linux ``unshare --user --map-root-user --net``, when user namespaces work: no network and no
  privilege beyond the user's own; the files the user can read or write stay readable and writable;
- unconfined otherwise, and the output says so: ``not confined: <why>``.

Each way is tried once per process by running Python under it. ``TRAINPERF_CONFINE=0`` runs the tools
unconfined (to debug a tool), and the output says that too.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

CONFINE_ENV = "TRAINPERF_CONFINE"  # "0": run the official tools unconfined
_PROBE_TIMEOUT_S = 20
_BWRAP = (
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--unshare-all",
    "--die-with-parent",
    "--new-session",
)
_UNSHARE = ("--user", "--map-root-user", "--net")
_NOTES = {
    "bwrap": "confined: bubblewrap (read-only file system but for the tool's own folders, no network)",
    "unshare": (
        "confined: unshare (user and network namespaces: no network, no privilege beyond the user's; "
        "files the user can write stay writable)"
    ),
}


@dataclass(frozen=True)
class Confinement:
    """How an official tool is run: the command's prefix and a sentence for the output."""

    prefix: tuple[str, ...]
    note: str  # "confined: ..." or "not confined: <why>"

    @property
    def confined(self) -> bool:
        return bool(self.prefix)

    def wrap(self, cmd: Sequence[str]) -> list[str]:
        return [*self.prefix, *cmd]


def confinement(writable: Sequence[Path] = ()) -> Confinement:
    """The confinement for a tool that may write only under ``writable`` (folders that exist)."""
    if os.environ.get(CONFINE_ENV, "").strip() == "0":
        return Confinement((), f"not confined: {CONFINE_ENV}=0")
    kind, found = _probe()
    if kind == "bwrap":
        binds = [arg for p in writable for arg in ("--bind", str(Path(p).resolve()), str(Path(p).resolve()))]
        return Confinement((found, *_BWRAP, *binds, "--"), _NOTES[kind])
    if kind == "unshare":
        return Confinement((found, *_UNSHARE, "--"), _NOTES[kind])
    return Confinement((), f"not confined: {found}")


def run_confined(
    confined: Confinement, cmd: Sequence[str], *, cwd: Path, timeout_s: float, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run an official tool's ``cmd`` under ``confined``, in ``cwd``, with no input, this process's environment plus
    ``env``, and its output captured as text (bytes that are not UTF-8 replaced). After ``timeout_s`` seconds the
    tool is killed and :class:`subprocess.TimeoutExpired` raised, as :func:`subprocess.run` does
    (:func:`output_so_far` reads what it printed by then); its exit code is the caller's to judge."""
    return subprocess.run(
        confined.wrap(cmd),
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        errors="replace",  # a tool's output is shown or parsed, never a reason to fail
        timeout=timeout_s,
        check=False,
    )


def start_confined(
    confined: Confinement,
    cmd: Sequence[str],
    *,
    cwd: Path,
    stdout: IO[bytes],
    stderr: IO[bytes],
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start an official tool's ``cmd`` under ``confined`` as :func:`run_confined` runs it (in ``cwd``, no input, this
    process's environment plus ``env``), its output into the files ``stdout`` and ``stderr``, and return at once: for a
    caller that watches the tool's progress and stops it at its own limits."""
    return subprocess.Popen(
        confined.wrap(cmd),
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
    )


def output_so_far(exc: subprocess.TimeoutExpired) -> tuple[str, str]:
    """(stdout, stderr) that a tool :func:`run_confined` killed at its time limit had printed."""
    out, err = (p.decode(errors="replace") if isinstance(p, bytes) else p or "" for p in (exc.stdout, exc.stderr))
    return out, err


@functools.cache
def _probe() -> tuple[str | None, str]:
    """("bwrap" or "unshare", its path) for the first way that runs Python here; (None, why neither does)."""
    why = []
    for kind, args in (("bwrap", _BWRAP), ("unshare", _UNSHARE)):
        path = shutil.which(kind)
        if path is None:
            why.append(f"{kind} is not installed")
            continue
        failure = _try([path, *args, "--", sys.executable, "-c", "pass"])
        if failure is None:
            return kind, path
        label = "bwrap" if kind == "bwrap" else f"unshare {' '.join(args)}"
        why.append(f"{label} fails here ({failure})")
    return None, "; ".join(why)


def _try(cmd: list[str]) -> str | None:
    """None when ``cmd`` exits 0, else its last line of error output (or why it could not run)."""
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e) or type(e).__name__
    if proc.returncode == 0:
        return None
    lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit code {proc.returncode}"
