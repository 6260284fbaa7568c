"""check, review and report on inputs 1x, 4x and 16x as large, in lines and in files: each must cost at most 1.5x
linear (16x the input: at most 24x the time), never 256x.

    flock /tmp/trainperf-cpu.lock python benchmarks/linear_time.py [--repeats 3] [--epochs 100] [--wide 16]
        [--systems 20] [--file-repeats 1]

Lines: the input at size k is a package of five mini resnet runs (``acme/results/box/resnet/result_<i>.txt`` and
``systems/box.json``), each run logging ``k * epochs`` evaluation blocks (seven MLLOG lines each: block, epoch and
evaluation start and stop, the accuracy rising to the target at the last) spread over the mini's 4-epoch budget,
and ``k * wide`` notes of 1,000 characters (long lines, within the caps of trainperf/limits.py: at 16x a file is
11,500 lines, 2.4 MiB, and its sum of squared line lengths two thirds of MAX_LINE_COST).

Files: the input at size k is a package of ``k * systems`` systems, each with five short mini resnet runs (four
epochs): 100, 400 and 1,600 result files by default. ``check`` checks one file at a time (each in its own run of the
official checker, as ``trainperf check A B ...`` does), so in this dimension it checks the five files of ``k``
systems.

Timed, each the median of ``repeats`` (``file_repeats`` for files):

- ``check``: :func:`trainperf.rules.compliance.check_log` (the gate, the official compliance checker in its
  confinement, the explanations)
- ``review``: :func:`trainperf.submission.review.review` of the package (the copy, the gate, the batch checker,
  package_checker, result_summarizer, rcp_checker)
- ``report``: :func:`trainperf.report.html.write_report` of the package (no history chart)

It prints each command's time at each size and the ratios to 1x; linear is 4 and 16 (the fixed cost of starting
the official tools pulls the ratios below that), and it exits 1 when a ratio is over 1.5x linear.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from trainperf import registry
from trainperf.report.html import write_report
from trainperf.rules.compliance import check_log
from trainperf.submission.review import review
from trainperf.system import REQUIRED_FIELDS

MLLOG = ":::MLLOG "
T0 = 1_650_000_000_000
SIZES = (1, 4, 16)
LINEAR_SLACK = 1.5  # at most 1.5x linear: 16x the input may take at most 24x the time


def log_text(epochs: int, wide: int, seed: int) -> str:
    """A mini resnet run of ``epochs`` epochs and ``wide`` long notes, as MLLOG lines; run ``seed`` starts after the one
    before and is a little slower (review refuses runs whose timelines are the same: trainperf/distinct.py)."""
    target = registry.get_spec("resnet", "mini").target
    clock = iter(range(T0 + seed * 10**8, T0 + seed * 10**8 + 10**9, 10 + seed))
    lines = ["ordinary output that the checker ignores"]

    def event(key: str, value=None, event_type: str = "POINT_IN_TIME", **metadata) -> None:
        record = {"namespace": "", "time_ms": next(clock), "event_type": event_type, "key": key, "value": value}
        lines.append(MLLOG + json.dumps({**record, "metadata": {"file": "train.py", "lineno": 1, **metadata}}))

    event("cache_clear", True)
    event("init_start", event_type="INTERVAL_START")
    for key, value in [
        ("submission_benchmark", "resnet"),
        ("submission_org", "acme"),
        ("submission_division", "open"),
        ("submission_platform", "box"),
        ("submission_status", "research"),
        ("trainperf_scale", "mini"),
        ("trainperf_division", "open"),
        ("seed", seed),
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
    event("init_stop", event_type="INTERVAL_END")
    event("run_start", event_type="INTERVAL_START")
    for i in range(wide):
        event("trainperf_note", f"{i:08d}" + "x" * 992)
    budget = registry.get_spec("resnet", "mini").max_progress
    for epoch in range(epochs):
        accuracy = target if epoch == epochs - 1 else target * (epoch + 1) / (epochs + 1)
        # every evaluation inside the mini's progress budget (a target reached past it is not a success: the timeline
        # rule), so a larger input is more evaluations of smaller parts of the same 4 epochs
        at = round(budget * epoch / epochs, 6)
        event("block_start", event_type="INTERVAL_START", first_epoch_num=at, epoch_count=1)
        event("epoch_start", event_type="INTERVAL_START", epoch_num=at)
        event("epoch_stop", event_type="INTERVAL_END", epoch_num=at)
        event("eval_start", event_type="INTERVAL_START", epoch_num=at)
        event("eval_accuracy", round(accuracy, 6), epoch_num=at)
        event("eval_stop", event_type="INTERVAL_END", epoch_num=at)
        event("block_stop", event_type="INTERVAL_END", first_epoch_num=at)
    event("run_stop", event_type="INTERVAL_END", status="success")
    return "\n".join(lines) + "\n"


def make_package(root: Path, epochs: int, wide: int, systems: int = 1) -> Path:
    """``root/acme`` with five runs of ``epochs`` epochs and ``wide`` notes on each of ``systems`` systems (``box``, or
    ``box0``, ``box1``, ... when there are several)."""
    org = root / "acme"
    (org / "systems").mkdir(parents=True)
    desc = {f: "1" if f.endswith(("count", "per_node", "nodes")) else "n/a" for f in REQUIRED_FIELDS}
    desc.update(submitter="acme", division="open", status="research", accelerators_per_node="0")
    for s in range(systems):
        name = "box" if systems == 1 else f"box{s}"
        (org / "systems" / f"{name}.json").write_text(json.dumps({**desc, "system_name": name}, indent=2))
        folder = org / "results" / name / "resnet"
        folder.mkdir(parents=True)
        for i in range(5):
            text = log_text(epochs, wide, seed=i + 1).replace('"value": "box"', f'"value": "{name}"')
            (folder / f"result_{i}.txt").write_text(text)
    return org


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def time_commands(org: Path, logs: list[Path], root: Path, repeats: int) -> dict[str, float]:
    """The median seconds of check (each of ``logs``), review and report of ``org``, after one untimed pass that
    asserts each passes."""
    assert all(check_log(f).passed for f in logs)
    verdict = review(org)
    assert verdict.passed, (verdict.problems, [v.problems for v in verdict.verdicts])
    write_report([org], root / "report.html", history_png=None, history_round=None, force=True)  # its imports
    return {
        "check": median_seconds(lambda: [check_log(f) for f in logs], repeats),
        "review": median_seconds(lambda: review(org), repeats),
        "report": median_seconds(
            lambda: write_report([org], root / "report.html", history_png=None, history_round=None, force=True),
            repeats,
        ),
    }


def print_table(title: str, rows: dict[str, dict[int, float]]) -> bool:
    """The times and ratios; whether every ratio is within 1.5x of linear."""
    print(f"\n{title}\n{'command':<8}" + "".join(f"{f'{k}x (s)':>10}" for k in SIZES) + f"{'4x/1x':>8}{'16x/1x':>8}")
    ok = True
    for name, t in rows.items():
        print(f"{name:<8}" + "".join(f"{t[k]:>10.2f}" for k in SIZES) + f"{t[4] / t[1]:>8.1f}{t[16] / t[1]:>8.1f}")
        ok &= all(t[k] / t[1] <= LINEAR_SLACK * k for k in SIZES)
    return ok


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--epochs", type=int, default=100, help="epochs of each run at 1x (7 MLLOG lines each)")
    p.add_argument("--wide", type=int, default=16, help="notes of 1,000 characters in each run at 1x")
    p.add_argument("--systems", type=int, default=20, help="systems of five result files each at 1x, for files")
    p.add_argument("--file-repeats", type=int, default=1, help="repeats in the files dimension")
    a = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="trainperf-linear-"))
    lines: dict[str, dict[int, float]] = {"check": {}, "review": {}, "report": {}}
    files: dict[str, dict[int, float]] = {"check": {}, "review": {}, "report": {}}
    try:
        for k in SIZES:
            org = make_package(root / f"lines-x{k}", a.epochs * k, a.wide * k)
            first = org / "results" / "box" / "resnet" / "result_0.txt"
            size = sum(f.stat().st_size for f in first.parent.iterdir())
            for name, t in time_commands(org, [first], root, a.repeats).items():
                lines[name][k] = t
            print(f"lines {k:>2}x: 5 result files of {first.read_text().count(MLLOG):,} MLLOG lines, "
                  f"{size / 2**20:.2f} MiB in all", flush=True)  # fmt: skip
            shutil.rmtree(org.parent)
        for k in SIZES:
            org = make_package(root / f"files-x{k}", 4, 0, systems=a.systems * k)
            found = sorted(org.glob("results/*/resnet/result_*.txt"))
            logs = found[: 5 * k]
            for name, t in time_commands(org, logs, root, a.file_repeats).items():
                files[name][k] = t
            print(f"files {k:>2}x: {len(found):,} result files ({len(logs)} of them checked)", flush=True)
            shutil.rmtree(org.parent)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ok = print_table("lines", lines)
    ok &= print_table("files", files)
    print(f"\nevery ratio within {LINEAR_SLACK}x of linear: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
