"""The object-detection benchmarks ``ssd`` (RetinaNet) and ``maskrcnn`` (Mask R-CNN): COCO-format data and metrics."""
