"""ssd: RetinaNet object detection (MLPerf's lightweight object detection benchmark)."""
