"""trainperf: an open time-to-train benchmark suite built the way MLPerf Training is built."""

__version__ = "0.1.0"
