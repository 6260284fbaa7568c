"""What a benchmark's round adds to its logs (``trainperf/rounds/<version>.toml``): the keys its common rules
require once in every log, and the progress metadata of its evaluations."""

from __future__ import annotations

from typing import Any

from trainperf import rounds
from trainperf.contract.workload import Workload
from trainperf.spec import SAMPLES, BenchmarkSpec

# The precision names the 6.1 common rules accept, by the autocast a run used (trainperf/harness/precision.py).
PRECISION_NAMES = {"bf16": "bfloat16", "fp16": "fp16", "fp32": "fp32"}


def round_keys(spec: BenchmarkSpec, workload: Workload, autocast: str) -> dict[str, Any]:
    """The keys the round requires in every log beyond v2.0's (6.1: the lowest precision of the linear layers,
    attention and communication, the parallelism, the micro-batch and the configuration), with this run's values."""
    found = rounds.of_benchmark(spec.key)
    if found is None or not found.disclosure:
        return {}
    precision = PRECISION_NAMES.get(autocast, "fp32")
    values: dict[str, Any] = {
        "lowest_numerical_precision_in_linear": precision,
        "lowest_numerical_precision_in_attn": precision,
        "lowest_numerical_precision_in_comm": "fp32",  # gradients are reduced in the parameters' fp32
        **workload.parallelism(),
        "micro_batch_size": workload.local_batch_size,
        "config_filename": f"trainperf {spec.key} {spec.scale} recipe",
    }
    return {k: values[k] for k in found.disclosure}


def eval_metadata(spec: BenchmarkSpec, epoch_num: float, point: float) -> dict[str, Any]:
    """An evaluation's metadata: ``epoch_num`` always; ``samples_count`` as well where the round asks for it (6.1's
    closed rule files require it on eval_accuracy) and progress is counted in samples."""
    found = rounds.of_benchmark(spec.key)
    where: dict[str, Any] = {"epoch_num": epoch_num}
    if spec.unit == SAMPLES and found is not None and found.samples_count:
        where["samples_count"] = round(point)
    return where
