"""What ``ssd`` and ``maskrcnn`` share: COCO-layout data, torchvision detection models, COCO evaluation.

A subclass names its model, data layout, recipe and metric; this base class reads the data with the
same loader at both scales (trainperf.workloads.detection.coco), trains with the model's own losses and
evaluates with pycocotools' COCOeval on the whole validation set (detections gathered from every rank).
"""

from __future__ import annotations

import abc
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, DistributedSampler

from trainperf.errors import UsageError
from trainperf.spec import Workload
from trainperf.workloads.detection import coco


class DetectionWorkload(Workload):
    """Base of the detection workloads; subclasses set the class attributes and the hooks below."""

    NEED_MASKS = False
    IOU_TYPES: tuple[str, ...] = ("bbox",)  # COCOeval types; several -> a dict metric {"BBOX": .., "SEGM": ..}
    DRY_RUN_LOCAL_BATCH = 2
    # Sizes logged by a dry run, which has no data: the real dataset's (train images, val images).
    REFERENCE_SIZES = (0, 0)
    REFERENCE_IMAGE = (800, 800)  # (height, width) of a dry run's synthetic images
    MINI_EVAL_BATCH = 50
    DATA_WORKERS = 8  # reference scale; the mini scale decodes in the training process (two cores in all)
    REFERENCE_KEEP_CROWD = False  # train on iscrowd=1 boxes at the reference scale (ssd's OpenImages groups)

    # --- hooks ---------------------------------------------------------------------------------------
    @abc.abstractmethod
    def reference_paths(self, root: Path) -> tuple[Path, Path, Path, Path]:
        """(train_json, train_dir, val_json, val_dir) of the reference dataset under ``root``."""

    @abc.abstractmethod
    def make_model(self, num_classes: int) -> torch.nn.Module:
        """The detection model for ``num_classes`` object categories (without background)."""

    # --- set-up ------------------------------------------------------------------------------------
    @classmethod
    def default_recipe(cls, scale: str) -> dict[str, Any]:
        return dict(cls.MINI_RECIPE if scale == "mini" else cls.REFERENCE_RECIPE)  # type: ignore[attr-defined]

    def prepare(self) -> None:
        self.recipe = {**self.default_recipe(self.spec.scale), **self.config.overrides}
        batch = self.recipe["global_batch_size"]
        if self.config.dry_run and self.spec.scale == "reference":
            batch = self.DRY_RUN_LOCAL_BATCH * self.dist.world_size
            self.recipe["global_batch_size"] = batch
        if batch % self.dist.world_size:
            raise UsageError(
                f"global batch size {batch} is not divisible by {self.dist.world_size} processes; "
                "choose a process count that divides it"
            )
        self.local_batch = batch // self.dist.world_size
        self.train_index = self.val_index = None
        if self.config.dry_run:
            self._num_classes = 10
            self._train_len, self._eval_len = self.REFERENCE_SIZES
            if self.spec.scale == "mini":
                self._train_len, self._eval_len = self.local_batch * 4, self.local_batch
            return
        if self.spec.scale == "mini":
            paths = coco.mini_paths(self.data_dir)
        else:
            paths = self.reference_paths(self.data_dir / self.spec.key / "reference")
        train_json, train_dir, val_json, val_dir = paths
        self.train_index = coco.load_coco(train_json, train_dir, need_masks=self.NEED_MASKS)
        self.val_index = coco.load_coco(val_json, val_dir, need_masks=self.NEED_MASKS)
        if self.train_index.category_to_label != self.val_index.category_to_label:
            raise UsageError(f"{train_json} and {val_json} declare different categories; they must be the same")
        self._num_classes = self.train_index.num_classes
        keep_crowd = self.spec.scale == "reference" and self.REFERENCE_KEEP_CROWD
        self.train_set = coco.CocoDetection(self.train_index, train=True, seed=self.config.seed, keep_crowd=keep_crowd)
        self.val_set = coco.CocoDetection(self.val_index, train=False)
        self._train_len, self._eval_len = len(self.train_set), len(self.val_set)

    @property
    def global_batch_size(self) -> int:
        return self.recipe["global_batch_size"]

    @property
    def steps_per_epoch(self) -> int:
        return max(1, self._train_len // self.global_batch_size)  # the last partial batch is dropped

    @property
    def train_samples(self) -> int:
        return self._train_len

    @property
    def eval_samples(self) -> int:
        return self._eval_len

    def build_model(self) -> torch.nn.Module:
        return self.make_model(self._num_classes)

    # --- data ----------------------------------------------------------------------------------------
    def synthetic_batch(self) -> tuple[list[torch.Tensor], list[dict[str, torch.Tensor]]]:
        """Random images of the real size with two boxes each (and their masks), for dry runs and tests."""
        g = torch.Generator().manual_seed(self.config.seed)
        h, w = (96, 96) if self.spec.scale == "mini" else self.REFERENCE_IMAGE
        images, targets = [], []
        for i in range(self.local_batch):
            images.append(torch.rand(3, h, w, generator=g))
            x0, y0 = int(torch.randint(0, w // 2, (1,), generator=g)), int(torch.randint(0, h // 2, (1,), generator=g))
            boxes = torch.tensor(
                [[x0, y0, x0 + w // 4, y0 + h // 3], [w // 2, h // 2, w - 1, h - 1]], dtype=torch.float32
            )
            target = {"boxes": boxes, "labels": torch.tensor([1, 1 + i % max(1, self._num_classes)]), "image_id": i}
            if self.NEED_MASKS:
                masks = torch.zeros(2, h, w, dtype=torch.uint8)
                for k, (a, b, c, d) in enumerate(boxes.long().tolist()):
                    masks[k, b:d, a:c] = 1
                target["masks"] = masks
            targets.append(target)
        return images, targets

    def _sampler(self, dataset: Any, *, shuffle: bool) -> DistributedSampler:
        return DistributedSampler(
            dataset,
            num_replicas=self.dist.world_size,
            rank=self.dist.rank,
            shuffle=shuffle,
            seed=self.config.seed,
            drop_last=shuffle,
        )

    def _loader(self, dataset: Any, sampler: DistributedSampler, batch: int, *, drop_last: bool) -> DataLoader:
        workers = 0 if self.spec.scale == "mini" else self.DATA_WORKERS
        return DataLoader(
            dataset,
            batch_size=batch,
            sampler=sampler,
            num_workers=workers,
            collate_fn=coco.collate,
            drop_last=drop_last,
            pin_memory=self.device.type == "cuda",
            persistent_workers=False,
        )

    def train_loader(self, epoch: int) -> Iterator[Any]:
        if self.config.dry_run:
            while True:
                yield self.synthetic_batch()
        sampler = self._sampler(self.train_set, shuffle=True)
        sampler.set_epoch(epoch)
        self.train_set.set_epoch(epoch)  # the random flips differ by seed and epoch
        yield from self._loader(self.train_set, sampler, self.local_batch, drop_last=True)

    # --- training and evaluation ------------------------------------------------------------------------
    def _to_device(self, batch: Any) -> tuple[list[torch.Tensor], list[dict[str, Any]]]:
        images, targets = batch
        images = [im.to(self.device, non_blocking=True) for im in images]
        targets = [
            {k: (v.to(self.device, non_blocking=True) if torch.is_tensor(v) else v) for k, v in t.items()}
            for t in targets
        ]
        return images, targets

    def train_step(self, model: torch.nn.Module, batch: Any, optimizer: Any) -> torch.Tensor:
        images, targets = self._to_device(batch)
        losses = model(images, targets)
        loss = sum(losses.values())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    @torch.no_grad()
    def evaluate(self, model: torch.nn.Module) -> float | dict[str, float]:
        model.eval()
        results: list[dict[str, Any]] = []
        if self.config.dry_run:
            images, targets = self._to_device(self.synthetic_batch())
            model(images)
            model.train()
            return 0.0 if len(self.IOU_TYPES) == 1 else {t.upper(): 0.0 for t in self.IOU_TYPES}
        sampler = self._sampler(self.val_set, shuffle=False)
        batch = self.MINI_EVAL_BATCH if self.spec.scale == "mini" else self.local_batch
        for images, targets in self._loader(self.val_set, sampler, batch, drop_last=False):
            outputs = model([im.to(self.device, non_blocking=True) for im in images])
            for out, target in zip(outputs, targets, strict=True):
                results += coco.to_coco_results(
                    target["image_id"],
                    out["boxes"].cpu(),
                    out["scores"].cpu(),
                    out["labels"].cpu(),
                    self.val_index,
                    masks=out["masks"].cpu() if "masks" in out else None,
                )
        model.train()
        # DistributedSampler pads the last round with repeated images: keep each detection once.
        gathered = [r for part in self.dist.gather_objects(results) for r in part]
        seen, unique = set(), []
        for r in gathered:
            key = (r["image_id"], r["category_id"], tuple(r["bbox"]), r["score"])
            if key not in seen:
                seen.add(key)
                unique.append(r)
        scores = {t.upper(): coco.coco_map(self.val_index, unique, t) for t in self.IOU_TYPES}
        if any(math.isnan(v) for v in scores.values()):
            return math.nan
        return scores if len(scores) > 1 else next(iter(scores.values()))
