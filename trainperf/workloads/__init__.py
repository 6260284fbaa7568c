"""The benchmarks' workloads, one folder each."""
