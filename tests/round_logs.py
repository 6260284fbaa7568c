"""Hand-written logs and packages of other rounds' benchmarks (no copy of a published log), for the tests of `review`
on the rounds v1.0 to v5.0: another submitter's runs of open-division benchmarks, each a few MLLOG lines, with the
shapes published packages show (Stable Diffusion's offline evaluations, contact fields, a round's system status)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from untrusted import MLLOG, ORG, SYSTEM, system_description

SEP_2023 = 1_695_000_000_000  # 2023-09-18 01:20 UTC, in ms: during the v3.1 round
APR_2024 = 1_713_000_000_000  # 2024-04-13 09:20 UTC: during the v4.0 round
MAY_2022 = 1_652_000_000_000  # 2022-05-08 08:53 UTC: during the v2.0 round
MINUTE = 60_000


def record(t: int, key: str, value: Any = None, event: str = "POINT_IN_TIME", **metadata: Any) -> dict[str, Any]:
    return {
        "namespace": "",
        "time_ms": t,
        "event_type": event,
        "key": key,
        "value": value,
        "metadata": {"file": "train.py", "lineno": 7, **metadata},
    }


def header(t0: int, benchmark: str, seed: int, values: dict[str, Any], init_minutes: float = 2) -> list[dict]:
    """cache_clear to run_start: the submission's values (``values`` replaces or adds), initialization lasting
    ``init_minutes``; run_start is at ``t0 + init_minutes``."""
    keys = {
        "submission_benchmark": benchmark,
        "submission_org": ORG,
        "submission_division": "open",
        "submission_platform": SYSTEM,
        "submission_status": "onprem",
        "submission_poc_name": "A. Person",
        "submission_poc_email": "a.person@example.com",
        "seed": seed,
        "global_batch_size": 512,
        "train_samples": 1000,
        "eval_samples": 100,
        **values,
    }
    recs = [record(t0, "cache_clear", True), record(t0 + 1, "init_start", event="INTERVAL_START")]
    recs += [record(t0 + 2 + i, key, value) for i, (key, value) in enumerate(keys.items())]
    stop = t0 + int(init_minutes * MINUTE)
    return recs + [record(stop, "init_stop", event="INTERVAL_END"), record(stop, "run_start", event="INTERVAL_START")]


def sd_records(t0: int, seed: int, minutes: float = 30, values: dict[str, Any] | None = None) -> list[dict]:
    """A Stable Diffusion run as v3.1 to v5.0 log it: training saves a checkpoint every block and goes on past the
    first checkpoint that reaches FID <= 90 and CLIP >= 0.15 (block 3 of 6); the checkpoints are evaluated after
    training (FID and CLIP lines timed at each checkpoint's time, the later checkpoints' after run_stop), and run_stop
    carries the passing checkpoint's time: ``minutes`` after run_start."""
    recs = header(t0, "stable_diffusion", seed, values or {})
    start = recs[-1]["time_ms"]
    block = int(minutes * MINUTE / 3)
    scores = [(210.0, 0.08), (120.0, 0.12), (80.0 + seed / 10, 0.16), (75.0, 0.17), (70.0, 0.18), (68.0, 0.18)]
    saved = []
    for b in range(6):
        t, step = start + b * block, (b + 1) * 1000
        recs.append(record(t + 1, "block_start", event="INTERVAL_START", step_num=step - 1000, samples_count=b * 512))
        recs.append(record(t + block, "block_stop", event="INTERVAL_END", step_num=step, samples_count=step * 512))
        saved.append((t + block, step))
    for (t, step), (fid, clip) in zip(saved, scores, strict=True):  # the offline evaluation, after training
        progress = {"epoch_num": step * 512 / 1000, "step_num": step, "samples_count": step * 512}  # v3.1; v4.0 on
        recs.append(record(t, "eval_accuracy", fid, **progress, metric="FID"))
        recs.append(record(t, "eval_accuracy", clip, **progress, metric="CLIP"))
    recs.append(record(saved[2][0], "run_stop", event="INTERVAL_END", status="success", step_num=saved[2][1]))
    return recs


def plain_records(
    t0: int, benchmark: str, seed: int, minutes: float = 20, values: dict[str, Any] | None = None, **options: Any
) -> list[dict]:
    """A run of an image benchmark (resnet's open rules: epoch_num on each evaluation, accuracy below 1): two blocks,
    an evaluation after each, run_stop ``minutes`` after run_start."""
    recs = header(t0, benchmark, seed, values or {}, options.get("init_minutes", 2))
    start = recs[-1]["time_ms"]
    half = int(minutes * MINUTE / 2)
    for epoch in range(2):
        t = start + epoch * half
        recs.append(record(t + 1, "block_start", event="INTERVAL_START", first_epoch_num=epoch, epoch_count=1))
        recs.append(record(t + half - 2, "block_stop", event="INTERVAL_END", first_epoch_num=epoch))
        recs.append(record(t + half - 1, "eval_accuracy", 0.5 + 0.2 * epoch + seed / 1000, epoch_num=epoch))
    recs.append(record(start + 2 * half, "run_stop", event="INTERVAL_END", status="success"))
    return recs


def write(path: Path, recs: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(MLLOG + json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    return path


def package(root: Path, benchmark: str, runs: list[list[dict]], **description: Any) -> Path:
    """``root/acme``: systems/box.json (open, ``description`` changed) and results/box/<benchmark>/result_<i>.txt."""
    org = root / ORG
    (org / "systems").mkdir(parents=True)
    desc = system_description(**{"status": "Available on-premise", **description})  # a phrase every round accepts
    (org / "systems" / f"{SYSTEM}.json").write_text(json.dumps(desc, indent=2), encoding="utf-8")
    for i, recs in enumerate(runs):
        write(org / "results" / SYSTEM / benchmark / f"result_{i}.txt", recs)
    return org


def minutes(recs: list[dict]) -> float:
    """The run's result as MLCommons' summarizer reads it: run_stop - run_start, in minutes."""
    start = next(r["time_ms"] for r in recs if r["key"] == "run_start")
    return (next(r["time_ms"] for r in recs if r["key"] == "run_stop") - start) / MINUTE


def olympic(results: list[float], dropped: int = 1) -> float:
    kept = sorted(results)[dropped : len(results) - dropped]
    return sum(kept) / len(kept)
