"""rnnt: speech recognition (MLPerf: RNN-T on LibriSpeech). Pure data; the workload is not built yet."""

from __future__ import annotations

from trainperf.spec import EPOCHS, Benchmark, BenchmarkSpec

REFERENCE = BenchmarkSpec(
    key="rnnt",
    scale="reference",
    model="RNN-T (MLPerf v2.0 reference: LSTM encoder with time stacking, prediction and joint networks)",
    dataset="LibriSpeech (<speaker>/<chapter>/*.flac, *.trans.txt); evaluation on dev-clean",
    metric="wer",
    target=0.058,  # MLPerf Training v2.0 rules, closed_rnnt.yaml: eval_accuracy <= 0.058
    higher_is_better=False,
    runs_required=10,  # v2.0 "Benchmark results": 10 runs for rnnt
    runs_dropped=1,
    unit=EPOCHS,
    eval_interval=1.0,  # v2.0: evaluation every epoch
    max_progress=100.0,  # the reference's epoch budget
    max_minutes=24 * 60.0,
    target_source="MLPerf Training v2.0 rules (closed_rnnt.yaml)",
)

BENCHMARK = Benchmark(key="rnnt", title="speech recognition", specs={"reference": REFERENCE})
