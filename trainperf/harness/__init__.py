"""The harness: timed runs, suites of runs, the clock, distribution and MLLOG output."""
