"""Hand-written MLLOG logs, planted rule files and tiny MLCommons packages for the tests of untrusted input.

The logs are complete mini resnet runs written line by line (no training); a planted rule file is a YAML
file in the official checker's language whose BEGIN block would create a marker file, and a logged value
points at it with ``../`` segments counted from the official ``training_2.0.0`` folder.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

from trainperf.system import REQUIRED_FIELDS

MLLOG = ":::MLLOG "
ORG = "acme"
SYSTEM = "box"
T0 = 1_650_000_000_000  # the first event of every hand-written log, in ms since 1970 (2022-04-15): a plausible time
# key -> (how the v2.0 rules format it into a rule-file name, the values the log needs to reach that rule)
PATH_KEYS: dict[str, tuple[str, dict[str, Any]]] = {
    "submission_division": ("{}_common.yaml", {}),
    "submission_benchmark": ("open_{}.yaml", {"submission_division": "open"}),
    "opt_name": ("closed_resnet_{}.yaml", {"submission_division": "closed"}),
}


def rules_dir() -> Path:
    """The official v2.0 rule folder, which the checker joins every enqueued rule-file name onto."""
    spec = importlib.util.find_spec("mlperf_logging.compliance_checker")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent / "training_2.0.0"


def plant(folder: Path, key: str) -> tuple[str, Path]:
    """Plant a rule file for ``key`` in ``folder``: (the logged value that reaches it, the marker it would create)."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / f"EXECUTED_{key}"
    name_format, _ = PATH_KEYS[key]
    (folder / name_format.format("evil")).write_text(
        f"- BEGIN:\n    CODE: \"open({str(marker)!r}, 'w').write('the planted rule file ran')\"\n", encoding="utf-8"
    )
    # the checker formats the value after a prefix ('open_', 'closed_resnet_'); the first '..' then cancels it
    # where paths are normalized as text, and needs a folder of that name where the file system resolves them
    value = os.path.relpath(folder / "evil", rules_dir())
    return value, marker


def log_lines(values: dict[str, Any] | None = None, *, start: int = T0, step: int = 100) -> list[str]:
    """A complete mini resnet run (open division, two evaluations, the target reached) as MLLOG lines, its first
    event at ``start`` and one event every ``step`` milliseconds."""
    values = dict(values or {})
    clock = iter(range(start, start + 10_000 * step, step))
    lines = ["ordinary output that the checker ignores"]

    def event(key: str, value: Any = None, event_type: str = "POINT_IN_TIME", **metadata: Any) -> None:
        record = {
            "namespace": "",
            "time_ms": next(clock),
            "event_type": event_type,
            "key": key,
            "value": values.pop(key, value),
            "metadata": {"file": "train.py", "lineno": 1, **metadata},
        }
        lines.append(MLLOG + json.dumps(record))

    event("cache_clear", True)
    event("init_start", event_type="INTERVAL_START")
    for key, value in [
        ("submission_benchmark", "resnet"),
        ("submission_org", ORG),
        ("submission_division", "open"),
        ("submission_platform", SYSTEM),
        ("submission_status", "research"),
        ("trainperf_scale", "mini"),
        ("trainperf_division", "open"),
        ("seed", values.pop("seed", 1)),
        ("global_batch_size", 128),
        ("gradient_accumulation_steps", 1),
        ("opt_name", "adamw"),
        ("opt_base_learning_rate", 0.004),
        ("opt_weight_decay", 0.05),
        ("opt_learning_rate_warmup_epochs", 0.4),
        ("opt_learning_rate_schedule_epochs", 2.0),
        ("label_smoothing", 0.1),
        ("train_samples", 60000),
        ("eval_samples", 10000),
    ]:
        event(key, value)
    for key in list(values):  # keys the caller adds
        event(key)
    event("init_stop", event_type="INTERVAL_END")
    event("run_start", event_type="INTERVAL_START")
    for epoch, accuracy in enumerate((0.6, 0.95)):
        event("block_start", event_type="INTERVAL_START", first_epoch_num=epoch, epoch_count=1)
        event("epoch_start", event_type="INTERVAL_START", epoch_num=epoch)
        event("epoch_stop", event_type="INTERVAL_END", epoch_num=epoch)
        event("eval_start", event_type="INTERVAL_START", epoch_num=epoch)
        event("eval_accuracy", accuracy, epoch_num=epoch)
        event("eval_stop", event_type="INTERVAL_END", epoch_num=epoch)
        event("block_stop", event_type="INTERVAL_END", first_epoch_num=epoch)
    event("run_stop", event_type="INTERVAL_END", status="success")
    return lines


def write_log(path: Path, values: dict[str, Any] | None = None, *, start: int = T0, step: int = 100) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(log_lines(values, start=start, step=step)) + "\n", encoding="utf-8")
    return path


def system_description(**changes: str) -> dict[str, str]:
    desc = {name: "1" if name.endswith(("count", "per_node", "nodes")) else "n/a" for name in REQUIRED_FIELDS}
    desc.update(submitter=ORG, division="open", status="research", system_name=SYSTEM, accelerators_per_node="0")
    desc.update(changes)
    return desc


def run_lines(i: int, values: dict[str, Any] | None = None) -> list[str]:
    """Run ``i`` of a package (seed i + 1): distinct runs, one after the other (run i an hour after run 0, each a
    little slower than the one before), as review's distinct-runs rule wants them (run 0 is :func:`log_lines`'s)."""
    return log_lines({"seed": i + 1, **(values or {})}, start=T0 + i * 3_600_000, step=100 + i)


def make_package(root: Path, logs: dict[int, dict[str, Any]] | None = None, runs: int = 5) -> Path:
    """``root/acme``: systems/box.json and results/box/resnet/result_<i>.txt, run i (:func:`run_lines`) logged with
    ``logs[i]``."""
    org = root / ORG
    (org / "systems").mkdir(parents=True)
    (org / "systems" / f"{SYSTEM}.json").write_text(json.dumps(system_description(), indent=2), encoding="utf-8")
    for i in range(runs):
        path = org / "results" / SYSTEM / "resnet" / f"result_{i}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(run_lines(i, (logs or {}).get(i))) + "\n", encoding="utf-8")
    return org


OCT_2021 = 1_634_600_000_000  # 2021-10-18 23:33 UTC, in ms: during the v1.1 round


def foreign_log(
    path: Path, values: dict | None = None, *, start_ms: int = OCT_2021, drop: tuple = (), run: int = 0
) -> Path:
    """A run written by another submitter's code: no trainperf_* keys, its clock at ``start_ms``; ``run`` i of a
    package starts i hours later and is a little slower (distinct runs, as :func:`run_lines`)."""
    out = []
    for line in log_lines(values, start=T0 + run * 3_600_000, step=100 + run):
        if line.startswith(MLLOG):
            record = json.loads(line[len(MLLOG) :])
            if record["key"].startswith("trainperf_") or record["key"] in drop:
                continue
            record["time_ms"] += start_ms - T0
            line = MLLOG + json.dumps(record)
        out.append(line)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path
