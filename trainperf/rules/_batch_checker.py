"""Run MLCommons' compliance checker on many result files in one interpreter (started by
``compliance.check_logs``; review's one tool process, ``submission/_batch_tools.py``, loads it too).

    python _batch_checker.py --usage training --ruleset 2.0.0 [--config FILE] --out RESULTS.jsonl LOG...

For each LOG, in order, this does what ``python -m mlperf_logging.compliance_checker`` does for one file (a fresh
checker, its messages formatted ``LEVEL - message`` as its ``__main__`` formats them) and appends one JSON line
``{"file": LOG, "rc": 0 or 1, "out": ..., "err": ...}`` to RESULTS, flushed at once, so that a batch stopped by its
time limit still gives the files it finished. A process per file costs an interpreter and mlperf-logging's imports
(about 0.2 s each, most of a review of the v2.0 round's 2,760 files); the checks themselves are the same.

Run by path, not as ``trainperf.rules._batch_checker``, so that the confined process imports nothing of trainperf:
only the standard library and mlperf-logging. Every LOG has passed trainperf's gate before it gets here.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import logging
import traceback
import types

import yaml
from mlperf_logging.compliance_checker import mlp_compliance


class _ParsedOnce:
    """``yaml`` as the checker uses it (``yaml.load(file, Loader=yaml.BaseLoader)`` of a rule file, for every log
    and every rule file it includes): each text parsed once, a fresh copy of the result given every time (the
    base loader makes only strings, lists and dicts). The same rules, without most of the checker's time."""

    def __init__(self) -> None:
        self._parsed: dict[tuple[str, type], object] = {}

    def load(self, stream: io.TextIOBase, Loader: type) -> object:  # noqa: N803 - yaml.load's own keyword
        text = stream.read()
        if (text, Loader) not in self._parsed:
            self._parsed[(text, Loader)] = yaml.load(text, Loader=Loader)  # noqa: S506 - the base loader, as the checker
        return copy.deepcopy(self._parsed[(text, Loader)])


mlp_compliance.yaml = types.SimpleNamespace(load=_ParsedOnce().load, BaseLoader=yaml.BaseLoader)  # type: ignore[attr-defined]


def _check(path: str, usage: str, ruleset: str, config: str) -> dict[str, object]:
    err, out = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("%(levelname)s - %(message)s"))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(logging.INFO)
    try:
        with contextlib.redirect_stdout(out):
            checker = mlp_compliance.make_checker(usage, ruleset, False, False)
            valid, *_ = mlp_compliance.main(path, config, checker)
        rc = 0 if valid else 1
        logging.info("SUCCESS") if valid else logging.error("FAILED")
    except Exception:  # noqa: BLE001 - the checker's crash on one file is that file's result, as for one process
        err.write(traceback.format_exc())
        rc = 1
    finally:
        root.handlers = []
    return {"file": path, "rc": rc, "out": out.getvalue(), "err": err.getvalue()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--usage", required=True)
    ap.add_argument("--ruleset", required=True)
    ap.add_argument("--config")
    ap.add_argument("--out", required=True)
    ap.add_argument("logs", nargs="+")
    args = ap.parse_args()
    config = args.config or f"{args.usage}_{args.ruleset}/common.yaml"
    with open(args.out, "a", encoding="utf-8") as results:
        for path in args.logs:
            results.write(json.dumps(_check(path, args.usage, args.ruleset, config)) + "\n")
            results.flush()


if __name__ == "__main__":
    main()
