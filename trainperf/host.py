"""What this host is, as the system description reports it: its CPUs and their caches, memory, the disk under a
folder, its CUDA accelerators, the software stack and the operating system. Read from /proc, /sys, psutil and
torch.cuda; what cannot be read is "unknown" rather than guessed."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
from dataclasses import dataclass
from pathlib import Path

import psutil

import trainperf

UNKNOWN = "unknown"
NOT_APPLICABLE = "N/A"


@dataclass(frozen=True, kw_only=True)
class Accelerators:
    count: int
    name: str = NOT_APPLICABLE
    memory_bytes: int = 0
    clock_khz: int = 0
    l2_bytes: int = 0
    bus_width_bits: int = 0


def _cpuinfo() -> list[tuple[str, str]]:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    pairs = []
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            pairs.append((key.strip(), value.strip()))
    return pairs


def cpu_model() -> str:
    for key, value in _cpuinfo():
        if key in ("model name", "Model Name", "cpu model") and value:
            return " ".join(value.split())
    return platform.processor() or platform.machine() or UNKNOWN


def host_processors() -> int:
    ids = {value for key, value in _cpuinfo() if key == "physical id"}
    return len(ids) or 1


def logical_cpus() -> int:
    return psutil.cpu_count(logical=True) or os.cpu_count() or 1


def physical_cores() -> int:
    return psutil.cpu_count(logical=False) or logical_cpus()


def cpu_frequency() -> str:
    mhz = 0.0
    try:
        freq = psutil.cpu_freq()
    except (OSError, NotImplementedError, RuntimeError):
        freq = None
    if freq is not None:
        mhz = freq.max or freq.current or 0.0
    if not mhz:
        for key, value in _cpuinfo():
            if key == "cpu MHz":
                try:
                    mhz = float(value)
                except ValueError:
                    continue
                break
    return f"{mhz:.0f} MHz" if mhz else UNKNOWN


def csv_safe(text: str) -> str:
    """``text`` without commas: the checker joins some fields into one CSV row."""
    return " ".join(text.replace(",", " ").split())


def cpu_caches() -> str:
    """Caches seen by cpu0, e.g. ``L1d 48 KiB, L1i 32 KiB, L2 2 MiB, L3 105 MiB``."""
    kinds = {"Data": "d", "Instruction": "i", "Unified": ""}
    entries = []
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        match = re.fullmatch(r"(\d+)([KMG]?)", size)
        if not match:
            continue
        scale = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[match.group(2)]
        entries.append((int(level), kind, f"L{level}{kinds.get(kind, '')} {cache_text(int(match.group(1)) * scale)}"))
    return ", ".join(text for _, _, text in sorted(entries)) or UNKNOWN


def cache_text(size: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if (size >= scale and size % scale == 0) or size >= 10 * scale:
            return f"{round(size / scale)} {unit}"
    return f"{size} B"


def size_text(size: int) -> str:
    """Memory and disk sizes as MLPerf submissions write them: binary units named GB/TB."""
    if size >= 2**40:
        return f"{size / 2**40:.1f} TB".replace(".0 TB", " TB")
    return f"{round(size / 2**30)} GB"


def storage_type(folder: Path) -> str:
    """Kind of disk under ``folder``: ``NVMe SSD``, ``SSD``, ``HDD``, ``virtio disk`` or unknown."""
    try:
        mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return UNKNOWN
    folder = folder.resolve()
    best: list[str] | None = None
    for fields in mounts:
        if len(fields) < 3:
            continue
        mount = Path(fields[1].replace("\\040", " "))
        if (folder == mount or mount in folder.parents) and (best is None or len(fields[1]) > len(best[1])):
            best = fields
    if best is None or not best[0].startswith("/dev/"):
        return f"{UNKNOWN} ({best[2]})" if best else UNKNOWN
    device, fstype = Path(best[0]).resolve().name, best[2]
    block = Path("/sys/class/block") / device
    if (block / "partition").exists():
        block = block.resolve().parent
    name = block.name
    if name.startswith("nvme"):
        kind = "NVMe SSD"
    elif name.startswith(("vd", "xvd")):
        kind = "virtio disk"
    else:
        try:
            kind = {"0": "SSD", "1": "HDD"}.get((block / "queue" / "rotational").read_text().strip(), UNKNOWN)
        except OSError:
            kind = UNKNOWN
    return f"{kind} ({fstype})"


def accelerators() -> Accelerators:
    try:
        import torch  # lazy: describing a CPU-only machine should not pay for CUDA
    except ImportError:
        return Accelerators(count=0)
    if not torch.cuda.is_available():
        return Accelerators(count=0)
    count = torch.cuda.device_count()
    if count == 0:
        return Accelerators(count=0)
    props = torch.cuda.get_device_properties(0)
    names = {torch.cuda.get_device_properties(i).name for i in range(count)}
    return Accelerators(
        count=count,
        name=" + ".join(sorted(names)),
        memory_bytes=int(props.total_memory),
        clock_khz=int(getattr(props, "clock_rate", 0) or 0),
        l2_bytes=int(getattr(props, "L2_cache_size", 0) or 0),
        bus_width_bits=int(getattr(props, "memory_bus_width", 0) or 0),
    )


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""


def software_stack(torch_version: str) -> str:
    parts = [f"Python {platform.python_version()}"]
    if torch_version:
        parts.append(f"torch {torch_version}")
        try:
            import torch  # lazy, as in accelerators()

            if torch.version.cuda:
                parts.append(f"CUDA {torch.version.cuda} (torch build)")
            if torch.backends.cudnn.is_available() and torch.backends.cudnn.version():
                parts.append(f"cuDNN {_cudnn_text(torch.backends.cudnn.version())}")
        except ImportError:
            pass
    for dist in ("torchvision", "mlperf-logging"):
        parts.append(f"{dist} {version(dist) or 'not installed'}")
    parts.append(f"trainperf {trainperf_version()}")
    return ", ".join(parts)


def trainperf_version() -> str:
    return version("trainperf") or getattr(trainperf, "__version__", "") or "(version unknown: not installed)"


def _cudnn_text(version: int) -> str:
    """cuDNN's integer version as text: 92400 -> 9.24.0 (cuDNN 9), 8902 -> 8.9.2 (cuDNN 8)."""
    if version >= 90000:
        return f"{version // 10000}.{version // 100 % 100}.{version % 100}"
    return f"{version // 1000}.{version // 100 % 10}.{version % 100}"


def operating_system() -> str:
    pretty = ""
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                pretty = line.partition("=")[2].strip().strip('"')
    except OSError:
        pass
    kernel = f"{platform.system()} {platform.release()}".strip()
    return f"{pretty} (kernel {kernel})" if pretty else platform.platform() or UNKNOWN
