"""The workload contract, checked over the registry: every available workload at both scales.

Each takes one harness step on its synthetic batch, evaluates to a mapping with its spec's fields,
reports its spec's hyperparameters, closes idempotently, leaves no global torch state behind, and
declares MLPerf's tensor names where the official closed rules list them.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import mlperf_logging
import pytest
import yaml
from stepping import dry_workload, one_step

from trainperf import registry
from trainperf.harness.torch_state import GlobalTorchState, torch_state
from trainperf.spec import SCALES

CASES = [(k, s) for k in registry.available() for s in SCALES if registry.benchmark(k).available_at(s)]
CHECKER = Path(mlperf_logging.__file__).parent / "compliance_checker"


def official_tensor_names(key: str) -> list[str] | None:
    """The tensor names closed_<key>.yaml of the benchmark's round requires in weights_initialization lines (None:
    it requires none)."""
    rules = CHECKER / f"training_{registry.round_of(key).ruleset}"
    for record in yaml.safe_load((rules / f"closed_{key}.yaml").read_text()) or []:
        check = str((record.get("END") or {}).get("CHECK", ""))
        if "initialized_tensors" in check:
            return re.findall(r"""["']([^"']+)["']""", check.split("sorted(", 2)[-1])
    return None


@pytest.mark.parametrize("key,scale", CASES, ids=[f"{k}-{s}" for k, s in CASES])
def test_workload_keeps_the_contract(key, scale, tmp_path):
    before = GlobalTorchState.now()
    with torch_state(registry.workload_class(key).TORCH_STATE):
        w = dry_workload(key, scale, tmp_path)
        try:
            model, value = one_step(w)
            assert all(isinstance(v, float) for v in value.values())
            names = w.reference_tensor_names(getattr(model, "module", model))
        finally:
            w.close()
        w.close()  # idempotent
    assert GlobalTorchState.now() == before
    expected = official_tensor_names(key) if scale == "reference" else None
    if expected:
        assert sorted(names) == sorted(expected)


def test_every_key_is_registered_without_torch():
    import subprocess

    code = (
        "import sys; from trainperf import registry; "
        "[registry.benchmark(k) for k in registry.BENCHMARKS]; "
        "from trainperf.cli import main; sys.argv = ['trainperf', 'list', '--round', 'all']; main(); "
        "assert 'torch' not in sys.modules, 'reading the registry imported torch'"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    for key in registry.BENCHMARKS:
        assert key in r.stdout


def test_unbuilt_benchmarks_answer_not_available():
    from trainperf.errors import NotAvailableError

    for bench in registry.all_benchmarks():
        if bench.workload is None:
            assert bench.specs, f"{bench.key} has no spec"
            with pytest.raises(NotAvailableError, match="not available yet"):
                registry.get_spec(bench.key, "reference")
