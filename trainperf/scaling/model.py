"""The scaling model: step time = compute + gradient all-reduce; steps = samples to converge / global batch.

    compute per step   = local batch / per-accelerator throughput (measured)
    all-reduce, ring   = 2 (N-1)/N x bytes / bandwidth + 2 (N-1) x latency
    all-reduce, tree   = 2 log2(N) x (latency + bytes / bandwidth)
    samples to converge at global batch B = measured samples x RCP(B) / RCP(B_measured)
    minutes            = samples to converge / B x (compute + all-reduce) / 60

The ring is the bandwidth-optimal all-reduce (reduce-scatter then all-gather, each moving (N-1)/N of the
buffer in N-1 latency-bound steps); the tree is the latency-optimal one (reduce up and broadcast down a
binary tree, log2 N levels each carrying the whole buffer). Communication is not overlapped with compute,
and evaluation and data loading on the clock are taken to scale with the samples trained, as they do when
evaluations come at a fixed interval of progress.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from trainperf.errors import UsageError
from trainperf.scaling.facts import RCPTable

TOPOLOGIES = ("ring", "tree")
DEFAULT_BANDWIDTH_GBPS = 25.0  # one 200 Gb/s InfiniBand HDR port per accelerator (DGX A100: 8 per node)
DEFAULT_LATENCY_US = 5.0  # an InfiniBand message between nodes, NCCL's order of magnitude
# The most accelerators a prediction is made for: far past any published MLPerf Training system (thousands), and
# far below the sizes at which a float of minutes rounds a prediction to 0.
MAX_ACCELERATORS = 1_000_000


def allreduce_seconds(nbytes: float, n: int, bandwidth_gbps: float, latency_us: float, topology: str = "ring") -> float:
    """Seconds to all-reduce ``nbytes`` over ``n`` accelerators (bandwidth in GB/s = 1e9 bytes/s)."""
    if n < 1:
        raise UsageError(f"the accelerator count must be at least 1, not {n}")
    if not (bandwidth_gbps > 0 and math.isfinite(bandwidth_gbps)):
        raise UsageError(f"--bandwidth must be a positive number of GB/s, not {bandwidth_gbps}")
    if not (latency_us >= 0 and math.isfinite(latency_us)):
        raise UsageError(f"--latency-us must be zero or a positive number of microseconds, not {latency_us}")
    if n == 1:
        return 0.0
    bw = bandwidth_gbps * 1e9
    lat = latency_us * 1e-6
    if topology == "ring":
        return 2 * (n - 1) / n * nbytes / bw + 2 * (n - 1) * lat
    if topology == "tree":
        return 2 * math.log2(n) * (lat + nbytes / bw)
    raise UsageError(f"unknown topology {topology!r}: choose one of {', '.join(TOPOLOGIES)}")


@dataclass(frozen=True, kw_only=True)
class Measured:
    """What a measured run gives the model."""

    benchmark: str
    scale: str
    accelerators: int
    global_batch: float
    minutes: float  # time to train (the median of the successful runs)
    samples_to_converge: float  # training samples seen when the target was reached (median)


@dataclass(frozen=True, kw_only=True)
class Prediction:
    accelerators: int
    global_batch: float
    batch_per_accelerator: float
    throughput_per_accelerator: float  # samples/s of compute alone, from the measured run
    compute_s: float  # per step
    communication_s: float  # per step
    measured_communication_s: float  # per step of the measured run, as the model sees it
    convergence_factor: float  # samples to converge at the new batch / at the measured batch
    samples_to_converge: float
    steps: float
    minutes: float
    warnings: list[str] = field(default_factory=list)


def convergence_factor(table: RCPTable | None, measured_batch: float, batch: float) -> tuple[float, list[str]]:
    """RCP(batch) / RCP(measured batch); 1 with a warning where there is no table."""
    if table is None:
        return 1.0, ["no RCP table at this scale: samples to converge are taken not to change with the global batch"]
    new, w1 = table.at(batch)
    old, w0 = table.at(measured_batch)
    # The RCP's unit is epochs (or samples): either way its ratio is the ratio of samples to converge.
    return new / old, [w for w in (w0, w1) if w]


def predict(
    run: Measured,
    accelerators: int,
    *,
    gradient_bytes: float,
    table: RCPTable | None,
    bandwidth_gbps: float = DEFAULT_BANDWIDTH_GBPS,
    latency_us: float = DEFAULT_LATENCY_US,
    topology: str = "ring",
    batch_per_accelerator: float | None = None,
) -> Prediction:
    """Time to train ``run.benchmark`` on ``accelerators``, from the measured run."""
    if isinstance(accelerators, bool) or not isinstance(accelerators, int) or not 1 <= accelerators <= MAX_ACCELERATORS:
        raise UsageError(
            f"--to must be a whole number of accelerators, at least 1 and at most {MAX_ACCELERATORS:,}, "
            f"not {accelerators}"
        )
    if batch_per_accelerator is not None and not (batch_per_accelerator > 0 and math.isfinite(batch_per_accelerator)):
        raise UsageError(f"--batch-per-accelerator must be a positive number, not {batch_per_accelerator}")
    step_s = run.minutes * 60.0 / run.samples_to_converge * run.global_batch  # measured, all included
    comm0 = allreduce_seconds(gradient_bytes, run.accelerators, bandwidth_gbps, latency_us, topology)
    compute0 = step_s - comm0
    if compute0 <= 0:
        raise UsageError(
            f"the modelled all-reduce on the measured {run.accelerators} accelerators ({comm0 * 1e3:.3g} ms a step) "
            f"is longer than the measured step ({step_s * 1e3:.3g} ms): the --bandwidth or --latency-us given "
            "cannot describe the machine that ran it; give the measured machine's"
        )
    local0 = run.global_batch / run.accelerators
    rate = local0 / compute0  # samples/s per accelerator, compute alone
    local = batch_per_accelerator if batch_per_accelerator is not None else local0
    batch = local * accelerators
    compute = local / rate
    comm = allreduce_seconds(gradient_bytes, accelerators, bandwidth_gbps, latency_us, topology)
    factor, warnings = convergence_factor(table, run.global_batch, batch)
    samples = run.samples_to_converge * factor
    steps = samples / batch
    if steps < 1:
        raise UsageError(
            f"on {accelerators:,} accelerators the global batch ({batch:,.0f} samples) is larger than the "
            f"{samples:,.0f} samples to converge: less than one step, which no run can take; predict for fewer "
            "accelerators (--to) or a smaller --batch-per-accelerator"
        )
    return Prediction(
        accelerators=accelerators,
        global_batch=batch,
        batch_per_accelerator=local,
        throughput_per_accelerator=rate,
        compute_s=compute,
        communication_s=comm,
        measured_communication_s=comm0,
        convergence_factor=factor,
        samples_to_converge=samples,
        steps=steps,
        minutes=steps * (compute + comm) / 60.0,
        warnings=warnings,
    )
