"""maskrcnn's workload: Mask R-CNN's model and optimizer (its facts are in ``__init__.py``; data, loss and
COCO evaluation are the detection base class's, ``trainperf/workloads/common/detection/base.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from trainperf.errors import UsageError
from trainperf.workloads.common.detection import coco, models
from trainperf.workloads.common.detection.base import DetectionWorkload
from trainperf.workloads.common.schedules import adamw_one_cycle, warmup_step_decay


class MaskRCNNWorkload(DetectionWorkload):
    NEED_MASKS = True
    FIELDS = {"BBOX": "bbox", "SEGM": "segm"}  # MLPerf logs eval_accuracy as {"BBOX": .., "SEGM": ..}
    REFERENCE_SIZES = (117_266, 5_000)  # COCO train2017 images with annotations (as MLPerf logs), val2017
    REFERENCE_IMAGE = (800, 1216)
    BACKBONE_FILE = "resnet50.pth"

    def reference_paths(self, root: Path) -> tuple[Path, Path, Path, Path]:
        return coco.coco2017_paths(root)

    def mini_model(self, num_classes: int) -> torch.nn.Module:
        return models.mini_maskrcnn(num_classes)

    def reference_model(self) -> torch.nn.Module:
        return models.reference_maskrcnn()

    def reference_tensor_names(self, model: torch.nn.Module) -> list[str]:
        """MLPerf's names of the reference Mask R-CNN's initialized modules (``weights_initialization``)."""
        return models.maskrcnn_tensor_names(model) if self.spec.scale == "reference" else []

    def build_optimizer(self, model: torch.nn.Module) -> tuple[Any, Any]:
        r = self.recipe
        params = [p for p in model.parameters() if p.requires_grad]
        decay = [p for p in params if p.ndim > 1]
        no_decay = [p for p in params if p.ndim <= 1]
        groups = [{"params": decay, "weight_decay": r.opt_weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        if r.opt_name == "sgd":
            opt = torch.optim.SGD(groups, lr=r.opt_base_learning_rate, momentum=r.opt_momentum)
            factor = warmup_step_decay(
                warmup_steps=r.opt_learning_rate_warmup_steps,
                warmup_factor=r.opt_learning_rate_warmup_factor,
                boundaries=list(r.opt_learning_rate_decay_steps),
                factor=r.opt_learning_rate_decay_factor,
            )
            return opt, torch.optim.lr_scheduler.LambdaLR(opt, factor)
        if r.opt_name != "adamw":
            raise UsageError(f"maskrcnn: optimizer {r.opt_name!r} is not supported (use sgd or adamw)")
        return adamw_one_cycle(groups, r, self.steps_per_epoch)
