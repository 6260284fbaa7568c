"""Rank-0 MLLOG output for one run, written with ``mlperf_logging.mllog``.

Each run gets its own ``logging.Logger`` and file handler (the package's shared logger would write
every run of a suite into every file). Other ranks get a logger that writes nothing.

The log file is created new (``O_CREAT | O_EXCL | O_NOFOLLOW``: never an existing file, never through a
link), every line is flushed as it is logged, and a line that cannot be written (a full disk, an I/O
error) stops the run with a :class:`~trainperf.errors.ResultsError` at once: logging's own handlers
print such errors and carry on, which would train to the end and leave a truncated log. ``close()``
fsyncs the file, so a finished run's log is on disk before it is renamed into a result file.
"""

from __future__ import annotations

import itertools
import logging
import os
from pathlib import Path
from typing import Any, TextIO

from mlperf_logging.mllog import constants
from mlperf_logging.mllog import mllog as mllog_impl

from trainperf.errors import ResultsError

_ids = itertools.count()
_ROOT = str(Path(__file__).resolve().parents[2]) + "/"  # log call sites relative to the package's parent
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def mlperf_division(division: str, scale: str) -> str:
    """The MLPerf division a run declares (``submission_division``, and its system JSON): its own at the
    reference scale; ``open`` for a mini run, since the v2.0 closed rule files enforce the reference targets.
    trainperf's own division is logged separately as ``trainperf_division``."""
    return division if scale == "reference" else "open"


def _open_log(path: Path) -> TextIO:
    """A new file at ``path``, opened for writing text (tests replace this to inject write errors)."""
    fd = os.open(path, _CREATE_FLAGS, 0o644)
    return os.fdopen(fd, "w", encoding="utf-8")


class _LogFileHandler(logging.StreamHandler):
    """Writes and flushes each line; the first OSError is kept and raised again on every later line."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self.error: OSError | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.error is not None:  # never write after a failed line (mllog logs its own complaint next)
            raise self.error
        try:
            self.stream.write(self.format(record) + self.terminator)
            self.stream.flush()
        except OSError as e:
            self.error = e
            raise

    def sync(self) -> None:
        """Flush and fsync the file (raises the write's OSError)."""
        if self.error is not None:
            raise self.error
        try:
            self.stream.flush()
            os.fsync(self.stream.fileno())
        except OSError as e:
            self.error = e
            raise

    def close(self) -> None:
        try:
            self.stream.close()  # flushes: after a failed write the buffer may fail again; that is known
        except OSError as e:
            self.error = self.error or e
        finally:
            logging.Handler.close(self)


class RunLog:
    """MLLOG lines of one run; ``path`` is None on ranks other than 0."""

    def __init__(self, path: Path | None, *, echo: bool = False) -> None:
        self.path = path
        self._logger = logging.getLogger(f"trainperf.mllog.{next(_ids)}")
        self._logger.propagate = False
        self._logger.setLevel(logging.INFO)
        self._handlers: list[logging.Handler] = []
        self._file: _LogFileHandler | None = None
        if path is not None:
            try:
                stream = _open_log(path)
            except FileExistsError:
                raise ResultsError(
                    f"cannot create the run log {path}: a file or link of that name already exists (run logs "
                    "are always created new); is another run writing into this folder? Move it away"
                ) from None
            except OSError as e:
                raise ResultsError(
                    f"cannot create the run log {path}: {e.strerror or e} (run logs are created new and never "
                    "through a link); choose another --out"
                ) from None
            self._file = _LogFileHandler(stream)
            self._handlers.append(self._file)
            if echo:
                self._handlers.append(logging.StreamHandler())
        else:
            self._handlers.append(logging.NullHandler())
        for h in self._handlers:
            self._logger.addHandler(h)
        # stack offset 3: the caller's caller (the harness line that asked for the event), past _log
        self._mllogger = mllog_impl.MLLogger(logger=self._logger, default_stack_offset=3, root_dir=_ROOT)

    def event(self, key: str, value: Any = None, metadata: dict | None = None, time_ms: float | None = None) -> None:
        self._log(self._mllogger.event, key, value, metadata, time_ms)

    def start(self, key: str, value: Any = None, metadata: dict | None = None, time_ms: float | None = None) -> None:
        self._log(self._mllogger.start, key, value, metadata, time_ms)

    def end(self, key: str, value: Any = None, metadata: dict | None = None, time_ms: float | None = None) -> None:
        self._log(self._mllogger.end, key, value, metadata, time_ms)

    def _log(self, method: Any, key: str, value: Any, metadata: dict | None, time_ms: float | None) -> None:
        try:
            method(key=key, value=value, metadata=metadata, time_ms=time_ms)
        except OSError:
            if not self.failed:
                raise
        self._raise_if_failed()  # the handler kept the write's error (mllog may have caught it)

    def _raise_if_failed(self) -> None:
        if self._file is not None and self._file.error is not None:
            e = self._file.error
            raise ResultsError(
                f"cannot write the run log {self.path}: {e.strerror or e}; free space on that disk (or choose "
                "another --out) and run the same command again: finished runs are kept, this one is redone"
            )

    @property
    def failed(self) -> bool:
        """Whether a line could not be written (the run is then invalid)."""
        return self._file is not None and self._file.error is not None

    def close(self) -> None:
        """Flush, fsync and close the file; a ResultsError when its last lines could not be written.

        A log that has already failed closes without raising again (its run is already stopping).
        """
        failed_before = self.failed
        try:
            if self._file is not None and not failed_before:
                try:
                    self._file.sync()
                except OSError:
                    pass  # raised below
        finally:
            for h in self._handlers:
                h.close()
                self._logger.removeHandler(h)
            self._handlers.clear()
        if not failed_before:
            self._raise_if_failed()


__all__ = ["RunLog", "constants"]
