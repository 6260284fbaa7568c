"""What the object-detection benchmarks ``ssd`` (RetinaNet) and ``maskrcnn`` (Mask R-CNN) share: COCO-format
data and metrics (``coco``, ``scenes``, ``evaluation``), the models (``models``, ``roi_align``) and the
workload base class (``base``). This ``__init__`` is pure data (no torch): both benchmarks register it.
"""

from __future__ import annotations

from trainperf.spec import MiniData

# The mini scenes: one dataset for both benchmarks (prepared once), composed from resnet's Fashion-MNIST files.
MINI_SCENES = MiniData(
    description="Fashion-MNIST object scenes in COCO json (boxes, RLE masks), shared by ssd and maskrcnn",
    prepare="trainperf.workloads.common.detection.scenes:prepare_mini",
    verify="trainperf.workloads.common.detection.scenes:verify_mini",
    needs=("resnet",),
)
