"""maskrcnn's reference smoke fixture: a tiny COCO 2017 and an ``R-50.pkl`` in the reference's C2 layout.

The COCO 2017 part is the detection fixture's (all 80 categories, ids up to 90, polygon masks, crowd regions).
Beside it, ``R-50.pkl`` holds every blob of MSRA's ResNet-50 under its C2 name and shape, written as Python
2's cPickle wrote the real file, with seeded stand-in values (no pretrained weights ship with trainperf): a
smoke run loads its backbone through the same restricted reader and name mapping as a real run, in the
closed division. ``--set backbone_checkpoint=PATH`` smoke-tests a real R-50.pkl instead.
"""

from __future__ import annotations

from pathlib import Path

from trainperf.workloads.common.detection.fixtures import write_coco2017
from trainperf.workloads.maskrcnn.c2_weights import R50_FILE, random_r50_blobs, write_c2_pickle


def write_smoke_fixture(root: Path) -> str:
    root = Path(root)
    described = write_coco2017(root)
    coco = described.split("; ")[0]  # the COCO part of the description
    write_c2_pickle(root / R50_FILE, random_r50_blobs(seed=0))
    return f"{coco}; {R50_FILE} with the MSRA ResNet-50's 161 C2 blobs (stand-in values, not pretrained)"
