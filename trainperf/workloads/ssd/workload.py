"""ssd's workload: RetinaNet's model and optimizer (its facts are in ``__init__.py``; data, loss and COCO
evaluation are the detection base class's, ``trainperf/workloads/common/detection/base.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from trainperf.errors import UsageError
from trainperf.workloads.common.detection import coco, models
from trainperf.workloads.common.detection.base import DetectionWorkload
from trainperf.workloads.common.schedules import adamw_one_cycle, linear_warmup
from trainperf.workloads.ssd import backbone


class SSDWorkload(DetectionWorkload):
    FIELDS = {"mAP": "bbox"}
    REFERENCE_IMAGE = (800, 800)
    REFERENCE_CLASSES = models.OPENIMAGES_MLPERF_CLASSES
    BACKBONE_FILE = backbone.REFERENCE_FILE  # the reference's file name (backbone.py)
    # The reference trains on OpenImages' group boxes too: MLCommons' get_openimages builds its dataset
    # with ConvertCocoPolysToMask(filter_iscrowd=False), and the conversion marks IsGroupOf as iscrowd=1.
    REFERENCE_KEEP_CROWD = True
    # The reference takes an OpenImages category id as its label (coco_utils.ConvertCocoPolysToMask) on a
    # head of one column per category (num_classes=264); the MLPerf file's ids are 0..263 in order, so
    # 0-based labels in the file's order are the reference's labels.
    REFERENCE_FIRST_LABEL = 0
    # The reference trains on every image of the OpenImages subset: its get_openimages, unlike its get_coco,
    # does not apply _coco_remove_images_without_annotations. The mini scale keeps the filter.
    REFERENCE_REMOVE_UNANNOTATED = False

    def reference_paths(self, root: Path) -> tuple[Path, Path, Path, Path]:
        return coco.openimages_mlperf_paths(root)

    def prepare(self) -> None:
        """The base class's checks, then the backbone file identified as the reference's (backbone.py); a missing
        file is build_model's to report."""
        super().prepare()
        if self._backbone is not None and self._backbone.is_file():
            backbone.check_reference_backbone(self._backbone, self.config.division)

    def mini_model(self, num_classes: int) -> torch.nn.Module:
        return models.mini_retinanet(num_classes)

    def reference_model(self) -> torch.nn.Module:
        return models.reference_retinanet()

    def reference_tensor_names(self, model: torch.nn.Module) -> list[str]:
        """MLPerf's names of the reference RetinaNet's tensors (``weights_initialization`` events)."""
        return models.ssd_tensor_names(model) if self.flavour.reference_names else []

    def build_optimizer(self, model: torch.nn.Module) -> tuple[Any, Any]:
        r = self.recipe
        spe = self.steps_per_epoch
        params = [p for p in model.parameters() if p.requires_grad]
        if r.opt_name == "adam":
            opt = torch.optim.Adam(params, lr=r.opt_base_learning_rate, weight_decay=r.opt_weight_decay)
            factor = linear_warmup(
                warmup_steps=round(r.opt_learning_rate_warmup_epochs * spe),
                warmup_factor=r.opt_learning_rate_warmup_factor,
            )
            return opt, torch.optim.lr_scheduler.LambdaLR(opt, factor)
        if r.opt_name != "adamw":
            raise UsageError(f"ssd: optimizer {r.opt_name!r} is not supported (use adam or adamw)")
        decay = [p for p in params if p.ndim > 1]
        no_decay = [p for p in params if p.ndim <= 1]
        groups = [{"params": decay, "weight_decay": r.opt_weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        return adamw_one_cycle(groups, r, spe)
