"""Rank-0 MLLOG output for one run, written with ``mlperf_logging.mllog``.

Each run gets its own ``logging.Logger`` and file handler (the package's shared logger would write
every run of a suite into every file). Other ranks get a logger that writes nothing.
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import Any

from mlperf_logging.mllog import constants
from mlperf_logging.mllog import mllog as mllog_impl

_ids = itertools.count()
_ROOT = str(Path(__file__).resolve().parents[2]) + "/"  # log call sites relative to the package's parent


class RunLog:
    """MLLOG lines of one run; ``path`` is None on ranks other than 0."""

    def __init__(self, path: Path | None, *, echo: bool = False) -> None:
        self.path = path
        self._logger = logging.getLogger(f"trainperf.mllog.{next(_ids)}")
        self._logger.propagate = False
        self._logger.setLevel(logging.INFO)
        self._handlers: list[logging.Handler] = []
        if path is not None:
            self._handlers.append(logging.FileHandler(path, mode="w", encoding="utf-8"))
            if echo:
                self._handlers.append(logging.StreamHandler())
        else:
            self._handlers.append(logging.NullHandler())
        for h in self._handlers:
            self._logger.addHandler(h)
        # stack offset 2: the caller's caller (the harness line that asked for the event)
        self._mllogger = mllog_impl.MLLogger(logger=self._logger, default_stack_offset=2, root_dir=_ROOT)

    def event(self, key: str, value: Any = None, metadata: dict | None = None, time_ms: float | None = None) -> None:
        self._mllogger.event(key=key, value=value, metadata=metadata, time_ms=time_ms)

    def start(self, key: str, value: Any = None, metadata: dict | None = None, time_ms: float | None = None) -> None:
        self._mllogger.start(key=key, value=value, metadata=metadata, time_ms=time_ms)

    def end(self, key: str, value: Any = None, metadata: dict | None = None, time_ms: float | None = None) -> None:
        self._mllogger.end(key=key, value=value, metadata=metadata, time_ms=time_ms)

    def close(self) -> None:
        for h in self._handlers:
            h.flush()
            h.close()
            self._logger.removeHandler(h)
        self._handlers.clear()


__all__ = ["RunLog", "constants"]
