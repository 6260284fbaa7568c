"""Run MLCommons' rcp_checker on many benchmark folders in one interpreter (started by ``official.run_rcp_checkers``;
``_batch_tools.py`` runs its ``_check`` in a package's one tool process).

    python _batch_rcp.py --out RESULTS.jsonl SPEC.json

SPEC is a JSON list of ``{"dir", "version", "custom_rcps" (a path or null), "train_samples" (a boolean: the
rcp_checker flag that counts train_samples), "log"}``. For each, in order, this does what
``python -m mlperf_logging.rcp_checker DIR --rcp_usage training --rcp_version VERSION --rcp_pass pruned_rcps
[--custom_rcps FILE] [--bert_train_samples] --log_output LOG`` does (its messages
formatted ``LEVEL - message`` as its ``main`` formats them, its verdict line, exit code 1 on a failed check) and
appends one JSON line ``{"rc", "out", "err", "log"}`` to RESULTS, flushed at once. A process per folder costs an
interpreter and mlperf-logging's imports; the checks themselves are the same.

Run by path, so that the confined process imports nothing of trainperf: only the standard library and
mlperf-logging. Every result file has passed trainperf's gate before it gets here.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import traceback

from mlperf_logging.rcp_checker import rcp_checker


def _check(spec: dict) -> dict[str, object]:
    log, err = io.StringIO(), io.StringIO()
    formatter = logging.Formatter("%(levelname)s - %(message)s")
    handlers = [logging.StreamHandler(log), logging.StreamHandler(err)]
    for h in handlers:
        h.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers = list(handlers)
    root.setLevel(logging.INFO)
    out, rc = io.StringIO(), 0
    try:
        custom = open(spec["custom_rcps"], encoding="utf-8") if spec["custom_rcps"] else None  # noqa: SIM115
        try:
            with contextlib.redirect_stdout(out):
                passed, msg, _ = rcp_checker.check_directory(
                    spec["dir"],
                    "training",
                    spec["version"],
                    False,
                    spec["train_samples"],  # check_directory's argument for the samples-counting flag
                    rcp_file=custom,
                    rcp_pass="pruned_rcps",
                )
        finally:
            if custom is not None:
                custom.close()
        if passed:
            logging.info("%s, RCP test PASSED", msg)
        else:
            logging.error("%s, RCP test FAILED, consider adding --rcp_bypass in when running the package_checker.", msg)
            rc = 1
        out.write(f"** Logging output also at {spec['log']}\n")
    except Exception:  # noqa: BLE001 - the checker's crash on one folder is that folder's result, as for one process
        err.write(traceback.format_exc())
        rc = 1
    finally:
        root.handlers = []
    return {"rc": rc, "out": out.getvalue(), "err": err.getvalue(), "log": log.getvalue()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("spec")
    args = ap.parse_args()
    with open(args.spec, encoding="utf-8") as f:
        specs = json.load(f)
    with open(args.out, "a", encoding="utf-8") as results:
        for spec in specs:
            results.write(json.dumps(_check(spec)) + "\n")
            results.flush()


if __name__ == "__main__":
    main()
