"""ssd: the specs (mini, reference) and the workload (RetinaNet, MLPerf's "lightweight object detection").

reference: RetinaNet ResNeXt50-32x4d FPN on the MLPerf OpenImages subset (COCO json), Adam with linear
warm-up (MLPerf v2.0 closed keys), mAP >= 0.340, eval every epoch. mini: the same torchvision RetinaNet on
a small ResNeXt-FPN, on trainperf's Fashion-MNIST scenes in COCO json; mAP target calibrated by
measurement (README.md beside this file).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from trainperf.errors import UsageError
from trainperf.rules.closed import Rule, Tunable
from trainperf.spec import BenchmarkSpec
from trainperf.workloads.common.schedules import adamw_one_cycle, linear_warmup
from trainperf.workloads.detection import coco, models
from trainperf.workloads.detection.workload import DetectionWorkload

REFERENCE_KEYS = (
    "opt_name",
    "opt_base_learning_rate",
    "opt_weight_decay",
    "opt_learning_rate_warmup_epochs",
    "opt_learning_rate_warmup_factor",
)

REFERENCE = BenchmarkSpec(
    key="ssd",
    scale="reference",
    model="RetinaNet ResNeXt50-32x4d FPN, 800x800 (37.06 M parameters)",
    dataset="MLPerf OpenImages subset, 264 classes (COCO json: {train,validation}/labels/openimages-mlperf.json)",
    metric="mAP",
    target=0.340,  # MLPerf Training v2.0 rules, closed_ssd.yaml: eval_accuracy >= 0.340
    runs_required=5,
    runs_dropped=1,
    eval_every_epochs=1.0,  # v2.0: evaluation every epoch
    max_epochs=20.0,  # published v2.0 results converge in 4-6 epochs at 256-768 images per step
    max_minutes=24 * 60.0,
    hparam_keys=REFERENCE_KEYS,
    target_source="MLPerf Training v2.0 rules (closed_ssd.yaml)",
)

MINI = BenchmarkSpec(
    key="ssd",
    scale="mini",
    model="RetinaNet on a small ResNeXt-FPN (P2-P4), 96x96 (0.51 M parameters)",
    dataset="Fashion-MNIST object scenes, 10 classes (COCO json, 8,000 train / 500 val)",
    metric="mAP",
    target=0.15,  # calibrated: see trainperf/workloads/ssd/README.md
    runs_required=5,
    runs_dropped=1,
    eval_every_epochs=0.2,
    max_epochs=4.0,
    max_minutes=6.0,
    hparam_keys=(
        "opt_name",
        "opt_base_learning_rate",
        "opt_weight_decay",
        "opt_learning_rate_warmup_epochs",
        "opt_learning_rate_schedule_epochs",
    ),
    target_source="measured: README.md beside ssd/workload.py",
)


class SSDWorkload(DetectionWorkload):
    SPECS = {"mini": MINI, "reference": REFERENCE}
    REFERENCE_SIZES = (1_170_301, 24_781)  # the MLPerf OpenImages subset's train and validation images
    REFERENCE_IMAGE = (800, 800)
    # The reference trains on OpenImages' group boxes too: MLCommons' get_openimages builds its dataset
    # with ConvertCocoPolysToMask(filter_iscrowd=False), and the conversion marks IsGroupOf as iscrowd=1.
    REFERENCE_KEEP_CROWD = True

    # Mini recipe, chosen by measured time-to-train (README.md): AdamW, one-cycle schedule planned over
    # ``opt_learning_rate_schedule_epochs`` and held at its end value afterwards.
    MINI_RECIPE = {
        "global_batch_size": 16,
        "opt_name": "adamw",
        "opt_base_learning_rate": 0.003,
        "opt_weight_decay": 0.0001,
        "opt_learning_rate_warmup_epochs": 0.1,
        "opt_learning_rate_schedule_epochs": 1.0,
    }
    # The MLPerf v2.0 reference recipe (mlcommons/training single_stage_detector): Adam at 1e-4 for 256
    # images per step, one warm-up epoch from 1e-3 of the rate, no weight decay.
    REFERENCE_RECIPE = {
        "global_batch_size": 256,
        "opt_name": "adam",
        "opt_base_learning_rate": 0.0001,
        "opt_weight_decay": 0.0,
        "opt_learning_rate_warmup_epochs": 1.0,
        "opt_learning_rate_warmup_factor": 0.001,
        "backbone_checkpoint": "",  # "" -> <data-dir>/ssd/reference/resnext50_32x4d.pth
    }
    # Closed division. Reference: closed_ssd.yaml fixes Adam and a weight decay of 0; batch size, rate and
    # warm-up are the submitter's. Mini: trainperf's own rules for the mini recipe.
    CLOSED_RULES: dict[str, dict[str, Rule]] = {
        "reference": {
            "global_batch_size": Tunable(),
            "opt_base_learning_rate": Tunable(),
            "opt_learning_rate_warmup_epochs": Tunable(),
            "opt_learning_rate_warmup_factor": Tunable(),
            "backbone_checkpoint": Tunable(),
        },
        "mini": {
            "global_batch_size": Tunable(),
            "opt_base_learning_rate": Tunable(),
            "opt_learning_rate_warmup_epochs": Tunable(),
            "opt_learning_rate_schedule_epochs": Tunable(),
        },
    }

    def reference_paths(self, root: Path) -> tuple[Path, Path, Path, Path]:
        return coco.openimages_mlperf_paths(root)

    def make_model(self, num_classes: int) -> torch.nn.Module:
        if self.spec.scale == "mini":
            return models.mini_retinanet(num_classes)
        if num_classes != models.OPENIMAGES_MLPERF_CLASSES and not self.config.dry_run:
            raise UsageError(
                f"ssd reference: the annotations declare {num_classes} categories; the MLPerf OpenImages subset "
                f"has {models.OPENIMAGES_MLPERF_CLASSES}"
            )
        model = models.reference_retinanet()
        if not self.config.dry_run:  # a dry run checks the path at full size, from random weights
            path = self.recipe["backbone_checkpoint"] or self.data_dir / "ssd" / "reference" / "resnext50_32x4d.pth"
            models.load_backbone_checkpoint(model, path)
        return model

    def initialized_tensors(self, model: torch.nn.Module) -> list[str]:
        """MLPerf's names of the reference RetinaNet's tensors (``weights_initialization`` events)."""
        return models.ssd_tensor_names(model) if self.spec.scale == "reference" else []

    def build_optimizer(self, model: torch.nn.Module) -> tuple[Any, Any]:
        r = self.recipe
        spe = self.steps_per_epoch
        params = [p for p in model.parameters() if p.requires_grad]
        if r["opt_name"] == "adam":
            opt = torch.optim.Adam(params, lr=r["opt_base_learning_rate"], weight_decay=r["opt_weight_decay"])
            factor = linear_warmup(
                warmup_steps=round(r["opt_learning_rate_warmup_epochs"] * spe),
                warmup_factor=r["opt_learning_rate_warmup_factor"],
            )
            return opt, torch.optim.lr_scheduler.LambdaLR(opt, factor)
        if r["opt_name"] != "adamw":
            raise UsageError(f"ssd: optimizer {r['opt_name']!r} is not supported (use adam or adamw)")
        decay = [p for p in params if p.ndim > 1]
        no_decay = [p for p in params if p.ndim <= 1]
        groups = [{"params": decay, "weight_decay": r["opt_weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}]
        return adamw_one_cycle(groups, r, spe)

    def hparams(self) -> dict[str, Any]:
        keys = REFERENCE_KEYS if self.recipe["opt_name"] == "adam" else self.spec.hparam_keys
        return {k: self.recipe[k] for k in keys}
