"""unet3d's workload: KiTS19 cases, the 3D U-Net, Dice-CE loss, sliding-window mean Dice (facts in ``__init__.py``)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from trainperf import seeds
from trainperf.contract.workload import Workload
from trainperf.errors import DataError, UsageError
from trainperf.workloads.unet3d import data, generator
from trainperf.workloads.unet3d.evaluation import dice_scores, sliding_window
from trainperf.workloads.unet3d.model import UNet3D, reference_tensor_names
from trainperf.workloads.unet3d.sampling import TrainSampler

# A reference dry or smoke run on a CPU trains and evaluates 64^3 patches of the full-size model (a 128^3
# step takes about 30 s and 5.5 GB on two cores); the shapes it used are the ones it logs.
CPU_CHECK_PATCH = (64, 64, 64)


@dataclass(frozen=True, kw_only=True)
class Flavour:
    """What a scale fixes beyond the recipe: the network's filters, the preprocessing and the cases."""

    filters: tuple[int, ...]
    preprocessing: data.Preprocessing
    eval_padding: float  # the value the sliding-window evaluation pads a volume with
    generated: bool  # the mini generator's cases, verified against their checksums before they are read
    case_ids: tuple[str, ...] | None  # the cases a run reads (a smoke run reads its fixture's); None: every case
    eval_case_ids: frozenset[str]  # the evaluation cases; the others train
    cpu_check_patch: tuple[int, int, int] | None  # the patch of a dry or smoke run on a CPU; None: the recipe's
    reference_names: bool  # weights_initialization names the reference's tensors


FLAVOURS = {
    "reference": Flavour(
        filters=(32, 64, 128, 256, 320),
        preprocessing=data.Preprocessing(min_shape=(128, 128, 128)),
        eval_padding=-2.2,  # the reference's constant: runtime/inference.py, evaluate(): padding_val=-2.2
        generated=False,
        case_ids=tuple(f"{i:05d}" for i in range(data.REFERENCE_MAX_CASE)),
        eval_case_ids=data.REFERENCE_EVAL_CASES,
        cpu_check_patch=CPU_CHECK_PATCH,
        reference_names=True,
    ),
    "mini": Flavour(
        filters=(8, 16, 32, 64),
        preprocessing=data.Preprocessing(min_shape=(32, 32, 32)),
        # the normalized clip floor, (-79 - 101) / 76.9 = -2.34, with which the mini target was calibrated
        eval_padding=data.Preprocessing().padding_value,
        generated=True,
        case_ids=None,
        eval_case_ids=generator.eval_case_ids(),
        cpu_check_patch=None,
        reference_names=False,
    ),
}


class UNet3DWorkload(Workload):
    DRY_RUN_LOCAL_BATCH = 1
    _loaded: tuple[int, int] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.flavour = FLAVOURS[self.spec.scale]
        r = self.recipe
        self.train_patch = tuple(r.training_input_shape)
        self.val_patch = tuple(r.validation_input_shape)
        check = self.flavour.cpu_check_patch
        if check is not None and (self.dry_run or self.smoke) and self.device.type == "cpu":
            self.train_patch = self.val_patch = check
        divisor = 2 ** len(self.flavour.filters)
        for name, shape in (("training_input_shape", self.train_patch), ("validation_input_shape", self.val_patch)):
            if len(shape) != 3 or any(s <= 0 or s % divisor for s in shape):
                raise UsageError(f"unet3d: {name} {list(shape)} must be 3 sizes, each a multiple of {divisor}")
        self.preprocessing = data.Preprocessing(
            **{**self.flavour.preprocessing.__dict__, "min_shape": self.train_patch}
        )

    # --- data -----------------------------------------------------------------------------------------
    def _root(self):
        return self.data_dir / "unet3d" / self.spec.scale

    def prepare(self) -> None:
        if self.flavour.generated:
            problems = generator.verify_mini(self.data_dir, trust_cache=True)
            if problems:
                raise DataError(f"unet3d mini data: {problems[0]}; {generator.FIX}")
        wanted = None if self.smoke or self.flavour.case_ids is None else list(self.flavour.case_ids)
        self.npy_dir, ids = data.prepare_cases(self._root(), self.preprocessing, case_ids=wanted)
        eval_ids = self.flavour.eval_case_ids
        self.train_ids = [i for i in ids if i not in eval_ids]
        self.eval_ids = [i for i in ids if i in eval_ids]
        if not self.train_ids or not self.eval_ids:
            raise DataError(
                f"unet3d: {self._root()} holds {len(self.train_ids)} training and {len(self.eval_ids)} evaluation "
                "cases; both are needed (evaluation cases are the reference's evaluation_cases.txt list)"
            )
        if self.global_batch_size > len(self.train_ids):  # an epoch drops its last partial batch: none would be left
            raise UsageError(
                f"unet3d: global_batch_size {self.global_batch_size} is more than the {len(self.train_ids)} training "
                "cases, and an epoch drops its last partial batch (as the reference's DataLoader(drop_last=True) "
                f"does), so no batch would be trained; --set global_batch_size to at most {len(self.train_ids)}"
            )
        # The evaluation's library, imported before the clock as the reference imports everything at start:
        # MONAI (and what it imports) cost about 6 s of the first evaluation of a mini run (README, Profile).
        importlib.import_module("monai.inferers")

    def load_data(self) -> None:
        self.train_cases = data.load_cases(self.npy_dir, self.train_ids)
        shard = self.dist.shard(len(self.eval_ids))
        self.eval_cases = data.load_cases(self.npy_dir, [self.eval_ids[i] for i in shard])
        self._loaded = (len(self.train_ids), len(self.eval_ids))

    @property
    def train_samples(self) -> int:
        return (self._loaded or (self.spec.train_samples, self.spec.eval_samples))[0]

    @property
    def eval_samples(self) -> int:
        return (self._loaded or (self.spec.train_samples, self.spec.eval_samples))[1]

    # --- model and optimizer --------------------------------------------------------------------------
    def build_model(self) -> torch.nn.Module:
        return UNet3D(1, data.NUM_CLASSES, self.flavour.filters)

    def reference_tensor_names(self, model: torch.nn.Module) -> list[str]:
        return reference_tensor_names(model) if self.flavour.reference_names else []

    def build_optimizer(self, model: torch.nn.Module) -> tuple[Any, Any]:
        r = self.recipe
        if r.opt_name == "sgd":
            opt = torch.optim.SGD(
                model.parameters(),
                lr=r.opt_base_learning_rate,
                momentum=r.opt_momentum,
                # the reference's SGD(nesterov=True), runtime/training.py:16; torch refuses Nesterov at momentum 0,
                # which the v2.0 rules allow ("unconstrained"): there Nesterov's update is plain SGD's
                nesterov=r.opt_momentum > 0,
                weight_decay=r.opt_weight_decay,
            )
        elif r.opt_name == "adam":
            opt = torch.optim.Adam(model.parameters(), lr=r.opt_base_learning_rate, weight_decay=r.opt_weight_decay)
        else:
            raise UsageError(f"unet3d: optimizer {r.opt_name!r} is not supported (sgd or adam, as the reference's)")
        return opt, torch.optim.lr_scheduler.LambdaLR(opt, self._lr_factor)

    def _lr_factor(self, step: int) -> float:
        """The reference's schedule for the 0-based step: during epoch e (1-based) of the warm-up the rate is
        ``init + (base - init) * e / warmup``, then ``base`` times ``decay_factor`` per boundary epoch passed.

        runtime/training.py sets the warm-up rate at the start of each warm-up epoch, over what its MultiStepLR
        made of it, so a boundary before the last warm-up epoch has no effect there or after it: the decays that
        count are those at boundaries b >= warmup, from epoch b + 1 (the scheduler steps after each epoch)."""
        r = self.recipe
        epoch = step // self.steps_per_epoch + 1
        warmup = r.opt_learning_rate_warmup_epochs
        if warmup > 0 and epoch <= warmup:
            return (
                r.opt_initial_learning_rate
                + (r.opt_base_learning_rate - r.opt_initial_learning_rate) * (epoch / warmup)
            ) / r.opt_base_learning_rate
        passed = sum(b < epoch for b in r.opt_learning_rate_decay_boundary_epochs if b >= warmup)
        return r.opt_learning_rate_decay_factor**passed

    def hparams(self) -> dict[str, Any]:
        out = super().hparams()
        out["training_input_shape"] = list(self.train_patch)
        out["validation_input_shape"] = list(self.val_patch)
        out["opt_learning_rate_decay_boundary_epochs"] = list(self.recipe.opt_learning_rate_decay_boundary_epochs)
        return {k: out[k] for k in self.spec.hparam_keys if k in out}

    # --- training -------------------------------------------------------------------------------------
    def synthetic_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        g = seeds.torch_generator(self.config.seed, seeds.STREAM_DATA, self.dist.rank)
        n = self.local_batch_size
        x = torch.randn(n, 1, *self.train_patch, generator=g)
        return x, torch.randint(0, data.NUM_CLASSES, (n, 1, *self.train_patch), generator=g, dtype=torch.uint8)

    def train_batches(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        sampler = TrainSampler(self.train_cases, self.train_patch, self.recipe.oversampling, self.config.seed)
        n, rank, world = self.local_batch_size, self.dist.rank, self.dist.world_size
        per_epoch = self.steps_per_epoch * self.recipe.gradient_accumulation_steps
        epoch = 0
        while True:
            # every rank draws the same permutation and takes its slice of each global batch
            order = seeds.numpy_rng(self.config.seed, seeds.STREAM_SHUFFLE, epoch).permutation(len(self.train_cases))
            for b in range(per_epoch):
                picks = order[(b * world + rank) * n : (b * world + rank + 1) * n]
                if len(picks) < n:  # the last partial batch is dropped, as the reference's loader does
                    break
                items = [sampler.sample(int(i), epoch, rank) for i in picks]
                yield (
                    torch.from_numpy(np.stack([x for x, _ in items])),
                    torch.from_numpy(np.stack([y for _, y in items])),
                )
            epoch += 1

    def loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        x, y = batch
        logits = model(x.to(self.device, non_blocking=True))
        return dice_ce_loss(logits, y.to(self.device, non_blocking=True))

    # --- evaluation -----------------------------------------------------------------------------------
    @torch.no_grad()
    def case_scores(self, model: torch.nn.Module) -> torch.Tensor:
        """Dice of kidney and tumour for each evaluation case of this rank's shard (cases x 2, on the CPU):
        what :meth:`evaluate` averages, and what ``benchmarks/metric_error.py`` resamples."""
        model.eval()
        rows = []
        for case in self.eval_cases:
            image = torch.from_numpy(case.image)[None].to(self.device)
            label = torch.from_numpy(case.label)[None].to(self.device)
            logits, label = sliding_window(
                model,
                image,
                label,
                self.val_patch,
                overlap=self.recipe.validation_overlap,
                padding_value=self.flavour.eval_padding,
            )
            rows.append(dice_scores(logits, label)[0].cpu())
        model.train()
        return torch.stack(rows) if rows else torch.zeros(0, 2)

    def evaluate(self, model: torch.nn.Module) -> Mapping[str, float]:
        scores = self.case_scores(model).double()
        kidney, tumour, count = self.dist.all_reduce(
            [float(scores[:, 0].sum()), float(scores[:, 1].sum()), float(len(scores))]
        )
        if count != self.eval_samples:
            raise RuntimeError(f"unet3d: evaluated {count:.0f} of {self.eval_samples} cases")
        kidney, tumour = kidney / count, tumour / count
        return {"mean_dice": (kidney + tumour) / 2, "dice_kidney": kidney, "dice_tumour": tumour}


def dice_ce_loss(logits: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
    """The reference's DiceCELoss: (mean over batch and foreground classes of 1 - soft Dice, plus cross-entropy) / 2.

    Soft Dice of each case and class on the softmax, background excluded, with the reference's smoothing
    of 1e-6 in numerator and denominator.
    """
    target = label[:, 0].long()
    ce = F.cross_entropy(logits, target)
    prob = torch.softmax(logits, dim=1)[:, 1:]
    onehot = F.one_hot(target, data.NUM_CLASSES).permute(0, 4, 1, 2, 3)[:, 1:].to(prob.dtype)
    axes = tuple(range(2, logits.ndim))
    dice = (2 * (prob * onehot).sum(axes) + 1e-6) / (prob.sum(axes) + onehot.sum(axes) + 1e-6)
    return ((1.0 - dice).mean() + ce) / 2
