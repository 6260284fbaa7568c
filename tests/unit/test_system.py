"""System descriptions: every required field, real values, atomic writes, and the official checker."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from trainperf.errors import ResultsError, UsageError
from trainperf.system import (
    AVAILABILITY,
    REQUIRED_FIELDS,
    SUBMISSION_STATUS,
    check_system_file,
    default_system_name,
    describe_system,
    write_system,
)


@pytest.fixture(scope="module")
def desc() -> dict[str, str]:
    return describe_system(org="trainperf-tests")


def test_description_has_all_33_required_fields_as_strings(desc: dict[str, str]) -> None:
    assert len(REQUIRED_FIELDS) == 33
    assert set(desc) == set(REQUIRED_FIELDS)
    assert all(isinstance(value, str) and value for value in desc.values())
    assert desc["submitter"] == "trainperf-tests"
    assert desc["number_of_nodes"] == "1"
    assert desc["status"] == "Available on-premise"
    assert desc["framework"].startswith("PyTorch ")
    assert int(desc["host_processor_core_count"]) >= 1
    assert int(desc["accelerators_per_node"]) >= 0


def test_required_fields_match_the_official_checker(tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    problems = check_system_file(empty)
    # Ours and the checker's "Missing field" reports are merged; an extra one would show up here.
    assert len(problems) == len(REQUIRED_FIELDS)
    for field in REQUIRED_FIELDS:
        assert any(repr(field) in problem for problem in problems), field


def test_written_file_passes_the_official_checker(desc: dict[str, str], tmp_path: Path) -> None:
    path = write_system(desc, tmp_path / "systems" / f"{desc['system_name']}.json")
    assert json.loads(path.read_text()) == desc
    assert check_system_file(path) == []
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left behind


@pytest.mark.parametrize("availability", sorted(AVAILABILITY))
def test_every_availability_is_accepted(availability: str, tmp_path: Path) -> None:
    desc = describe_system(availability=availability, system_name="test-system")
    assert desc["status"] == AVAILABILITY[availability]
    assert check_system_file(write_system(desc, tmp_path / "test-system.json")) == []


def test_submission_status_values_are_the_mllog_ones() -> None:
    # compliance_checker/training_4.0.0/common.yaml: submission_status in these four.
    assert set(SUBMISSION_STATUS) == set(AVAILABILITY)
    assert set(SUBMISSION_STATUS.values()) == {"cloud", "onprem", "preview", "research"}


def test_unknown_availability_names_the_allowed_values() -> None:
    with pytest.raises(UsageError, match="available, cloud, preview, research"):
        describe_system(availability="onprem")


def test_unsafe_system_name_is_refused() -> None:
    with pytest.raises(UsageError, match="not a plain file name"):
        describe_system(system_name="../escape")


def test_write_under_a_regular_file_raises_results_error(desc: dict[str, str], tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    target = blocker / "systems" / "sys.json"
    with pytest.raises(ResultsError, match=re.escape(str(target))):
        write_system(desc, target)


def test_default_system_name_is_file_name_safe_and_stable() -> None:
    name = default_system_name()
    assert re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]*", name)
    assert re.match(r"\d+x", name)
    assert default_system_name() == name
    assert default_system_name(nodes=4) == f"{name}_n4"
    host = socket.gethostname()
    if len(host) > 3:
        assert host not in name


def test_missing_field_is_reported_by_name(desc: dict[str, str], tmp_path: Path) -> None:
    tampered = {k: v for k, v in desc.items() if k != "cooling"}
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(tampered))
    problems = check_system_file(path)
    assert len(problems) == 1
    assert "missing field 'cooling'" in problems[0]
    assert str(path) in problems[0]


def test_bad_status_does_not_hide_missing_fields(desc: dict[str, str], tmp_path: Path) -> None:
    # The official checker replaces its list of reasons when status is invalid; ours keeps both.
    tampered = {k: v for k, v in desc.items() if k != "cooling"} | {"status": "onprem"}
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(tampered))
    problems = check_system_file(path)
    assert any("missing field 'cooling'" in p for p in problems)
    assert any("status 'onprem'" in p for p in problems)


def test_non_string_values_and_bad_json_are_problems_not_crashes(desc: dict[str, str], tmp_path: Path) -> None:
    path = tmp_path / "numbers.json"
    path.write_text(json.dumps(desc | {"number_of_nodes": 1, "accelerators_per_node": 0}))
    problems = check_system_file(path)
    assert any("'number_of_nodes' must be a string" in p for p in problems)
    assert any("'accelerators_per_node' must be a string" in p for p in problems)

    broken = tmp_path / "broken.json"
    broken.write_text("{")
    [problem] = check_system_file(broken)
    assert "not valid JSON" in problem

    assert "no such file" in check_system_file(tmp_path / "absent.json")[0]


class _FakeProps:
    name = "NVIDIA H100 80GB HBM3"
    total_memory = 85_045_510_144  # what an H100 SXM reports: 79.2 GiB
    clock_rate = 1_980_000  # kHz
    L2_cache_size = 50 * 2**20
    memory_bus_width = 5120


def test_gpu_machine_is_described_from_torch_cuda(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: _FakeProps())

    assert default_system_name() == "8xH100-80GB-HBM3"
    desc = describe_system()
    assert desc["system_name"] == "8xH100-80GB-HBM3"
    assert desc["accelerators_per_node"] == "8"
    assert desc["accelerator_model_name"] == "NVIDIA H100 80GB HBM3"
    assert desc["accelerator_memory_capacity"] == "79 GB"
    assert desc["accelerator_frequency"] == "1980 MHz"
    assert desc["accelerator_on-chip_memories"] == "L2 50 MiB"
    assert desc["accelerator_interconnect"] == "unknown"  # 8 GPUs: NVLink or PCIe, not readable here
    assert check_system_file(write_system(desc, tmp_path / "gpu.json")) == []
