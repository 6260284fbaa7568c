"""`trainperf package` on a results folder whose system name a shell would run: refused before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainperf.errors import ResultsError
from trainperf.submission.package import build_package

HOSTILE = "x$(touch F)`id`;y"


def _log(system: str) -> str:
    records = [
        ("submission_org", "acme"),
        ("submission_platform", system),
        ("submission_benchmark", "resnet"),
        ("trainperf_scale", "mini"),
        ("run_start", None),
        ("run_stop", None),
    ]
    lines = []
    for t, (key, value) in enumerate(records):
        rec = {"namespace": "", "time_ms": 1_700_000_000_000 + t, "event_type": "POINT_IN_TIME", "key": key}
        rec |= {"value": value, "metadata": {"status": "success"} if key == "run_stop" else {}}
        lines.append(":::MLLOG " + json.dumps(rec))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("system", [HOSTILE, "box\x1b[2J", "two words"])
def test_a_system_folder_that_is_not_a_plain_name_is_refused_and_nothing_is_written(tmp_path: Path, system: str):
    out = tmp_path / "runs"
    bench = out / "results" / system / "resnet"
    bench.mkdir(parents=True)
    (bench / "result_0.txt").write_text(_log(system))
    (out / "systems").mkdir()
    (out / "systems" / f"{system}.json").write_text(json.dumps({"submitter": "acme", "system_name": system}))
    with pytest.raises(ResultsError, match="not a plain name") as err:
        build_package([out], tmp_path / "pkg", org="acme")
    assert "\x1b" not in str(err.value)  # the name is printed escaped, never raw to a terminal
    assert not (tmp_path / "pkg").exists() and not (tmp_path / "F").exists()
