"""What ``ssd`` and ``maskrcnn`` share: COCO-layout data, torchvision detection models, COCO evaluation.

A subclass names its models, reference data layout and metric fields; this base class reads the data
with the same loader at both scales (trainperf.workloads.common.detection.coco), gives the model's own
summed losses and evaluates with pycocotools' COCOeval on the whole validation set (each rank its shard,
detections gathered from every rank).
"""

from __future__ import annotations

import abc
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch.utils.data import DataLoader, DistributedSampler, Subset

from trainperf import seeds
from trainperf.contract.workload import Workload
from trainperf.errors import DataError
from trainperf.workloads.common.detection import coco, models, scenes

MINI_CLASSES = len(scenes.CATEGORY_NAMES)
MINI_SIZES = (scenes.TRAIN_SCENES, scenes.VAL_SCENES)  # every scene holds an object, so none is skipped


@dataclass(frozen=True, kw_only=True)
class Flavour:
    """What a scale fixes beyond the recipe, for both detection workloads."""

    # True: the mini scenes (checked against their manifest, read from their own layout) and the mini model for
    # their classes; False: the reference dataset as the subclass's REFERENCE_* facts describe it, the reference
    # model and its pretrained backbone.
    generated: bool
    data_workers: int  # DataLoader workers (0: decoded in the training process, two cores in all)
    eval_batch: int | None  # images per evaluation batch; None: the local batch size
    reference_names: bool  # weights_initialization names the reference's tensors


FLAVOURS = {
    "mini": Flavour(generated=True, data_workers=0, eval_batch=50, reference_names=False),
    "reference": Flavour(generated=False, data_workers=8, eval_batch=None, reference_names=True),
}


class DetectionWorkload(Workload):
    """Base of the detection workloads; subclasses set the class attributes and the hooks below."""

    NEED_MASKS = False
    FIELDS: ClassVar[dict[str, str]] = {"mAP": "bbox"}  # metric field -> COCOeval iouType
    DRY_RUN_LOCAL_BATCH = 2
    REFERENCE_IMAGE = (800, 800)  # (height, width) of a reference dry run's synthetic images
    REFERENCE_CLASSES: int | None = None  # categories the reference model is built for (None: not checked)
    BACKBONE_FILE = ""  # the pretrained backbone under <data-dir>/<key>/reference/ (recipe's backbone_checkpoint: "")
    REFERENCE_KEEP_CROWD = False  # train on iscrowd=1 boxes at the reference scale (ssd's OpenImages groups)
    REFERENCE_FIRST_LABEL = 1  # the reference model's label of the file's first category (0: no background label)
    REFERENCE_REMOVE_UNANNOTATED = True  # drop training images without a box at the reference scale (the mini's do)

    _loaded: tuple[int, int] | None = None  # (train, eval) sizes once the data is read
    _backbone: Path | None = None  # the pretrained backbone, once prepare() has found where it is
    _stream: Generator[Any, None, None] | None = None  # train_batches()'s generator, closed by close()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.flavour = FLAVOURS[self.spec.scale]

    # --- hooks ---------------------------------------------------------------------------------------
    @abc.abstractmethod
    def reference_paths(self, root: Path) -> tuple[Path, Path, Path, Path]:
        """(train_json, train_dir, val_json, val_dir) of the reference dataset under ``root``; DataError if absent."""

    @abc.abstractmethod
    def mini_model(self, num_classes: int) -> torch.nn.Module:
        """The mini model for ``num_classes`` object categories (without background)."""

    @abc.abstractmethod
    def reference_model(self) -> torch.nn.Module:
        """The MLPerf reference model, from random weights (the pretrained backbone is loaded after)."""

    # --- set-up --------------------------------------------------------------------------------------
    @property
    def reference_root(self) -> Path:
        return self.data_dir / self.spec.key / "reference"

    def prepare(self) -> None:
        """Check that the files are there; nothing is parsed (that is load_data's, on the clock)."""
        if self.flavour.generated:
            # The manifest's header, every file's size, and the hash of every file changed since it was last
            # found intact (scenes.verify_mini): after the first run, a stat of each of the 8,502 files.
            problems = scenes.verify_mini(self.data_dir, trust_cache=True)
            if problems:
                raise DataError(f"{self.spec.key} mini data: {problems[0]}; {scenes.FIX}")
            return
        self.reference_paths(self.reference_root)
        # build_model (next, also untimed) loads it and says clearly when the file is missing.
        self._backbone = Path(self.recipe.backbone_checkpoint or self.reference_root / self.BACKBONE_FILE)
        if self.smoke and not self.recipe.backbone_checkpoint and not self._backbone.exists():
            self._backbone = None  # a smoke fixture has no pretrained backbone: random weights, as a dry run

    def load_data(self) -> None:
        """Parse and validate the annotation files (one DataError naming the file and annotation id) and
        check that every image file exists; images are decoded as training reads them."""
        if self.flavour.generated:
            paths, classes, keep_crowd, first = coco.mini_paths(self.data_dir), MINI_CLASSES, False, 1
            remove = True
        else:
            paths = self.reference_paths(self.reference_root)
            classes, keep_crowd = self.REFERENCE_CLASSES, self.REFERENCE_KEEP_CROWD
            first, remove = self.REFERENCE_FIRST_LABEL, self.REFERENCE_REMOVE_UNANNOTATED
        train_json, train_dir, val_json, val_dir = paths
        self.train_index = coco.load_coco(train_json, train_dir, need_masks=self.NEED_MASKS, first_label=first)
        self.val_index = coco.load_coco(val_json, val_dir, need_masks=self.NEED_MASKS, first_label=first)
        if self.train_index.category_to_label != self.val_index.category_to_label:
            raise DataError(f"{train_json} and {val_json} declare different categories; they must be the same")
        if classes is not None and self.train_index.num_classes != classes:
            raise DataError(
                f"{train_json} declares {self.train_index.num_classes} categories; the "
                f"{self.spec.key} model of this scale is built for {classes}"
            )
        self.train_set = coco.CocoDetection(
            self.train_index, train=True, seed=self.config.seed, keep_crowd=keep_crowd, remove_unannotated=remove
        )
        self.val_set = coco.CocoDetection(self.val_index, train=False)
        self._loaded = (len(self.train_set), len(self.val_set))

    @property
    def train_samples(self) -> int:
        return (self._loaded or self._known_sizes)[0]

    @property
    def eval_samples(self) -> int:
        return (self._loaded or self._known_sizes)[1]

    @property
    def _known_sizes(self) -> tuple[int, int]:
        """Sizes a run logs before its data is read (and a dry run, which reads none): the mini scenes', or the
        real data set's as its spec states them. A real run replaces them with what it loaded."""
        return MINI_SIZES if self.flavour.generated else (self.spec.train_samples, self.spec.eval_samples)

    def build_model(self) -> torch.nn.Module:
        if self.flavour.generated:
            return self.mini_model(MINI_CLASSES)
        model = self.reference_model()
        if self._backbone is not None:  # found by prepare(); a dry run trains the full size from random weights
            models.load_backbone_checkpoint(model, self._backbone)
        return model

    # --- data ----------------------------------------------------------------------------------------
    def synthetic_batch(self) -> tuple[list[torch.Tensor], list[dict[str, torch.Tensor]]]:
        """Random images of the real size with two boxes each (and their masks), for dry runs and tests."""
        g = seeds.torch_generator(self.config.seed, seeds.STREAM_DATA, self.dist.rank)
        if self.flavour.generated:
            h = w = models.MINI_IMAGE_SIZE
        else:
            h, w = self.REFERENCE_IMAGE
        images, targets = [], []
        for i in range(self.local_batch_size):
            images.append(torch.rand(3, h, w, generator=g))
            x0, y0 = int(torch.randint(0, w // 2, (1,), generator=g)), int(torch.randint(0, h // 2, (1,), generator=g))
            boxes = torch.tensor(
                [[x0, y0, x0 + w // 4, y0 + h // 3], [w // 2, h // 2, w - 1, h - 1]], dtype=torch.float32
            )
            target = {"boxes": boxes, "labels": torch.tensor([1, 1 + i % MINI_CLASSES]), "image_id": i}
            if self.NEED_MASKS:
                masks = torch.zeros(2, h, w, dtype=torch.uint8)
                for k, (a, b, c, d) in enumerate(boxes.long().tolist()):
                    masks[k, b:d, a:c] = 1
                target["masks"] = masks
            targets.append(target)
        return images, targets

    def _loader(self, dataset: Any, *, batch_size: int, sampler: Any = None, train: bool) -> DataLoader:
        workers = self.flavour.data_workers
        return DataLoader(
            dataset,
            batch_size=batch_size,
            sampler=sampler,
            num_workers=workers,
            collate_fn=coco.collate,
            drop_last=train,
            pin_memory=self.device.type == "cuda",
            persistent_workers=train and workers > 0,  # one training loader for the run: its workers persist
        )

    def train_batches(self) -> Iterator[Any]:
        if self._stream is None:
            self._stream = self._train_stream()
        return self._stream

    def _train_stream(self) -> Generator[Any, None, None]:
        # Every rank shuffles with the same stream (seed, STREAM_SHUFFLE) and takes its own share; the flips
        # come from (seed, STREAM_AUGMENT, epoch, sample) inside the dataset (coco.CocoDetection).
        sampler = DistributedSampler(
            self.train_set,
            num_replicas=self.dist.world_size,
            rank=self.dist.rank,
            shuffle=True,
            seed=seeds.derive(self.config.seed, seeds.STREAM_SHUFFLE) % 2**31,
            drop_last=True,
        )
        loader = self._loader(self.train_set, batch_size=self.local_batch_size, sampler=sampler, train=True)
        epoch = 0
        while True:
            sampler.set_epoch(epoch)
            self.train_set.set_epoch(epoch)  # before the loader's iterator starts the epoch's workers
            yield from loader
            epoch += 1

    # --- training and evaluation ------------------------------------------------------------------------
    def _to_device(self, batch: Any) -> tuple[list[torch.Tensor], list[dict[str, Any]]]:
        images, targets = batch
        images = [im.to(self.device, non_blocking=True) for im in images]
        targets = [
            {k: (v.to(self.device, non_blocking=True) if torch.is_tensor(v) else v) for k, v in t.items()}
            for t in targets
        ]
        return images, targets

    def loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        """The sum of the model's own losses (classification and box regression; RPN and masks for Mask R-CNN)."""
        images, targets = self._to_device(batch)
        losses = model(images, targets)
        return sum(losses.values())

    def evaluate(self, model: torch.nn.Module) -> Mapping[str, float]:
        """COCO mAP of every field over the whole validation set: each rank detects in its shard, once."""
        results = self.detections(model)
        return {name: coco.coco_map(self.val_index, results, iou_type) for name, iou_type in self.FIELDS.items()}

    @torch.no_grad()
    def detections(self, model: torch.nn.Module) -> list[dict[str, Any]]:
        """COCO result dicts of the whole validation set, gathered from every rank (what :meth:`evaluate`
        scores, and what ``benchmarks/metric_error.py`` resamples image by image)."""
        model.eval()
        shard = self.dist.shard(len(self.val_set))
        batch = self.flavour.eval_batch or self.local_batch_size
        results: list[dict[str, Any]] = []
        seen = 0
        for images, targets in self._loader(Subset(self.val_set, shard), batch_size=batch, train=False):
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
            seen += len(images)
        model.train()
        (total,) = self.dist.all_reduce([float(seen)])
        if total != len(self.val_set):
            raise RuntimeError(f"{self.spec.key}: evaluated {total:.0f} of {len(self.val_set)} images")
        return [r for part in self.dist.gather_objects(results) for r in part]

    @torch.no_grad()
    def dry_run_evaluate(self, model: torch.nn.Module) -> Mapping[str, float]:
        """The inference path on the synthetic images (post-processing, masks included); nothing is scored."""
        model.eval()
        images, _ = self._to_device(self.synthetic_batch())
        model(images)
        model.train()
        return {name: 0.0 for name in self.FIELDS}

    def close(self) -> None:
        """Stop the training stream: its loader's worker processes end with it."""
        if self._stream is not None:
            self._stream.close()
            self._stream = None
