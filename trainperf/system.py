"""This machine as an MLCommons system description (``systems/<system_name>.json``), and its check.

The fields, the ``status`` values and the check itself come from the official
``mlperf_logging.system_desc_checker`` (training ruleset 4.0.0). Every value is a string, read from
/proc, /sys, psutil and torch.cuda; what cannot be read is written as "unknown" rather than guessed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

from trainperf import limits
from trainperf.errors import ResultsError, UsageError
from trainperf.fileio import atomic_write_text
from trainperf.host import (
    NOT_APPLICABLE,
    UNKNOWN,
    accelerators,
    cache_text,
    cpu_caches,
    cpu_frequency,
    cpu_model,
    csv_safe,
    host_processors,
    logical_cpus,
    operating_system,
    physical_cores,
    size_text,
    software_stack,
    storage_type,
    trainperf_version,
    version,
)

# Ruleset the official checker is run against; ``status`` values are enforced from 4.0 on.
CHECKER_USAGE = "training"
CHECKER_RULESET = "4.0.0"

# `--availability` choices -> the `status` text the checker accepts for training >= 4.0.
AVAILABILITY: dict[str, str] = {
    "available": "Available on-premise",
    "cloud": "Available cloud",
    "preview": "Preview",
    "research": "Research, Development, or Internal (RDI)",
}

# The same choices -> the MLLOG `submission_status` value (compliance_checker/training_4.0.0/common.yaml).
SUBMISSION_STATUS: dict[str, str] = {
    "available": "onprem",
    "cloud": "cloud",
    "preview": "preview",
    "research": "research",
}

DIVISIONS = ("closed", "open")

# Copied from `required_fields` in mlperf_logging/system_desc_checker/system_desc_checker.py (4.1.68).
REQUIRED_FIELDS: tuple[str, ...] = (
    "submitter",
    "division",
    "status",
    "system_name",
    "number_of_nodes",
    "host_processors_per_node",
    "host_processor_model_name",
    "host_processor_core_count",
    "host_processor_vcpu_count",
    "host_processor_frequency",
    "host_processor_caches",
    "host_processor_interconnect",
    "host_memory_capacity",
    "host_storage_type",
    "host_storage_capacity",
    "host_networking",
    "host_networking_topology",
    "host_memory_configuration",
    "accelerators_per_node",
    "accelerator_model_name",
    "accelerator_host_interconnect",
    "accelerator_frequency",
    "accelerator_on-chip_memories",
    "accelerator_memory_configuration",
    "accelerator_memory_capacity",
    "accelerator_interconnect",
    "accelerator_interconnect_topology",
    "cooling",
    "hw_notes",
    "framework",
    "other_software_stack",
    "operating_system",
    "sw_notes",
)

# Fields the checker joins with ',' into a summary-table row: a comma inside one shifts the columns.
CSV_FIELDS = (
    "submitter",
    "system_name",
    "host_processor_model_name",
    "host_processor_core_count",
    "accelerator_model_name",
    "accelerators_per_node",
    "framework",
)

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")  # a plain file name: no '/', no leading '.'
# In the hw_notes of every description trainperf writes: `trainperf system -o` replaces no other file
SYSTEM_MARK = b"Described automatically by trainperf"
SAFE_ORG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # the top folder of a package (trainperf package)
MAX_NAME = 200  # systems/<name>.json must stay under the 255-byte file-name limit


def check_system_name(name: str) -> str:
    """``name``, or a UsageError: it becomes ``systems/<name>.json`` and the folder ``results/<name>/``."""
    if not isinstance(name, str) or not _SAFE_NAME.match(name) or len(name) > MAX_NAME:
        raise UsageError(
            f"system name {name!r} is not a plain file name (it becomes systems/<name>.json and results/<name>/): "
            f"use letters, digits, '-', '_' and '.', not starting with '.' or '-', at most {MAX_NAME} characters, "
            "e.g. --system-name 1xCPU-2c-laptop"
        )
    return name


def check_org_name(org: str) -> str:
    """``org``, or a UsageError: it becomes the top folder of a submission package and every log's submission_org."""
    if not isinstance(org, str) or not SAFE_ORG.match(org) or len(org) > MAX_NAME:
        raise UsageError(
            f"organization name {org!r} is not a plain folder name (it becomes the package's top folder and every "
            f"log's submission_org): use letters, digits, '.', '_' and '-', starting with a letter or digit, at "
            f"most {MAX_NAME} characters, e.g. --org my-lab"
        )
    return org


def describe_system(
    *,
    org: str = "trainperf-user",
    division: str = "open",
    availability: str = "available",
    system_name: str | None = None,
    nodes: int = 1,
) -> dict[str, str]:
    """This machine in the MLCommons system-description format: all required fields, all strings.

    ``nodes`` machines like this one are assumed; per-processor counts are for one host processor.
    """
    if availability not in AVAILABILITY:
        raise UsageError(
            f"unknown availability {availability!r}; use one of {', '.join(AVAILABILITY)} "
            "(MLCommons training rules, system status)"
        )
    if division not in DIVISIONS:
        raise UsageError(f"unknown division {division!r}; use one of {', '.join(DIVISIONS)}")
    if not org or "," in org:
        raise UsageError(f"submitter {org!r} must be non-empty and contain no ',' (it becomes a CSV column)")
    if nodes < 1:
        raise UsageError(f"number of nodes must be at least 1, got {nodes}")
    if system_name is None:
        system_name = default_system_name(nodes=nodes)
    else:
        check_system_name(system_name)

    sockets = host_processors()
    acc = accelerators()
    single = nodes == 1
    torch_version = version("torch")
    framework = f"PyTorch {torch_version.split('+')[0]}" if torch_version else "PyTorch (not installed)"
    has_acc = acc.count > 0
    acc_many = acc.count > 1

    def acc_field(value: str) -> str:
        return value if has_acc else NOT_APPLICABLE

    return {
        "submitter": org,
        "division": division,
        "status": AVAILABILITY[availability],
        "system_name": system_name,
        "number_of_nodes": str(nodes),
        "host_processors_per_node": str(sockets),
        "host_processor_model_name": csv_safe(cpu_model()),
        "host_processor_core_count": str(physical_cores() // sockets or physical_cores()),
        "host_processor_vcpu_count": str(logical_cpus() // sockets or logical_cpus()),
        "host_processor_frequency": cpu_frequency(),
        "host_processor_caches": cpu_caches(),
        "host_processor_interconnect": NOT_APPLICABLE if sockets == 1 else UNKNOWN,
        "host_memory_capacity": size_text(psutil.virtual_memory().total),
        "host_storage_type": storage_type(Path.cwd()),
        "host_storage_capacity": size_text(shutil.disk_usage(Path.cwd()).total),
        "host_networking": NOT_APPLICABLE if single else UNKNOWN,
        "host_networking_topology": NOT_APPLICABLE if single else UNKNOWN,
        "host_memory_configuration": UNKNOWN,
        "accelerators_per_node": str(acc.count),
        "accelerator_model_name": csv_safe(acc.name) if has_acc else NOT_APPLICABLE,
        "accelerator_host_interconnect": acc_field(UNKNOWN),
        "accelerator_frequency": acc_field(f"{acc.clock_khz // 1000} MHz" if acc.clock_khz else UNKNOWN),
        "accelerator_on-chip_memories": acc_field(f"L2 {cache_text(acc.l2_bytes)}" if acc.l2_bytes else UNKNOWN),
        "accelerator_memory_configuration": acc_field(
            f"{acc.bus_width_bits}-bit bus" if acc.bus_width_bits else UNKNOWN
        ),
        "accelerator_memory_capacity": acc_field(size_text(acc.memory_bytes)),
        "accelerator_interconnect": UNKNOWN if acc_many else NOT_APPLICABLE,
        "accelerator_interconnect_topology": UNKNOWN if acc_many else NOT_APPLICABLE,
        "cooling": NOT_APPLICABLE,
        "hw_notes": (
            "Described automatically by trainperf from /proc, /sys, psutil and torch.cuda; "
            "'unknown' marks what it could not read. Sizes are in GiB, written GB."
        ),
        "framework": framework,
        "other_software_stack": software_stack(torch_version),
        "operating_system": operating_system(),
        "sw_notes": f"Benchmarks run with trainperf {trainperf_version()}.",
    }


def default_system_name(*, nodes: int = 1) -> str:
    """A file-name-safe name from the hardware: ``1xH100-80GB-HBM3`` or ``1xCPU-2c-AMD-EPYC``.

    More than one node appends ``_n<nodes>``. No hostname, so the same hardware gets the same name.
    """
    acc = accelerators()
    if acc.count:
        model = re.sub(r"^NVIDIA\s+", "", acc.name)
        name = f"{acc.count}x{model}"
    else:
        sockets = host_processors()
        model = re.sub(r"\((R|TM|tm)\)|\bCPU\b|\bProcessor\b|@.*$", " ", cpu_model())
        cores = physical_cores() // sockets or physical_cores()
        name = f"{sockets}xCPU-{cores}c-{model}"
    name = re.sub(r"[^A-Za-z0-9._]+", "-", name).strip("-.")
    if nodes > 1:
        name = f"{name}_n{nodes}"
    return name


def write_system(desc: dict[str, str], path: Path) -> Path:
    """Write ``desc`` as JSON to ``path`` atomically (temporary file, then rename); returns ``path``."""
    path = Path(path)
    text = json.dumps(desc, indent=2) + "\n"
    try:
        atomic_write_text(path, text)
    except OSError as err:
        raise ResultsError(
            f"cannot write system description {path}: {err.strerror or err}; choose a folder you can write to"
        ) from err
    return path


def check_system_file(path: Path) -> list[str]:
    """Problems with a system-description file: trainperf's own checks plus the official checker's.

    Runs ``python -m mlperf_logging.system_desc_checker FILE training 4.0.0``; an empty list means
    the file passes. The official checker always exits 0 and stops reporting missing fields once
    ``status`` is invalid, so the fields, types and status are also checked here.
    """
    path = Path(path)
    where = f"{path}"
    try:
        contents = limits.read_json(path, limits.MAX_SYSTEM_BYTES)
    except FileNotFoundError:
        return [f"{where}: no such file; write it with `write_system` first"]
    except OSError as err:
        return [f"{where}: cannot read it: {err.strerror or err}"]
    except limits.OverLimit as err:
        return [f"{where} {err}: a system description is a flat object of a few KiB; write it again"]
    except ValueError as err:  # not JSON, not UTF-8, not a plain file
        return [f"{where}: not valid JSON ({err}); the official checker cannot read it"]
    if not isinstance(contents, dict):
        return [f"{where}: the top level must be a JSON object of field -> string"]

    problems = _own_problems(contents, where)
    problems += _official_problems(path, contents, where)
    return list(dict.fromkeys(problems))  # both checks report missing fields; keep each once


def _missing(field: str, where: str) -> str:
    rule = f"required by system_desc_checker, {CHECKER_USAGE} {CHECKER_RULESET}"
    return f"{where}: missing field {field!r} ({rule})"


def _bad_status(value: object, where: str) -> str:
    return f"{where}: status {value!r} is not one of {list(AVAILABILITY.values())} (training rules >= 4.0)"


def _own_problems(contents: dict, where: str) -> list[str]:
    problems = [_missing(field, where) for field in REQUIRED_FIELDS if field not in contents]
    for field in REQUIRED_FIELDS:
        value = contents.get(field)
        if field in contents and not isinstance(value, str):
            problems.append(f"{where}: field {field!r} must be a string, not {type(value).__name__}")
        elif field in CSV_FIELDS and isinstance(value, str) and "," in value:
            problems.append(f"{where}: field {field!r} contains ',' which shifts the checker's CSV summary row")
    if "status" in contents and contents["status"] not in AVAILABILITY.values():
        problems.append(_bad_status(contents["status"], where))
    if "division" in contents and contents["division"] not in DIVISIONS:
        problems.append(f"{where}: division {contents['division']!r} is not one of {list(DIVISIONS)}")
    return problems


def _official_problems(path: Path, contents: dict, where: str) -> list[str]:
    """Run the official checker in a subprocess and turn its log lines into problems.

    It reports through ``logging`` (stderr and a log file, which it appends to in the current
    folder unless told otherwise), so it runs in a temporary folder with its log sent there.
    """
    with tempfile.TemporaryDirectory(prefix="trainperf-sdc-") as tmp:
        log = Path(tmp) / "system_desc_checker.log"
        cmd = [
            sys.executable,
            "-m",
            "mlperf_logging.system_desc_checker",
            str(path.resolve()),
            CHECKER_USAGE,
            CHECKER_RULESET,
            "--log_output",
            str(log),
        ]
        try:
            proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=120, check=False)
        except (OSError, subprocess.TimeoutExpired) as err:
            return [f"{where}: could not run the official system_desc_checker: {err}"]
        output = proc.stderr + "\n" + (log.read_text(encoding="utf-8", errors="replace") if log.exists() else "")

    if "System description checker passed for" in output and proc.returncode == 0:
        return []
    failed = [line for line in output.splitlines() if "System description checker failed for" in line]
    if not failed:
        last = (proc.stderr.strip().splitlines() or [proc.stdout.strip() or "no output"])[-1]
        return [f"{where}: the official system_desc_checker crashed (exit {proc.returncode}): {last}"]
    problems = [_missing(field, where) for field in re.findall(r"Missing field ([A-Za-z0-9_.-]+)", failed[0])]
    if "Field status contains a non valid value" in failed[0]:
        problems.append(_bad_status(contents.get("status"), where))
    if not problems:
        problems.append(f"{where}: system_desc_checker: {failed[0].split(' - ', 1)[-1].strip()}")
    return problems
