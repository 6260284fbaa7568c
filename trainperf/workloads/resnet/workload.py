"""resnet's workload: data, model, optimizer, loss and top-1 evaluation (its facts are in ``__init__.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, DistributedSampler, Subset

from trainperf import seeds
from trainperf.contract.workload import Workload
from trainperf.errors import DataError, UsageError
from trainperf.workloads.common.schedules import adamw_one_cycle, poly_warmup
from trainperf.workloads.resnet import data, gpu_decode, mini_data
from trainperf.workloads.resnet.model import MiniResNet, reference_resnet50

MINI_EVAL_BATCH = 2000
REFERENCE_WORKERS = 8


@dataclass(frozen=True, kw_only=True)
class Flavour:
    """What a scale fixes beyond the recipe: the network and where its images come from."""

    model: Callable[[], torch.nn.Module]
    # True: the mini images, verified and held in memory as uint8 tensors, sliced into batches and normalized on
    # the fly; False: an ImageNet folder in the reference's layout, read by DataLoader workers.
    images_in_memory: bool
    mxnet_names: bool  # weights_initialization names the reference's (MXNet) tensors
    synthetic: tuple[tuple[int, int, int], int]  # a dry run's image shape and class count


FLAVOURS = {
    "reference": Flavour(
        model=reference_resnet50, images_in_memory=False, mxnet_names=True, synthetic=((3, 224, 224), 1000)
    ),
    "mini": Flavour(model=MiniResNet, images_in_memory=True, mxnet_names=False, synthetic=((1, 28, 28), 10)),
}


class ResNetWorkload(Workload):
    DRY_RUN_LOCAL_BATCH = 4  # a reference dry run at full model size on the CPU
    SWITCHES_NOT_APPLICABLE = {
        "channels_last": "resnet always trains in channels-last (model and input batches): it is its default layout"
    }
    _loaded: tuple[int, int] | None = None  # (train, eval) sizes once the data is read

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.flavour = FLAVOURS[self.spec.scale]

    def prepare(self) -> None:
        if self.flavour.images_in_memory:
            problems = mini_data.verify_mini(self.data_dir, trust_cache=True)  # sizes, and hashes of changed files
            if problems:
                raise DataError(f"resnet mini data: {problems[0]}; {mini_data.FIX}")
        else:
            data.check_imagenet_layout(self.data_dir / "resnet" / "reference")

    def load_data(self) -> None:
        if self.flavour.images_in_memory:
            self.xtr, self.ytr, self.xte, self.yte = mini_data.load_mini(self.data_dir)
            self._loaded = (len(self.ytr), len(self.yte))
        else:
            root = self.data_dir / "resnet" / "reference"
            classes = None if self.smoke else data.IMAGENET_CLASSES  # a smoke fixture holds a few classes
            self.train_set, self.val_set = data.imagenet_datasets(root, classes=classes)
            if self.device.type == "cuda":  # decoded and augmented on the GPU (gpu_decode.py), the same numbers' rule
                self.train_set = gpu_decode.imagenet_train_set(root)
            self._loaded = (len(self.train_set), len(self.val_set))

    @property
    def train_samples(self) -> int:
        return (self._loaded or (self.spec.train_samples, self.spec.eval_samples))[0]

    @property
    def eval_samples(self) -> int:
        return (self._loaded or (self.spec.train_samples, self.spec.eval_samples))[1]

    # --- model and optimizer ----------------------------------------------------------------------
    def build_model(self) -> torch.nn.Module:
        model = self.flavour.model()
        return model.to(memory_format=torch.channels_last)

    def reference_tensor_names(self, model: torch.nn.Module) -> list[str]:
        """Reference tensor names (MLPerf's MXNet names) for the ``weights_initialization`` events."""
        if not self.flavour.mxnet_names:
            return []
        return [mxnet_tensor_name(name) for name, _ in model.named_parameters()]

    def build_optimizer(self, model: torch.nn.Module) -> tuple[Any, Any]:
        r = self.recipe
        # No weight decay (and, for LARS, no layer-wise adaptation) on BN parameters and biases: the
        # reference's LARS skip list ('batch_normalization', 'bias', 'bn').
        decay = [p for p in model.parameters() if p.ndim > 1]
        no_decay = [p for p in model.parameters() if p.ndim <= 1]
        spe = self.steps_per_epoch
        if r.opt_name == "lars":
            from trainperf.workloads.resnet.lars import ReferenceLars

            groups = [
                {"params": decay, "weight_decay": r.lars_opt_weight_decay, "adapt": True},
                {"params": no_decay, "weight_decay": 0.0, "adapt": False},
            ]
            opt = ReferenceLars(
                groups,
                lr=r.lars_opt_base_learning_rate,
                momentum=r.lars_opt_momentum,
                trust_coefficient=r.lars_opt_trust_coefficient,
                eps=r.lars_epsilon,
            )
            warmup = round(r.lars_opt_learning_rate_warmup_epochs * spe)
            self.decay_steps = max(1, round(r.train_epochs * spe) - warmup + 1)  # the reference's, logged as it logs it
            factor = poly_warmup(
                base_lr=r.lars_opt_base_learning_rate,
                end_lr=r.lars_opt_end_learning_rate,
                warmup_steps=warmup,
                decay_steps=self.decay_steps,
                power=r.lars_opt_learning_rate_decay_poly_power,
            )
            return opt, torch.optim.lr_scheduler.LambdaLR(opt, factor)
        if r.opt_name != "adamw":
            raise UsageError(f"resnet mini: optimizer {r.opt_name!r} is not supported (use adamw)")
        groups = [{"params": decay, "weight_decay": r.opt_weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        return adamw_one_cycle(groups, r, spe)

    def hparams(self) -> dict[str, Any]:
        out = super().hparams()
        if self.recipe.opt_name == "lars":
            out["lars_opt_learning_rate_decay_steps"] = self.decay_steps
            out["label_smoothing"] = self.recipe.label_smoothing
        return out

    # --- data ---------------------------------------------------------------------------------------
    def synthetic_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        g = seeds.torch_generator(self.config.seed, seeds.STREAM_DATA, self.dist.rank)
        n, (shape, classes) = self.local_batch_size, self.flavour.synthetic
        if self.flavour.images_in_memory:  # uint8 images, normalized on the fly as the in-memory ones are
            x = torch.randint(0, 256, (n, *shape), dtype=torch.uint8, generator=g)
        else:
            x = torch.randn(n, *shape, generator=g)
        return x, torch.randint(0, classes, (n,), generator=g)

    def _sampler(self, size: int) -> DistributedSampler:
        return DistributedSampler(
            range(size),
            num_replicas=self.dist.world_size,
            rank=self.dist.rank,
            shuffle=True,
            seed=seeds.derive(self.config.seed, seeds.STREAM_SHUFFLE) % 2**31,
            drop_last=True,
        )

    def train_batches(self) -> Iterator[Any]:
        if self.flavour.images_in_memory:
            return self._mini_batches()
        return self._reference_batches()

    def _reference_batches(self) -> Iterator[Any]:
        sampler = self._sampler(len(self.train_set))
        loader = DataLoader(  # one loader for the whole run: its workers persist across epochs
            self.train_set,
            batch_size=self.local_batch_size,
            sampler=sampler,
            num_workers=REFERENCE_WORKERS,
            drop_last=True,
            pin_memory=self.device.type == "cuda",
            persistent_workers=True,
            collate_fn=gpu_decode.collate if self.device.type == "cuda" else data.collate_channels_last,
        )
        epoch = 0
        while True:
            sampler.set_epoch(epoch)
            yield from loader
            epoch += 1

    def _mini_batches(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        # DistributedSampler gives this rank's shuffled share of the indices; batches are sliced from the
        # in-memory tensors (a DataLoader over single items would spend more time collating than training).
        sampler = self._sampler(self.train_samples)
        n = self.local_batch_size
        per_epoch = len(sampler) // n
        epoch = 0
        while True:
            sampler.set_epoch(epoch)
            order = torch.tensor(list(sampler))
            g = seeds.torch_generator(self.config.seed, seeds.STREAM_AUGMENT, self.dist.rank, epoch)
            for i in range(per_epoch):
                idx = order[i * n : (i + 1) * n]
                x = self.xtr[idx]
                flip = torch.rand(len(idx), generator=g) < 0.5  # random horizontal flip
                x[flip] = x[flip].flip(3)
                yield x, self.ytr[idx]
            epoch += 1

    def _to_input(self, x: torch.Tensor | gpu_decode.EncodedBatch) -> torch.Tensor:
        if isinstance(x, gpu_decode.EncodedBatch):  # reference training on a GPU: JPEGs decoded there
            x = gpu_decode.decode_and_augment(x, self.device)
        elif x.dtype == torch.uint8:  # mini: normalize on the fly
            x = (x.float() / 255.0 - mini_data.MEAN) / mini_data.STD
        return x.to(self.device, non_blocking=True).contiguous(memory_format=torch.channels_last)

    def loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        x, y = batch
        logits = model(self._to_input(x))
        return F.cross_entropy(logits, y.to(self.device), label_smoothing=self.recipe.label_smoothing)

    # --- evaluation -----------------------------------------------------------------------------------
    def evaluate(self, model: torch.nn.Module) -> Mapping[str, float]:
        hits = self.top1_hits(model)
        correct, total = self.dist.all_reduce([float(hits.sum()), float(len(hits))])
        if total != self.eval_samples:
            raise RuntimeError(f"resnet: evaluated {total:.0f} of {self.eval_samples} images")
        return {"top1": correct / total}

    @torch.no_grad()
    def top1_hits(self, model: torch.nn.Module) -> torch.Tensor:
        """Whether the top-1 class is right, for each image of this rank's shard in order (bool, on the CPU):
        what :meth:`evaluate` averages, and what ``benchmarks/metric_error.py`` resamples."""
        model.eval()
        hits = [(model(self._to_input(x)).argmax(1) == y.to(self.device)).cpu() for x, y in self._eval_batches()]
        model.train()
        return torch.cat(hits) if hits else torch.zeros(0, dtype=torch.bool)

    def _eval_batches(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        shard = self.dist.shard(self.eval_samples)  # this rank's images, each evaluated exactly once
        if self.flavour.images_in_memory:
            for i in range(shard.start, shard.stop, MINI_EVAL_BATCH):
                j = slice(i, min(i + MINI_EVAL_BATCH, shard.stop))
                yield self.xte[j], self.yte[j]
            return
        yield from DataLoader(
            Subset(self.val_set, shard), batch_size=self.local_batch_size, num_workers=REFERENCE_WORKERS
        )


def mxnet_tensor_name(name: str) -> str:
    """torchvision ResNet-50 parameter name -> the MLPerf reference's tensor name.

    ``conv1.weight`` -> ``conv0_weight``; ``layer2.0.bn3.bias`` -> ``stage2_unit1_bn3_beta``;
    ``layer1.0.downsample.0.weight`` -> ``stage1_unit1_conv1sc_weight``; ``fc.bias`` -> ``fc1_bias``.
    """
    parts = name.split(".")
    kind = {"weight": "weight", "bias": "bias"}[parts[-1]]
    if parts[0] == "conv1":
        return "conv0_weight"
    if parts[0] == "bn1":
        return "bn0_gamma" if kind == "weight" else "bn0_beta"
    if parts[0] == "fc":
        return f"fc1_{kind}"
    stage, unit = int(parts[0].removeprefix("layer")), int(parts[1]) + 1
    prefix = f"stage{stage}_unit{unit}_"
    if parts[2] == "downsample":
        if parts[3] == "0":
            return prefix + "conv1sc_weight"
        return prefix + ("bnsc_gamma" if kind == "weight" else "bnsc_beta")
    layer = parts[2]
    if layer.startswith("conv"):
        return f"{prefix}{layer}_weight"
    return prefix + layer + ("_gamma" if kind == "weight" else "_beta")
