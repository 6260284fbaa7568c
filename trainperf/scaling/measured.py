"""A measured run for the scaling model, read from a trainperf results folder's MLLOG result files.

The files are untrusted: only numbers are taken from them (global batch, world size, training samples,
progress, minutes), each checked; nothing in them is used as a path. The files are found by the layout
``RESULTS/results/<system>/<benchmark>/result_<i>.txt`` alone, links are skipped.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from trainperf import registry
from trainperf.errors import DataError, UsageError
from trainperf.results import first_values, parse_run, read_mllog
from trainperf.scaling.model import Measured
from trainperf.text import shell_command


def _number(value: Any, path: Path, key: str, *, whole: bool = False) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    if not ok or (whole and value != int(value)):
        kind = "a positive whole number" if whole else "a positive number"
        raise DataError(f"{path}: '{key}' is {value!r}, not {kind}; this result file cannot be scaled (rerun it)")
    return float(value)


def result_files(results: Path, benchmark: str) -> list[Path]:
    if not results.is_dir():
        raise UsageError(f"--from {results}: no such folder; give the --out folder of a `trainperf run {benchmark}`")
    return sorted(p for p in results.glob(f"results/*/{benchmark}/result_*.txt") if p.is_file() and not p.is_symlink())


def read_measured(results: Path, benchmark: str) -> Measured:
    """The median successful run of ``benchmark`` in ``results`` (time to train and samples to converge)."""
    files = result_files(results, benchmark)
    runs = []
    for path in files:
        logged = parse_run(path)  # refuses impossible timing, naming the file and line
        if not logged.success or logged.minutes is None or not logged.curve:
            continue
        values = first_values(read_mllog(path))
        if values.get("submission_benchmark") != benchmark:
            raise DataError(
                f"{path}: logged as benchmark {values.get('submission_benchmark')!r}, in the folder of {benchmark!r}; "
                "move it to its own benchmark's folder"
            )
        scale = values.get("trainperf_scale")
        if scale not in ("mini", "reference"):
            raise DataError(f"{path}: 'trainperf_scale' is {scale!r}, not 'mini' or 'reference'; rerun it")
        if values.get("trainperf_dry_run") is True or values.get("trainperf_smoke") not in (None, False):
            continue  # a dry or smoke run is never a time to train
        unit = values.get("trainperf_progress_unit")
        if unit not in ("epochs", "samples"):
            raise DataError(
                f"{path}: progress unit {unit!r}: the scaling model needs runs counted in epochs or samples"
            )
        batch = _number(values.get("global_batch_size"), path, "global_batch_size", whole=True)
        world = _number(values.get("trainperf_world_size", 1), path, "trainperf_world_size", whole=True)
        progress = _number(logged.curve[-1][1], path, "epoch_num of the last eval_accuracy")
        progress -= registry.get_spec(benchmark, scale).epoch_num_offset  # dlrm logs 1 + epochs
        train = _number(values.get("train_samples"), path, "train_samples", whole=True)
        samples = progress * train if unit == "epochs" else progress
        minutes = _number(logged.minutes, path, "run_stop - run_start")
        runs.append((scale, int(world), batch, minutes, samples, path))
    if not runs:
        where = results / "results" / "*" / benchmark
        raise DataError(
            f"--from {results}: no successful {benchmark} run in {where} ({len(files)} result file(s) found); "
            "the model needs a measured time to train: run "
            f"`{shell_command('trainperf', 'run', benchmark, '--out', results)}` first"
        )
    shapes = {(s, w, b) for s, w, b, *_ in runs}
    if len(shapes) > 1:
        described = "; ".join(f"{s} scale, {w} accelerator(s), global batch {b:g}" for s, w, b in sorted(shapes))
        raise DataError(
            f"--from {results}: the {benchmark} runs differ ({described}); scale from a folder of runs of one "
            "configuration"
        )
    scale, world, batch = shapes.pop()
    return Measured(
        benchmark=benchmark,
        scale=scale,
        accelerators=world,
        global_batch=batch,
        minutes=statistics.median(r[3] for r in runs),
        samples_to_converge=statistics.median(r[4] for r in runs),
    )
