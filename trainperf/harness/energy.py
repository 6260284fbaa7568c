"""Energy to train: CPU packages by RAPL (Linux powercap) and NVIDIA GPUs by NVML, sampled in a thread.

Only what is measured is reported. RAPL's package domains (``/sys/class/powercap/intel-rapl:<n>``,
named ``package-<n>``; AMD Zen exposes the same interface) are summed; their sub-domains (core, uncore,
dram) and the ``psys`` platform domain are left out because they overlap the packages. The RAPL
counter wraps at ``max_energy_range_uj``; sampling at least once a second keeps at most one wrap
between samples (a package would need over 100 kW to wrap twice in a second). Since Linux 5.10 the
counters are readable by root only, so an unprivileged run usually reports RAPL as unavailable. GPUs
use NVML's total-energy counter where the GPU supports it (Volta and later), otherwise their power
readings integrated over time (trapezoids). Memory, disks, fans, network and power-supply losses are
never included. When nothing can be measured the reading says so and holds no figure.
"""

from __future__ import annotations

import abc
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

POWERCAP_ROOT = Path("/sys/class/powercap")
DEFAULT_INTERVAL_S = 0.5  # 2 Hz: the brief asks for >= 1 Hz; RAPL needs it to see every counter wrap
_PACKAGE_ZONE = re.compile(r"^intel-rapl:\d+$")  # top-level zones only; "intel-rapl:0:1" is a sub-domain


@dataclass(frozen=True, kw_only=True)
class EnergyReading:
    """Energy of one run in joules, or None with ``note`` saying "not measured: <why>"."""

    joules: float | None
    sources: list[str] = field(default_factory=list)
    samples: int = 0
    note: str = ""

    @property
    def measured(self) -> bool:
        return self.joules is not None

    def as_record(self) -> dict[str, Any]:
        """The fields a run record (summary.json) or the MLLOG ``trainperf_energy_joules`` event carries."""
        return {"energy_joules": self.joules, "energy_sources": list(self.sources), "energy_note": self.note}


class _Source(abc.ABC):
    """One meter: ``begin`` at the start, ``sample`` on every tick, ``joules`` at the end."""

    label = ""

    @abc.abstractmethod
    def begin(self, t: float) -> None: ...

    @abc.abstractmethod
    def sample(self, t: float) -> None: ...

    @abc.abstractmethod
    def joules(self) -> float: ...


class _RaplPackage(_Source):
    def __init__(self, zone: Path, name: str, max_range_uj: int) -> None:
        self.path = zone / "energy_uj"
        self.label = f"rapl:{name}"
        self.max_range_uj = max_range_uj
        self.total_uj = 0
        self.last = 0

    def _read(self) -> int:
        return int(self.path.read_text().strip())

    def begin(self, t: float) -> None:
        self.last = self._read()
        self.total_uj = 0

    def sample(self, t: float) -> None:
        now = self._read()
        delta = now - self.last
        if delta < 0:  # the counter wrapped at max_energy_range_uj since the last sample
            delta += self.max_range_uj
        self.total_uj += delta
        self.last = now

    def joules(self) -> float:
        return self.total_uj / 1e6


class _NvmlCounter(_Source):
    """NVML's total energy since the driver loaded, in millijoules."""

    def __init__(self, nvml: Any, handle: Any, label: str) -> None:
        self.nvml, self.handle, self.label = nvml, handle, f"{label} energy counter"
        self.first = self.last = 0

    def begin(self, t: float) -> None:
        self.first = self.last = int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))

    def sample(self, t: float) -> None:
        self.last = int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))

    def joules(self) -> float:
        return (self.last - self.first) / 1000.0


class _NvmlPower(_Source):
    """NVML's power reading (milliwatts) integrated over the samples."""

    def __init__(self, nvml: Any, handle: Any, label: str) -> None:
        self.nvml, self.handle, self.label = nvml, handle, f"{label} power readings integrated"
        self.total = 0.0
        self.t = 0.0
        self.watts = 0.0

    def begin(self, t: float) -> None:
        self.t, self.watts, self.total = t, self.nvml.nvmlDeviceGetPowerUsage(self.handle) / 1000.0, 0.0

    def sample(self, t: float) -> None:
        watts = self.nvml.nvmlDeviceGetPowerUsage(self.handle) / 1000.0
        self.total += 0.5 * (watts + self.watts) * (t - self.t)
        self.t, self.watts = t, watts

    def joules(self) -> float:
        return self.total


def rapl_packages(root: Path = POWERCAP_ROOT) -> tuple[list[_Source], str]:
    """The readable RAPL package domains under ``root``, and why there are none (or "")."""
    if not root.is_dir():
        return [], f"no {root} (the kernel exposes no powercap/RAPL interface here, as in most VMs and non-x86 hosts)"
    zones = sorted((p for p in root.iterdir() if _PACKAGE_ZONE.match(p.name)), key=lambda p: p.name)
    found: list[_Source] = []
    problems: list[str] = []
    for zone in zones:
        try:
            name = (zone / "name").read_text().strip()
            if not name.startswith("package"):
                continue  # psys overlaps the packages; counting both would count the CPU twice
            source = _RaplPackage(zone, name, int((zone / "max_energy_range_uj").read_text().strip()))
            source._read()
        except PermissionError:
            problems.append(
                f"permission denied reading {zone}/energy_uj (root-only since Linux 5.10; "
                "run as root or grant read access to measure the CPU)"
            )
            continue
        except (OSError, ValueError) as e:
            problems.append(f"cannot read {zone}: {getattr(e, 'strerror', None) or e}")
            continue
        found.append(source)
    if found:
        return found, ""
    if problems:
        return [], "; ".join(dict.fromkeys(problems))
    return [], f"no RAPL package domain under {root}"


def nvml_gpus(gpus: Sequence[int | str] | None = None) -> tuple[list[_Source], Any, str]:
    """NVML meters for ``gpus`` (NVML indices or UUIDs; None: every GPU NVML sees), the module, why none."""
    try:
        import pynvml
    except ImportError:
        return [], None, "NVML unavailable (the nvidia-ml-py package is not installed)"
    try:
        pynvml.nvmlInit()
    except Exception as e:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...: no NVIDIA driver here
        return [], None, f"NVML unavailable ({e or type(e).__name__})"
    found: list[_Source] = []
    problems: list[str] = []
    try:
        selected: Sequence[int | str] = gpus if gpus is not None else range(pynvml.nvmlDeviceGetCount())
        for gpu in selected:
            label = f"nvml:gpu{gpu}"
            try:
                if isinstance(gpu, str):
                    handle = pynvml.nvmlDeviceGetHandleByUUID(gpu)
                else:
                    handle = pynvml.nvmlDeviceGetHandleByIndex(gpu)
                name = pynvml.nvmlDeviceGetName(handle)
                label += f" ({name.decode() if isinstance(name, bytes) else name})"
            except Exception as e:
                problems.append(f"GPU {gpu}: {e or type(e).__name__}")
                continue
            for kind in (_NvmlCounter, _NvmlPower):
                source = kind(pynvml, handle, label)
                try:
                    source.begin(0.0)
                except Exception as e:
                    problems.append(f"{label}: {kind.__name__[5:].lower()} not supported ({e or type(e).__name__})")
                    continue
                found.append(source)
                break
    except Exception as e:
        problems.append(f"NVML failed ({e or type(e).__name__})")
    if not found:
        _shutdown(pynvml)
        why = "; ".join(problems) if problems else "NVML found no GPU"
        return [], None, why
    return found, pynvml, ""


def _shutdown(nvml: Any) -> None:
    try:
        nvml.nvmlShutdown()
    except Exception:
        pass


class EnergyMeter:
    """Samples the energy counters of this host's CPU packages and GPUs while a run trains.

    ``meter.start()`` before ``run_start``'s work, ``reading = meter.stop()`` right after it; or use it
    as a context manager and read ``meter.reading``. ``gpus`` picks the GPUs by NVML index or UUID
    (``"GPU-…"``, as ``torch.cuda.get_device_properties(i).uuid`` gives it); None meters every GPU
    that NVML sees. Meter on one process per node: every rank of a node sees the same counters.
    """

    def __init__(
        self,
        *,
        powercap_root: Path = POWERCAP_ROOT,
        interval_s: float = DEFAULT_INTERVAL_S,
        gpus: Sequence[int | str] | None = None,
        use_rapl: bool = True,
        use_nvml: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0 < interval_s <= 1.0:
            raise ValueError(f"interval_s must be in (0, 1] (sampling at >= 1 Hz), got {interval_s}")
        self.powercap_root = Path(powercap_root)
        self.interval_s = interval_s
        self.gpus = gpus
        self.use_rapl, self.use_nvml = use_rapl, use_nvml
        self._clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sources: list[_Source] = []
        self._failures: dict[str, int] = {}
        self._unavailable: list[str] = []
        self._nvml: Any = None
        self._samples = 0
        self._started = False
        self.reading: EnergyReading | None = None

    def start(self) -> EnergyMeter:
        if self._started:
            raise RuntimeError("EnergyMeter.start() called twice; make a new meter for each run")
        self._started = True
        if self.use_rapl:
            found, why = rapl_packages(self.powercap_root)
            self._sources += found
            if why:
                self._unavailable.append(f"CPU: {why}")
        if self.use_nvml:
            found, self._nvml, why = nvml_gpus(self.gpus)
            self._sources += found
            if why:
                self._unavailable.append(f"GPU: {why}")
        t = self._clock()
        for source in list(self._sources):
            try:
                source.begin(t)
            except Exception as e:  # readable a moment ago; give up on it rather than guess
                self._sources.remove(source)
                self._unavailable.append(f"{source.label}: {e}")
        self._samples = 1
        if self._sources:
            self._thread = threading.Thread(target=self._loop, name="trainperf-energy", daemon=True)
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def sample(self) -> None:
        """Read every counter now (the thread does this every ``interval_s``)."""
        with self._lock:
            t = self._clock()
            for source in self._sources:
                try:
                    source.sample(t)
                except Exception:  # a missed tick is harmless; a missed final reading is not (see stop)
                    self._failures[source.label] = self._failures.get(source.label, 0) + 1
            self._samples += 1

    def stop(self) -> EnergyReading:
        """Stop sampling; the energy since :meth:`start`, or None and the reason when nothing measured it."""
        if not self._started:
            raise RuntimeError("EnergyMeter.stop() before start()")
        if self.reading is not None:
            return self.reading
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        lost: list[str] = []
        with self._lock:
            t = self._clock()
            kept = []
            for source in self._sources:
                try:
                    source.sample(t)
                except Exception as e:
                    lost.append(f"{source.label} (final reading failed: {e})")
                    continue
                kept.append(source)
            self._samples += 1 if self._sources else 0
        if self._nvml is not None:
            _shutdown(self._nvml)
        self.reading = self._reading(kept, lost)
        return self.reading

    def _reading(self, kept: list[_Source], lost: list[str]) -> EnergyReading:
        reasons = self._unavailable + [f"left out {x}" for x in lost]
        if not kept:
            why = "; ".join(reasons) or "no energy counter found"
            return EnergyReading(joules=None, sources=[], samples=self._samples, note=f"not measured: {why}")
        parts = [f"measured by {', '.join(s.label for s in kept)} at {1 / self.interval_s:g} Hz"]
        parts.append("CPU packages and GPUs only: memory, disks, fans, network and power-supply losses not included")
        parts += reasons
        missed = sum(self._failures.get(s.label, 0) for s in kept)
        if missed:
            parts.append(f"{missed} intermediate reading(s) failed and were skipped")
        return EnergyReading(
            joules=sum(s.joules() for s in kept),
            sources=[s.label for s in kept],
            samples=self._samples,
            note="; ".join(parts),
        )

    def __enter__(self) -> EnergyMeter:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["EnergyMeter", "EnergyReading", "rapl_packages", "nvml_gpus", "POWERCAP_ROOT"]
