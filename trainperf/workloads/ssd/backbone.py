"""The reference RetinaNet's pretrained backbone, identified by its checksum.

MLPerf v2.0's RetinaNet starts from torchvision's ImageNet ResNeXt50-32x4d, the V1 file
``resnext50_32x4d-7cdf4587.pth`` (mlcommons/training @ a0671ab8, ``single_stage_detector/ssd/model/resnet.py:16``;
``single_stage_detector/scripts/download_backbone.sh:3-8`` downloads it and checks its SHA-512). Any state dict of
the right shapes loads (``models.load_backbone_checkpoint``), torchvision's later IMAGENET1K_V2 weights among them,
so the file is identified by that SHA-512 before it is read: another file is refused in the closed division and
warned about in the open one.
"""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path

from trainperf.errors import RuleError, TrainperfWarning

REFERENCE_FILE = "resnext50_32x4d-7cdf4587.pth"
REFERENCE_URL = f"https://download.pytorch.org/models/{REFERENCE_FILE}"
# single_stage_detector/scripts/download_backbone.sh:4 @ a0671ab8 (the reference's own check of the file)
REFERENCE_SHA512 = (
    "15c9f0bc1c8d64750712f86ffaded3b0bc6a87e77a395dcda3013d8af65b7ebf3ca1c24dd3aae60c0d83e510b4d27731f0526b6f9392c0a85"
    "ffc18e5fecd8a13"
)
_CHUNK = 1 << 20


def sha512_of(path: Path) -> str:
    """The SHA-512 of the file at ``path``, read in 1 MiB pieces."""
    digest = hashlib.sha512()
    with open(path, "rb") as f:
        while piece := f.read(_CHUNK):
            digest.update(piece)
    return digest.hexdigest()


def check_reference_backbone(path: Path, division: str) -> None:
    """Refuse (closed division) or warn about (open division) a backbone file that is not the reference's."""
    found = sha512_of(path)
    if found == REFERENCE_SHA512:
        return
    message = (
        f"backbone checkpoint {path} is not the reference's ImageNet ResNeXt50-32x4d, torchvision's {REFERENCE_FILE} "
        f"(SHA-512 {found[:16]}..., expected {REFERENCE_SHA512[:16]}..., as mlcommons/training "
        f"single_stage_detector/scripts/download_backbone.sh checks it); download it from {REFERENCE_URL} to "
        f"<data-dir>/ssd/reference/{REFERENCE_FILE} or pass --set backbone_checkpoint=PATH"
    )
    if division == "closed":
        raise RuleError(f"{message}; the closed division starts from that file (--division open allows others)")
    warnings.warn(f"{message}; the open division goes on with this file", TrainperfWarning, stacklevel=2)
