"""Benchmark rules: the mini-scale ruleset and the wrapper around MLCommons' compliance checker.

``mini_rules`` writes the mini scale's rules in the official checker's own YAML language (one file per
benchmark, shipped under ``rules/mini/``); each file runs the official ``training_2.0.0/common.yaml``
too, so a mini log is held to MLPerf's structure rules plus trainperf's mini target. ``compliance``
runs the official checker on a log (reference scale: the official v2.0 rules; mini scale: the shipped
file) and explains each failure in plain words.
"""
