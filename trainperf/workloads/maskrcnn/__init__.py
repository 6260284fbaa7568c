"""maskrcnn: Mask R-CNN object detection and instance segmentation (MLPerf's heavyweight benchmark)."""
