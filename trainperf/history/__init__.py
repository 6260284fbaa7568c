"""The published MLPerf Training results (v0.6 to v5.1) and the questions MLPerf press releases answer.

`query.load_results()` reads the shipped table (`data/mlperf_training_results.csv`, described in
`data/README.md`) into `Result` records; `query.fastest`, `query.speedup`, `query.per_accelerator` and
`query.place` answer "who was fastest", "how much faster did an org get", "how do accelerators compare"
and "where would my result rank"; `energy` joins the published energy to train (`data/mlperf_training_energy.csv`)
and `query.with_energy` lists the results that have one. `charts` draws them as PNG; `cli` is `trainperf history`.
"""
