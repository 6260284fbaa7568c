"""benchmarks/calibration_ab.py: two checkouts' runs alternate seed by seed and are compared."""

from __future__ import annotations

import json

import pytest

from benchmarks import calibration_ab

# A stand-in checkout: its `python -m trainperf run` writes the summary a mini run writes, with a time-to-train
# that depends on the side and the seed, and notes the order in which the runs came.
STUB = """
import json, sys
from pathlib import Path
args = sys.argv[1:]
seed = int(args[args.index("--seed") + 1])
out = Path(args[args.index("--out") + 1])
out.mkdir(parents=True)
with open(Path(__file__).parents[2] / "order.txt", "a") as f:
    f.write(f"{SIDE} {seed}\\n")
run = {"status": "success", "minutes": (seed - 100000) * MINUTES, "progress": 3.0, "quality": QUALITY}
(out / "summary.json").write_text(json.dumps({"benchmarks": [{"runs": [run]}]}))
"""


def stub_checkout(root, side, minutes, quality):
    pkg = root / side / "trainperf"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    code = STUB.replace("SIDE", repr(side)).replace("MINUTES", repr(minutes)).replace("QUALITY", repr(quality))
    (pkg / "__main__.py").write_text(code)
    return root / side


def test_the_sides_alternate_and_their_medians_are_compared(tmp_path, capsys):
    base = stub_checkout(tmp_path, "base", 1.0, 0.9)
    now = stub_checkout(tmp_path, "now", 1.1, 0.9)
    out = tmp_path / "runs"
    argv = ["fake", "--base", str(base), "--now", str(now), "--runs", "3", "--out", str(out)]
    assert calibration_ab.main([*argv, "--json", str(tmp_path / "ab.json")]) == 0
    # base first on odd seeds, this checkout first on even ones
    order = (tmp_path / "order.txt").read_text().split("\n")[:-1]
    assert order == ["base 100001", "now 100001", "now 100002", "base 100002", "base 100003", "now 100003"]
    result = json.loads((tmp_path / "ab.json").read_text())
    assert result["medians"] == {"now": pytest.approx(2 * 1.1 * 60), "base": pytest.approx(2 * 60)}
    assert result["ratio"] == pytest.approx(1.1)
    assert result["same_stops_and_metrics"] is True
    assert "median now / base = 1.100" in capsys.readouterr().out


def test_a_different_metric_is_reported():
    run = {"status": "success", "minutes": 1.0, "progress": 3.0, "quality": 0.9}
    result = calibration_ab.compare({"now": [run], "base": [{**run, "quality": 0.8}]})
    assert result["same_stops_and_metrics"] is False


def test_a_folder_that_is_not_a_checkout_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        calibration_ab.main(["minigo", "--base", str(tmp_path)])
    assert stop.value.code == 2
    assert "no trainperf/__init__.py there" in capsys.readouterr().err
