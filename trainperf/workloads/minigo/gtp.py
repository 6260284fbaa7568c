"""A GTP client for an external opponent (GNU Go), where every call has a timeout.

A missing binary, a process that dies, an answer that is not GTP, or a call that does not answer in time
raises :class:`OpponentError` (a :class:`~trainperf.errors.TrainperfError`) whose message names the binary
and the fix; nothing here can hang.
"""

from __future__ import annotations

import os
import selectors
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from trainperf.errors import TrainperfError

GNUGO = "/usr/games/gnugo"
INSTALL_HINT = "install GNU Go (Debian package `gnugo`: `sudo apt-get install gnugo`, or run scripts/setup.sh)"


class OpponentError(TrainperfError):
    """The GTP opponent is missing, crashed, timed out or answered something that is not GTP."""


def gnugo_command(*, binary: str = GNUGO, size: int = 9, level: int = 0, seed: int = 0, komi: float = 7.5) -> list[str]:
    return [
        binary,
        "--mode",
        "gtp",
        "--boardsize",
        str(size),
        "--chinese-rules",
        "--komi",
        str(komi),
        "--level",
        str(level),
        "--seed",
        str(seed),
    ]


class GTPClient:
    """One GTP engine process; ``call`` sends a command and returns the text of its ``=`` answer."""

    def __init__(self, command: Sequence[str], *, timeout: float = 10.0) -> None:
        self.command = list(command)
        self.binary = self.command[0]
        self.timeout = timeout
        path = shutil.which(self.binary) or (self.binary if Path(self.binary).is_file() else None)
        if path is None or not os.access(path, os.X_OK):
            raise OpponentError(f"GTP opponent {self.binary!r} not found or not executable: {INSTALL_HINT}")
        try:
            self.proc = subprocess.Popen(
                self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0
            )
        except OSError as exc:
            raise OpponentError(f"cannot start GTP opponent {self.binary!r} ({exc}): {INSTALL_HINT}") from exc
        self._buf = b""
        self._pending = ""
        self._sel = selectors.DefaultSelector()
        self._sel.register(self.proc.stdout, selectors.EVENT_READ)

    def call(self, command: str, *, timeout: float | None = None) -> str:
        """Send one command; return its answer (``= text``) or raise OpponentError."""
        self.send(command)
        return self.receive(timeout=timeout)

    def send(self, command: str) -> None:
        """Send a command without waiting (several engines can think at once); ``receive`` its answer."""
        if self.proc.poll() is not None:
            raise self._died(command)
        try:
            self.proc.stdin.write((command + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._died(command) from None
        self._pending = command

    def receive(self, *, timeout: float | None = None) -> str:
        """The answer to the last command sent (``= text``), or raise OpponentError."""
        command = self._pending
        raw = self._read_answer(command, self.timeout if timeout is None else timeout)
        if raw.startswith("="):
            return raw[1:].strip()
        if raw.startswith("?"):
            raise OpponentError(f"GTP opponent {self.binary!r} refused {command!r}: {raw[1:].strip()}")
        raise OpponentError(
            f"GTP opponent {self.binary!r} answered {command!r} with {raw[:80]!r}, which is not GTP "
            f"(answers start with '=' or '?'): check that it runs in GTP mode; {INSTALL_HINT}"
        )

    def _read_answer(self, command: str, timeout: float) -> str:
        # A GTP answer ends with an empty line; read with select() so that a silent engine cannot block us.
        deadline = time.monotonic() + timeout
        while b"\n\n" not in self._buf.replace(b"\r", b""):
            left = deadline - time.monotonic()
            if left <= 0 or not self._sel.select(left):
                self.close()
                raise OpponentError(
                    f"GTP opponent {self.binary!r} did not answer {command!r} within {timeout:g} s: "
                    "the machine may be overloaded or the engine hung; lower its --level or retry"
                )
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                raise self._died(command)
            self._buf += chunk
            if len(self._buf) > 1 << 20:
                self.close()
                raise OpponentError(f"GTP opponent {self.binary!r} sent over 1 MiB without ending its answer")
        text = self._buf.replace(b"\r", b"")
        answer, _, rest = text.partition(b"\n\n")
        self._buf = rest
        return answer.decode(errors="replace").strip()

    def _died(self, command: str) -> OpponentError:
        code = self.proc.wait(timeout=5) if self.proc.poll() is None else self.proc.returncode
        return OpponentError(
            f"GTP opponent {self.binary!r} exited (status {code}) at {command!r}: run "
            f"`{' '.join(self.command)}` by hand to see why; {INSTALL_HINT}"
        )

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(b"quit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=1)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._sel.close()

    def __enter__(self) -> GTPClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
