"""maskrcnn's workload: Mask R-CNN's model and optimizer (its facts are in ``__init__.py``; data, loss and
COCO evaluation are the detection base class's, ``trainperf/workloads/common/detection/base.py``).

The reference scale builds the MLPerf v2.0 reference model (``model.py``: the MSRA ResNet-50 FPN, 81 classes)
and loads its backbone from MSRA's ``R-50.pkl`` (``c2_weights.py``); the mini scale keeps its calibrated
model and recipe.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from trainperf.errors import DataError, UsageError
from trainperf.workloads.common.detection import coco, models
from trainperf.workloads.common.detection.base import DetectionWorkload
from trainperf.workloads.common.schedules import adamw_one_cycle, warmup_step_decay
from trainperf.workloads.maskrcnn import BACKBONE_INITS, DECAY_STEPS_RULE, c2_weights
from trainperf.workloads.maskrcnn import model as reference


class MaskRCNNWorkload(DetectionWorkload):
    NEED_MASKS = True
    FIELDS = {"BBOX": "bbox", "SEGM": "segm"}  # MLPerf logs eval_accuracy as {"BBOX": .., "SEGM": ..}
    REFERENCE_IMAGE = (800, 1216)
    REFERENCE_CLASSES = reference.COCO_CLASSES - 1  # the 80 categories of COCO 2017 (labels 1..80, 0: background)
    BACKBONE_FILE = c2_weights.R50_FILE

    def reference_paths(self, root: Path) -> tuple[Path, Path, Path, Path]:
        return coco.coco2017_paths(root)

    def mini_model(self, num_classes: int) -> torch.nn.Module:
        return models.mini_maskrcnn(num_classes)

    def reference_model(self) -> torch.nn.Module:
        r = self.recipe
        return reference.reference_maskrcnn(
            min_size=r.min_image_size, max_size=r.max_image_size, image_candidates=r.num_image_candidates
        )

    # --- the reference backbone ----------------------------------------------------------------------
    def prepare(self) -> None:
        """Mini: the base class's manifest check. Reference: the data's files, and R-50.pkl unless the
        open-division recipe asks for random weights (read by build_model, untimed)."""
        if self.flavour.generated:
            super().prepare()
            return
        self.reference_paths(self.reference_root)
        self._backbone = None
        if self._backbone_init() == "R-50.pkl":
            path = Path(self.recipe.backbone_checkpoint or self.reference_root / self.BACKBONE_FILE)
            if not path.is_file():
                raise DataError(
                    f"backbone weights {path} not found: the reference Mask R-CNN starts from MSRA's "
                    f"ImageNet-pretrained ResNet-50 ({c2_weights.R50_FILE}); {c2_weights.FIX}"
                )
            self._backbone = path

    def _backbone_init(self) -> str:
        init = self.recipe.backbone_init
        if init not in BACKBONE_INITS:
            raise UsageError(
                f"--set backbone_init={init!r}: maskrcnn's reference backbone starts from {' or '.join(BACKBONE_INITS)}"
            )
        return init

    def build_model(self) -> torch.nn.Module:
        if self.flavour.generated:
            return super().build_model()
        self._backbone_init()
        model = self.reference_model()
        # prepare() found R-50.pkl; a dry run reads no file and keeps the reference's random initialisation
        if self._backbone is not None:
            c2_weights.load_r50_into(model.backbone.body, self._backbone)
        return model

    def reference_tensor_names(self, model: torch.nn.Module) -> list[str]:
        """MLPerf's names of the reference Mask R-CNN's initialized modules (``weights_initialization``)."""
        return models.maskrcnn_tensor_names(model) if self.flavour.reference_names else []

    # --- the optimizer -------------------------------------------------------------------------------
    @property
    def decay_steps(self) -> tuple[int, ...]:
        """The recipe's decay steps, or MLPerf's rule's at this global batch (K = 0) when it names none."""
        r = self.recipe
        return tuple(r.opt_learning_rate_decay_steps) or DECAY_STEPS_RULE.steps(self.global_batch_size)

    def hparams(self) -> dict[str, Any]:
        values = super().hparams()
        if "opt_learning_rate_decay_steps" in self.spec.hparam_keys:  # the reference's keys name it
            values["opt_learning_rate_decay_steps"] = list(self.decay_steps)  # what the schedule uses
        if values.get("opt_name") == "sgd":  # momentum SGD, by the name the reference logs (tools/train_mlperf.py:129)
            values["opt_name"] = "sgd_with_momentum"
        return values

    def build_optimizer(self, model: torch.nn.Module) -> tuple[Any, Any]:
        r = self.recipe
        if r.opt_name == "sgd":
            # solver/build.py: one group per tensor; biases at BIAS_LR_FACTOR x the rate and WEIGHT_DECAY_BIAS
            named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
            weights = [p for n, p in named if "bias" not in n]
            biases = [p for n, p in named if "bias" in n]
            lr = r.opt_base_learning_rate
            groups = [
                {"params": weights, "lr": lr, "weight_decay": r.opt_weight_decay},
                {"params": biases, "lr": lr * r.opt_bias_learning_rate_factor, "weight_decay": r.opt_weight_decay_bias},
            ]
            opt = torch.optim.SGD(groups, lr=lr, momentum=r.opt_momentum)
            factor = warmup_step_decay(
                warmup_steps=r.opt_learning_rate_warmup_steps,
                warmup_factor=r.opt_learning_rate_warmup_factor,
                boundaries=list(self.decay_steps),
                factor=r.opt_learning_rate_decay_factor,
            )
            # engine/trainer.py steps the scheduler before each update, so its k-th update (from 1) takes the
            # factor of step k; the harness steps it after, so update s (from 0) takes factor(s + 1)
            return opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda s: factor(s + 1))  # each group's own rate
        if r.opt_name != "adamw":
            raise UsageError(f"maskrcnn: optimizer {r.opt_name!r} is not supported (use sgd or adamw)")
        params = [p for p in model.parameters() if p.requires_grad]
        decay = [p for p in params if p.ndim > 1]
        no_decay = [p for p in params if p.ndim <= 1]
        groups = [{"params": decay, "weight_decay": r.opt_weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        return adamw_one_cycle(groups, r, self.steps_per_epoch)
