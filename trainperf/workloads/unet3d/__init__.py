"""unet3d: medical image segmentation (MLPerf: 3D U-Net on KiTS19). Pure data; the workload is not built yet."""

from __future__ import annotations

from trainperf.spec import EPOCHS, Benchmark, BenchmarkSpec

REFERENCE = BenchmarkSpec(
    key="unet3d",
    scale="reference",
    model="3D U-Net (MLPerf v2.0 reference)",
    dataset="KiTS19 (case_<5 digits>/imaging.nii.gz, segmentation.nii.gz; 168 train / 42 eval cases)",
    metric="mean_dice",
    target=0.908,  # MLPerf Training v2.0 rules, closed_unet3d.yaml: eval_accuracy >= 0.908
    runs_required=40,  # v2.0 "Benchmark results": 40 runs, 4 fastest and 4 slowest dropped
    runs_dropped=4,
    unit=EPOCHS,  # an epoch is the 168 training cases
    first_eval=1000.0,  # v2.0 reference: start_eval_at = ceil(1000 * 168 / samples_per_epoch) epochs
    eval_interval=20.0,  # v2.0 reference: evaluate_every = ceil(20 * 168 / samples_per_epoch) epochs
    max_progress=4000.0,  # the reference's --epochs 4000
    max_minutes=24 * 60.0,
    target_source="MLPerf Training v2.0 rules (closed_unet3d.yaml); schedule from the v2.0 reference",
)

BENCHMARK = Benchmark(key="unet3d", title="medical image segmentation", specs={"reference": REFERENCE})
