"""Submission artefacts in the MLCommons layout: system descriptions, result folders and their checks."""
