"""Where trainperf reads and writes when the command line does not say: the results folder and the data folder."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_OUT = Path("trainperf-results")


def default_data_dir() -> Path:
    env = os.environ.get("TRAINPERF_DATA_DIR")
    return Path(env) if env else Path.home() / ".cache" / "trainperf" / "data"
