"""What a committed mini log of a calibration seed's run to its target must show: it stopped at the first
evaluation that reached the target, the official checker with the mini rules passes it (and `trainperf check`),
and its target decides: the deciding evaluation moved to the wrong side of it fails the check on the target
alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trainperf import registry
from trainperf.results import first_values, parse_run, read_mllog
from trainperf.rules.compliance import check_log, is_target_only_failure
from trainperf.spec import BenchmarkSpec

HERE = Path(__file__).parent
PREFIX = ":::MLLOG "


def mini_log(key: str) -> Path:
    """``tests/integration/<key>_mini_log.txt``: a calibration seed's `trainperf run <key>` log, its source paths
    made relative."""
    return HERE / f"{key}_mini_log.txt"


def evaluations(log: Path, spec: BenchmarkSpec) -> list[dict[str, float]]:
    """Each logged evaluation as ``{field: value}`` (maskrcnn logs ``{"BBOX": .., "SEGM": ..}``, the others one
    number)."""
    logged = [r["value"] for r in read_mllog(log) if r.get("key") == "eval_accuracy"]
    return [v if isinstance(v, dict) else {spec.fields[0][0]: v} for v in logged]


def assert_a_success_stopped_at_the_first_evaluation_reaching_the_target(log: Path, spec: BenchmarkSpec) -> None:
    """A success of the default mini recipe, evaluated on its spec's schedule, that stopped at the first
    evaluation reaching the target."""
    run = parse_run(log)
    assert run.status == "success" and run.benchmark == spec.key and run.scale == "mini"
    first = first_values(read_mllog(log))
    assert first["trainperf_overrides"] == {} and first["trainperf_dry_run"] is False
    points = spec.eval_points(registry.default_recipe(spec.key, "mini"))
    logged = [p - spec.epoch_num_offset for _, p, _ in run.curve]
    assert logged == pytest.approx(points[: len(logged)], abs=1e-6), logged
    evals = evaluations(log, spec)
    assert len(evals) == len(run.curve)
    assert spec.reached(evals[-1]) and not any(spec.reached(v) for v in evals[:-1]), evals
    assert {f for f, _ in spec.fields} == set(evals[-1])  # every field the metric has, as MLPerf logs them


def assert_the_checker_passes(log: Path) -> None:
    res = check_log(log)
    assert res.passed and res.scale == "mini" and res.ruleset == "2.0.0", res.problems
    checked = subprocess.run(
        [sys.executable, "-m", "trainperf", "check", str(log)], capture_output=True, text=True, timeout=300
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def _wrong_side(spec: BenchmarkSpec, value: Any) -> Any:
    """The deciding evaluation's value moved just past its (first) target the wrong way."""
    field, target = spec.fields[0]
    worse = target - 0.01 if spec.higher_is_better else target + 0.01
    return {**value, field: worse} if isinstance(value, dict) else worse


def assert_the_target_decides(log: Path, spec: BenchmarkSpec, tmp_path: Path) -> None:
    lines = log.read_text().splitlines(keepends=True)
    last = max(i for i, line in enumerate(lines) if '"key": "eval_accuracy"' in line)
    record = json.loads(lines[last].removeprefix(PREFIX))
    record["value"] = _wrong_side(spec, record["value"])
    lines[last] = PREFIX + json.dumps(record) + "\n"
    worse = tmp_path / "result_0.txt"
    worse.write_text("".join(lines))
    assert not spec.reached(evaluations(worse, spec)[-1])
    res = check_log(worse)
    assert is_target_only_failure(res), res.problems
