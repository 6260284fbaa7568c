"""dlrm: recommendation (MLPerf: DLRM on Criteo 1TB click logs). Pure data; the workload is not built yet."""

from __future__ import annotations

from trainperf.spec import EPOCHS, Benchmark, BenchmarkSpec

REFERENCE = BenchmarkSpec(
    key="dlrm",
    scale="reference",
    model="DLRM (bottom MLP 13-512-256-128, embeddings of 128, dot interaction, top MLP 1024-1024-512-256-1)",
    dataset="Criteo 1TB click logs (24 day files; day 23 split for evaluation)",
    metric="auc",
    target=0.8025,  # MLPerf Training v2.0 rules, closed_dlrm.yaml: eval_accuracy >= 0.8025
    runs_required=5,
    runs_dropped=1,
    unit=EPOCHS,
    eval_interval=0.05,  # v2.0 reference: 20 evaluations per epoch
    max_progress=1.0,  # the reference trains at most one epoch
    max_minutes=24 * 60.0,
    target_source="MLPerf Training v2.0 rules (closed_dlrm.yaml)",
)

BENCHMARK = Benchmark(key="dlrm", title="recommendation", specs={"reference": REFERENCE})
