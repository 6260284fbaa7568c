"""Pieces several workloads share: schedules, metrics, data helpers."""
