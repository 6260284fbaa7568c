"""The scaling model against the published MLPerf Training results shipped with trainperf.

For each (benchmark, round, submitter, accelerator) family of closed results that has a single-node result
and larger systems, the model's free parameters are fitted on the family's smaller systems and the larger
ones are predicted:

- ``single node``: the per-accelerator throughput is fitted on the family's largest single-node result
  (its fastest, where there are several), with the default network (25 GB/s, 5 us); every multi-node
  system of the family is predicted.
- ``+ bandwidth``: the throughput and an effective bandwidth are fitted on that single-node result and the
  family's smallest multi-node system together (two equations, two unknowns); the systems larger than that
  are predicted.

The published table records no batch sizes, so each system's global batch is taken as N x the benchmark's
typical single-node per-accelerator batch (its Benchmark.published_batch_per_accelerator), clamped to the RCP
batch sizes (a submitter scales the batch until the largest batch that has an RCP, then shrinks the local
batch). Samples to converge at a batch are the RCP mean x the training-set size.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass

from trainperf.history import query
from trainperf.scaling import facts, model

MODES = ("single node", "+ bandwidth")


@dataclass(frozen=True, kw_only=True)
class Case:
    benchmark: str
    round: str
    org: str
    accelerator: str
    mode: str
    fit: tuple[int, ...]  # accelerator counts the parameters were fitted on
    n_acc: int
    actual_min: float
    predicted_min: float

    @property
    def error(self) -> float:
        return (self.predicted_min - self.actual_min) / self.actual_min


def _batch(key: str, n: int, table: facts.RCPTable) -> float:
    return min(max(n * facts.published_batch_per_accelerator(key), table.batches[0]), table.batches[-1])


def _terms(key: str, n: int, table: facts.RCPTable, latency_us: float, topology: str) -> tuple[float, float, float]:
    """Minutes = s * (x / n + (a * y + l) / B) / 60 with x = 1/throughput per accelerator, y = 1/bandwidth:
    returns (samples to converge s, a, l) for a system of n accelerators."""
    batch = _batch(key, n, table)
    samples = table.at(batch)[0] * facts.train_samples(key)
    nbytes = facts.gradient_bytes(key, "reference")
    lat = latency_us * 1e-6
    if n == 1:
        a, lat_term = 0.0, 0.0
    elif topology == "ring":
        a, lat_term = 2 * (n - 1) / n * nbytes, 2 * (n - 1) * lat
    else:
        a, lat_term = 2 * math.log2(n) * nbytes, 2 * math.log2(n) * lat
    return samples, a, lat_term


def _minutes(key: str, n: int, table: facts.RCPTable, x: float, y: float, latency_us: float, topology: str) -> float:
    samples, a, lat = _terms(key, n, table, latency_us, topology)
    batch = _batch(key, n, table)
    return samples * (x / n + (a * y + lat) / batch) / 60.0


def _fit_x(key: str, n: int, minutes: float, table, y: float, latency_us: float, topology: str) -> float | None:
    samples, a, lat = _terms(key, n, table, latency_us, topology)
    x = n * (minutes * 60.0 / samples - (a * y + lat) / _batch(key, n, table))
    return x if x > 0 else None


def _fit_xy(key, small, big, table, latency_us, topology) -> tuple[float, float] | None:
    """Solve the two equations of the single-node and the smallest multi-node system for (x, y)."""
    (n1, t1), (n2, t2) = small, big
    s1, a1, l1 = _terms(key, n1, table, latency_us, topology)
    s2, a2, l2 = _terms(key, n2, table, latency_us, topology)
    b1, b2 = _batch(key, n1, table), _batch(key, n2, table)
    # t*60/s - l/B = x/n + (a/B) y
    r1, r2 = t1 * 60 / s1 - l1 / b1, t2 * 60 / s2 - l2 / b2
    m = ((1 / n1, a1 / b1), (1 / n2, a2 / b2))
    det = m[0][0] * m[1][1] - m[0][1] * m[1][0]
    if det != 0:
        x = (r1 * m[1][1] - m[0][1] * r2) / det
        y = (m[0][0] * r2 - m[1][0] * r1) / det
        if x > 0 and y >= 0:
            return x, y
    x = _fit_x(key, n1, t1, table, 0.0, latency_us, topology)  # scaling better than compute alone: no network cost
    return (x, 0.0) if x else None


def published_families(results: list[query.Result]) -> dict[tuple[str, str, str, str], list[query.Result]]:
    """Closed, scored results of the benchmarks the model covers, from the round the benchmark took its v2.0
    form on, each log once (later repositories re-publish identical results), grouped by family."""
    redefined = query.redefined()
    seen: set[tuple] = set()
    families: dict[tuple[str, str, str, str], list[query.Result]] = defaultdict(list)
    covered = facts.scalable()
    for r in sorted(results, key=lambda r: query.round_key(r.round)):
        if r.benchmark not in covered or r.division != "closed" or not r.score_min or not r.n_acc:
            continue
        if not r.nodes or not r.accelerator:
            continue
        since = redefined.get(r.benchmark)
        if since and query.round_key(r.round) < query.round_key(since[0]):
            continue
        ident = (r.benchmark, r.org.lower(), r.accelerator, r.n_acc, r.score_min)
        if ident in seen:
            continue
        seen.add(ident)
        families[(r.benchmark, r.round, r.org.lower(), r.accelerator)].append(r)
    return families


def validate(
    results: list[query.Result] | None = None,
    *,
    latency_us: float = model.DEFAULT_LATENCY_US,
    bandwidth_gbps: float = model.DEFAULT_BANDWIDTH_GBPS,
    topology: str = "ring",
) -> list[Case]:
    results = query.load_results() if results is None else results
    tables = {key: facts.rcp_table(key, "reference") for key in facts.scalable()}
    cases = []
    for (key, rnd, org, acc), rows in sorted(published_families(results).items()):
        table = tables[key]
        single = [r for r in rows if r.nodes == 1]
        multi = sorted((r for r in rows if r.nodes > 1), key=lambda r: (r.n_acc, r.score_min))
        if not single or not multi:
            continue
        n1 = max(r.n_acc for r in single)
        t1 = min(r.score_min for r in single if r.n_acc == n1)
        multi = [r for r in multi if r.n_acc > n1]
        if not multi:
            continue

        family = dict(benchmark=key, round=rnd, org=org, accelerator=acc)
        y0 = 1 / (bandwidth_gbps * 1e9)
        x = _fit_x(key, n1, t1, table, y0, latency_us, topology)
        if x is not None:
            cases += [
                Case(
                    **family,
                    mode="single node",
                    fit=(n1,),
                    n_acc=r.n_acc,
                    actual_min=r.score_min,
                    predicted_min=_minutes(key, r.n_acc, table, x, y0, latency_us, topology),
                )
                for r in multi
            ]
        n2 = multi[0].n_acc
        t2 = min(r.score_min for r in multi if r.n_acc == n2)
        larger = [r for r in multi if r.n_acc > n2]
        xy = _fit_xy(key, (n1, t1), (n2, t2), table, latency_us, topology) if larger else None
        if xy is not None:
            cases += [
                Case(
                    **family,
                    mode="+ bandwidth",
                    fit=(n1, n2),
                    n_acc=r.n_acc,
                    actual_min=r.score_min,
                    predicted_min=_minutes(key, r.n_acc, table, *xy, latency_us, topology),
                )
                for r in larger
            ]
    return cases


def summary(cases: list[Case]) -> dict[str, dict[str, tuple[int, float | None]]]:
    """{mode: {benchmark or 'all': (cases, median absolute percentage error)}}."""
    out: dict[str, dict[str, tuple[int, float | None]]] = {}
    for mode in MODES:
        mine = [c for c in cases if c.mode == mode]
        rows = {}
        for key in (*facts.scalable(), "all"):
            errs = [abs(c.error) for c in mine if key == "all" or c.benchmark == key]
            rows[key] = (len(errs), statistics.median(errs) * 100 if errs else None)
        out[mode] = rows
    return out
