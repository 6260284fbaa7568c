"""EnergyMeter: RAPL package counters (with wrap-around) from a fake powercap tree, NVML from a fake
pynvml, and the honest "not measured" when nothing is readable."""

from __future__ import annotations

import os
import sys
import time
import types
from pathlib import Path

import pytest

from trainperf.harness.energy import EnergyMeter, EnergyReading


def put(path: Path, value: object) -> None:
    """Write a sysfs-like file atomically, so the meter's thread never reads half a number."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{value}\n")
    os.replace(tmp, path)


def zone(root: Path, name: str, label: str, energy_uj: int, max_uj: int = 1_000_000) -> Path:
    z = root / name
    put(z / "name", label)
    put(z / "energy_uj", energy_uj)
    put(z / "max_energy_range_uj", max_uj)
    return z / "energy_uj"


@pytest.fixture
def powercap(tmp_path) -> dict[str, Path]:
    """Two packages, a core sub-domain and a psys domain (the last two overlap the packages)."""
    root = tmp_path / "powercap"
    put(root / "intel-rapl" / "enabled", 1)  # the control-type folder, not a zone
    return {
        "root": root,
        "pkg0": zone(root, "intel-rapl:0", "package-0", 900_000),
        "core0": zone(root, "intel-rapl:0:0", "core", 5_000),
        "pkg1": zone(root, "intel-rapl:1", "package-1", 0),
        "psys": zone(root, "intel-rapl:2", "psys", 0),
    }


def test_rapl_sums_packages_only_and_survives_a_wrap(powercap):
    meter = EnergyMeter(powercap_root=powercap["root"], use_nvml=False, interval_s=1.0)
    meter.start()
    put(powercap["pkg0"], 100_000)  # wrapped at 1,000,000 µJ: +200,000
    put(powercap["pkg1"], 400_000)
    put(powercap["core0"], 999_999)  # a sub-domain: never counted
    put(powercap["psys"], 999_999)  # the platform domain: never counted
    meter.sample()
    put(powercap["pkg0"], 300_000)  # +200,000
    put(powercap["pkg1"], 500_000)
    reading = meter.stop()
    assert reading.joules == pytest.approx(0.4 + 0.5)
    assert reading.sources == ["rapl:package-0", "rapl:package-1"]
    assert reading.samples >= 3
    assert "not included" in reading.note and not reading.note.startswith("not measured")
    assert meter.stop() is reading  # stopping twice returns the same reading


def test_the_thread_samples_at_least_once_a_second(powercap):
    with EnergyMeter(powercap_root=powercap["root"], use_nvml=False, interval_s=0.05) as meter:
        time.sleep(0.4)
    assert meter.reading is not None and meter.reading.samples >= 4
    assert meter.reading.joules == 0.0  # the counters did not move: zero, measured
    with pytest.raises(ValueError, match="1 Hz"):
        EnergyMeter(interval_s=2.0)


def test_nothing_readable_is_not_measured_and_holds_no_figure(tmp_path):
    reading = EnergyMeter(powercap_root=tmp_path / "absent", use_nvml=False).start().stop()
    assert reading == EnergyReading(joules=None, sources=[], samples=1, note=reading.note)
    assert reading.note.startswith("not measured:") and "absent" in reading.note
    assert reading.as_record()["energy_joules"] is None


def test_permission_denied_counters_are_unavailable(powercap, monkeypatch):
    real = Path.read_text

    def read_text(self, *args, **kwargs):
        if self.name == "energy_uj":
            raise PermissionError(13, "Permission denied")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", read_text)
    reading = EnergyMeter(powercap_root=powercap["root"], use_nvml=False).start().stop()
    assert reading.joules is None and "permission denied" in reading.note and "root" in reading.note


def test_a_counter_lost_before_the_end_is_left_out_not_guessed(powercap):
    meter = EnergyMeter(powercap_root=powercap["root"], use_nvml=False, interval_s=1.0).start()
    put(powercap["pkg1"], 500_000)
    put(powercap["pkg0"], "garbage")
    reading = meter.stop()
    assert reading.sources == ["rapl:package-1"] and reading.joules == pytest.approx(0.5)
    assert "left out rapl:package-0" in reading.note


def fake_nvml(*, counter: bool) -> types.ModuleType:
    nvml = types.ModuleType("pynvml")
    state = {"mj": 1_000_000, "shutdown": False}

    class NVMLError(Exception):
        pass

    def total_energy(handle):
        if not counter:
            raise NVMLError("Not Supported")
        return state["mj"]

    nvml.NVMLError = NVMLError
    nvml.nvmlInit = lambda: None
    nvml.nvmlShutdown = lambda: state.update(shutdown=True)
    nvml.nvmlDeviceGetCount = lambda: 1
    nvml.nvmlDeviceGetHandleByIndex = lambda i: f"h{i}"
    nvml.nvmlDeviceGetName = lambda h: b"NVIDIA H200"
    nvml.nvmlDeviceGetTotalEnergyConsumption = total_energy
    nvml.nvmlDeviceGetPowerUsage = lambda h: 250_000  # mW
    nvml.state = state
    return nvml


def test_nvml_energy_counter(monkeypatch, tmp_path):
    nvml = fake_nvml(counter=True)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    meter = EnergyMeter(powercap_root=tmp_path / "absent", interval_s=1.0).start()
    nvml.state["mj"] += 123_456
    reading = meter.stop()
    assert reading.joules == pytest.approx(123.456)
    assert reading.sources == ["nvml:gpu0 (NVIDIA H200) energy counter"]
    assert "CPU: no " in reading.note  # what was not measured is said
    assert nvml.state["shutdown"]


def test_nvml_power_integrated_when_the_counter_is_unsupported(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(counter=False))
    now = [100.0]
    meter = EnergyMeter(powercap_root=tmp_path / "absent", clock=lambda: now[0]).start()
    now[0] = 110.0
    reading = meter.stop()
    assert reading.joules == pytest.approx(250.0 * 10)
    assert reading.sources == ["nvml:gpu0 (NVIDIA H200) power readings integrated"]


def test_no_nvml_package_or_driver_is_not_measured(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    reading = EnergyMeter(powercap_root=tmp_path / "absent").start().stop()
    assert reading.joules is None and "nvidia-ml-py" in reading.note

    broken = fake_nvml(counter=True)

    def no_driver():
        raise broken.NVMLError("Driver Not Loaded")

    broken.nvmlInit = no_driver
    monkeypatch.setitem(sys.modules, "pynvml", broken)
    reading = EnergyMeter(powercap_root=tmp_path / "absent").start().stop()
    assert reading.joules is None and "Driver Not Loaded" in reading.note
