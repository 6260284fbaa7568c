"""Results tables (and, later, reports with charts)."""
