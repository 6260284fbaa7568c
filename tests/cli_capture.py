"""`trainperf <argv>` in the test's own process, its output captured as a UTF-8 terminal would take it."""

from __future__ import annotations

import contextlib
import functools
import io
from unittest import mock

from trainperf import cli

PARSER = functools.cache(cli.build_parser)  # built once: argparse takes 10 ms to build it


def run_cli(argv: list[str]) -> tuple[int, str]:
    """(exit code, stdout and stderr) of ``trainperf <argv>``; text that a strict UTF-8 terminal could not take
    (a lone surrogate) raises, as it would there."""
    out, err = io.BytesIO(), io.BytesIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8", errors="strict", write_through=True)
    stderr = io.TextIOWrapper(err, encoding="utf-8", errors="strict", write_through=True)
    with (
        contextlib.redirect_stdout(stdout),
        contextlib.redirect_stderr(stderr),
        mock.patch.object(cli, "build_parser", PARSER),
    ):
        rc = cli.main(argv)
    stdout.flush()
    stderr.flush()
    text = (out.getvalue() + err.getvalue()).decode("utf-8")
    stdout.detach()
    stderr.detach()
    return rc, text
