"""flux1's workload: the FLUX.1-schnell transformer (diffusers' ``FluxTransformer2DModel``, ``model.py``) trained with
the reference's rectified flow (``flow.py``) on its preprocessed encodings (``reference.py``) or, on the raw route,
on images and captions (``raw.py``) that the user's encoders (``encoders.py``) encode batch by batch, AdamW with a
linear warm-up then a constant rate, and the validation loss over 8 fixed timesteps (facts in ``__init__.py``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trainperf import seeds
from trainperf.contract.workload import Workload
from trainperf.errors import DataError
from trainperf.workloads.common.fsdp import copy_into, shard_units
from trainperf.workloads.flux1 import encoders, flow, glyphs, mini, pictures, raw, reference
from trainperf.workloads.flux1 import model as flux_model

EVAL_BATCH = 16  # the reference's eval.batch_size (job_config.py)
EVAL_NOISE = 8  # the key of the validation samples' noise streams: (seed, STREAM_DATA, EVAL_NOISE, sample)
T5_LEN, LATENT = 256, (16, 32, 32)  # a synthetic batch's shapes: the reference's (256 x 256 images)
Batch = dict[str, torch.Tensor]
PREPROCESSED, RAW = "preprocessed", "raw"  # the reference's two data routes (FluxRecipe.data_route)


@dataclass(frozen=True)
class ScaleFacts:
    """What differs between the scales, besides the network's size (``model.FLAVOURS``)."""

    files: Callable[[Path], reference.Files]  # the checked folders: the reference's data, or the mini's glyphs
    shift_scale: tuple[float, float]  # the autoencoder's: FLUX.1's, or the mini's exact pixel one (mini.py)
    eval_batch: int
    text_len: int  # a synthetic batch's caption tokens
    latent: tuple[int, int, int]  # a synthetic batch's latent
    draws: bool  # pictures of each evaluation (the reference's preprocessed route has no image decoder)
    routes: tuple[str, ...]  # the data routes it reads (FluxRecipe.data_route): the first where there is no choice


SCALES = {
    "reference": ScaleFacts(reference.find, (flow.AE_SHIFT, flow.AE_SCALE), EVAL_BATCH, T5_LEN, LATENT, False,
                            (PREPROCESSED, RAW)),
    # a CPU scores larger evaluation batches faster (the loss is each sample's own); 32 x 32 images
    "mini": ScaleFacts(mini.files, (mini.SHIFT, mini.SCALE), 128, glyphs.TEXT_TOKENS, (mini.LATENT_CHANNELS, 16, 16),
                       True, (PREPROCESSED,)),
}  # fmt: skip


def _bf16(bits: np.ndarray) -> torch.Tensor:
    """The reference's stored uint16 bits as a bf16 tensor (no copy)."""
    return torch.from_numpy(bits).view(torch.bfloat16)


class FluxWorkload(Workload):
    DRY_RUN_LOCAL_BATCH = 1

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.flavour = self.recipe.model_flavour
        if (self.dry_run or self.smoke) and self.device.type == "cpu" and self.flavour == "schnell":
            self.flavour = "debug"  # 11.9 B parameters do not fit a CPU's memory: the same code at a toy width
        self.args: flux_model.FluxArgs = flux_model.FLAVOURS[self.flavour]
        self.files: reference.Files | None = None
        self.raw_files: raw.Files | None = None
        self.encoders: encoders.Encoders | None = None  # the raw route's
        self.route = self.recipe.data_route  # resolved by prepare (a dry run reads no data and logs the choice)
        self.train: reference.Encodings | raw.Images | None = None
        self.valid: reference.Encodings | raw.Shards | None = None
        self.facts = SCALES[self.spec.scale]
        self.shift_scale, self.eval_batch = self.facts.shift_scale, self.facts.eval_batch
        a = self.args
        self.empty = (torch.zeros(self.facts.text_len, a.joint_attention_dim), torch.zeros(a.pooled_projection_dim))
        self.noise_gen: torch.Generator | None = None

    # --- files -----------------------------------------------------------------------------------------
    def _route(self) -> str:
        """The data route: the recipe's, or with ``auto`` the preprocessed encodings where they are, else the raw
        images where they are (the preprocessed route, the one the reference recommends, is named when neither is)."""
        choice, routes = self.recipe.data_route, self.facts.routes
        if choice not in (*routes, "auto"):
            raise DataError(f"flux1 {self.spec.scale}: its data is in the {' or '.join(routes)} layout, not "
                            f"data_route={choice} (leave data_route at auto)")  # fmt: skip
        if len(routes) == 1:
            return routes[0]
        if choice != "auto":
            return choice
        preprocessed = (reference.reference_dir(self.data_dir) / reference.TRAIN / reference.STATE).is_file()
        return RAW if not preprocessed and raw.present(self.data_dir) else PREPROCESSED

    def prepare(self) -> None:
        """Untimed: both save_to_disk folders found, their Arrow files mapped and their columns checked (no encoding
        decoded), the empty encodings read; on the raw route the encoders' configurations checked against the
        transformer's widths, the encoders loaded, the empty caption encoded."""
        self.route = self._route()
        if self.route == RAW:
            return self._prepare_raw()
        try:
            self.files = self.facts.files(self.data_dir)
        except DataError as e:
            if len(self.facts.routes) == 1 or self.recipe.data_route != "auto":
                raise
            raise DataError(f"{e}; or place the raw images, captions and encoders (README.md, 'Reference scale': "
                            f"{raw.TRAIN}/, {raw.VALIDATION}/, {raw.ENCODERS}/)") from None  # fmt: skip
        for folder, validation in ((self.files.train, False), (self.files.validation, True)):
            for path in reference.arrow_files(folder):
                reference.open_table(path, validation=validation)
        a = self.args
        t5, clip = reference.empty_encodings(
            self.files.empty, t5_dim=a.joint_attention_dim, clip_dim=a.pooled_projection_dim
        )
        self.empty = (torch.from_numpy(t5), torch.from_numpy(clip))

    def _prepare_raw(self) -> None:
        files = raw.find(self.data_dir)
        for path in reference.arrow_files(files.train):
            raw.open_images(path)
        found, a = encoders.folders(files.encoders), self.args
        channels = a.in_channels // (flow.PATCH * flow.PATCH)
        encoders.check(found, t5_dim=a.joint_attention_dim, clip_dim=a.pooled_projection_dim,
                       latent_channels=channels, image_size=raw.IMAGE_SIZE)  # fmt: skip
        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32  # the reference's: bf16 on a GPU
        self.encoders = encoders.Encoders(found, self.device, dtype)
        self.empty, self.raw_files = self.encoders.empty(), files

    def load_data(self) -> None:
        """Timed: both splits mapped and counted (the raw route's tar shards indexed), every validation timestep read
        and checked (0..7, each used); an encoding (or an image) is decoded and checked when its batch is read."""
        if self.raw_files is not None:
            self.train = raw.load_images(self.raw_files.train)
            self.valid = raw.load_shards(self.raw_files.validation)
        else:
            assert self.files is not None
            self.train = reference.load(self.files.train, validation=False)
            self.valid = reference.load(self.files.validation, validation=True)
        assert self.valid.timesteps is not None
        missing = sorted(set(range(flow.VALIDATION_TIMESTEPS)) - set(self.valid.timesteps.tolist()))
        if missing:
            raise DataError(f"{self.valid.folder}: no sample of timestep(s) {missing}; the loss averages all 8")

    @property
    def train_samples(self) -> int:
        return len(self.train) if self.train is not None else self.spec.train_samples

    @property
    def eval_samples(self) -> int:
        return len(self.valid) if self.valid is not None else self.spec.eval_samples

    # --- model -----------------------------------------------------------------------------------------
    def build_model(self) -> torch.nn.Module:
        """The transformer on the meta device (no memory: 11.9 B parameters are filled shard by shard in
        ``parallelize``), every block recomputed in the backward pass where the recipe asks (the reference's full
        activation checkpointing)."""
        with torch.device("meta"):
            model = flux_model.build(self.args)
        if self.recipe.activation_checkpointing:
            model.enable_gradient_checkpointing()
        return model

    def parallelize(self, model: torch.nn.Module) -> torch.nn.Module:
        """Several processes: FSDP2 of the input embeddings, each double- and single-stream block, then the whole
        model, as the reference's parallelize_flux.py shards them over data-parallel ranks (bf16 gathers, fp32
        reductions on a GPU). Then each rank allocates its shards and fills them with the reference's initialization,
        drawn from the run's seed, the same on every rank."""
        if self.dist.distributed:
            m: Any = model
            units = [m.x_embedder, m.time_text_embed, m.context_embedder, *m.transformer_blocks]
            shard_units(model, [*units, *m.single_transformer_blocks], self.device)
        model.to_empty(device=self.device)
        g = seeds.torch_generator(self.config.seed, seeds.STREAM_DATA, 0)
        for name, p in model.named_parameters():
            rule, fans = flux_model.init_rule(name, self.args)
            copy_into(p, flux_model.fill(p, rule, fans, g))
        return model

    def build_optimizer(self, model: torch.nn.Module) -> tuple[Any, Any]:
        """torchtitan's AdamW (one group: weight decay on every tensor) and its warm-up-stable schedule."""
        r = self.recipe
        opt = torch.optim.AdamW(
            model.parameters(),
            lr=r.opt_base_learning_rate,
            betas=(r.opt_adamw_beta_1, r.opt_adamw_beta_2),
            eps=r.opt_adamw_epsilon,
            weight_decay=r.opt_adamw_weight_decay,
        )
        return opt, torch.optim.lr_scheduler.LambdaLR(opt, lr_policy(r.opt_learning_rate_warmup_steps))

    def hparams(self) -> dict[str, Any]:
        r = self.recipe
        out = super().hparams()
        out.update(
            opt_gradient_clip_norm=r.clip_grad_norm,
            evaluation_frequency=int(self.spec.interval(r)),  # the reference: CEIL(262,144 / batch) x batch
            trainperf_model_flavour=self.flavour,  # "debug" where a CPU check ran the transformer at a toy width
            trainperf_classifier_free_guidance_prob=r.classifier_free_guidance_prob,
            trainperf_data_route=self.route,  # "raw": images and captions encoded batch by batch
        )
        return out

    # --- training ----------------------------------------------------------------------------------------
    def synthetic_batch(self) -> Batch:
        g = seeds.torch_generator(self.config.seed, seeds.STREAM_DATA, self.dist.rank)
        n, a = self.local_batch_size, self.args
        t5_len, latent = self.facts.text_len, self.facts.latent
        return {
            "t5": (0.1 * torch.randn(n, t5_len, a.joint_attention_dim, generator=g)).bfloat16(),
            "clip": torch.randn(n, a.pooled_projection_dim, generator=g).bfloat16(),
            "mean": torch.randn(n, *latent, generator=g).bfloat16(),
            "logvar": torch.full((n, *latent), -6.0).bfloat16(),
        }

    def _batch(self, split: Any, indices: np.ndarray) -> Batch:
        """The preprocessed route's encodings of ``indices`` (bf16), or the raw route's images (uint8) and token
        ids, which :meth:`_encoded` encodes on the device."""
        if self.encoders is not None:
            images, captions = raw.batch(split, indices)
            t5_ids, clip_ids = self.encoders.tokens(captions)
            out = {"image": torch.from_numpy(images), "t5_ids": t5_ids, "clip_ids": clip_ids}
            if split.timesteps is not None:
                out["timestep"] = torch.from_numpy(split.timesteps[np.asarray(indices, dtype=np.int64)])
            return out
        a = self.args
        got = reference.rows(
            split, indices, t5_dim=a.joint_attention_dim, clip_dim=a.pooled_projection_dim,
            latent_channels=a.in_channels // (flow.PATCH * flow.PATCH),
        )  # fmt: skip
        out = {k: _bf16(got[c]) for k, c in (("t5", "t5_encodings"), ("clip", "clip_encodings"))}
        out |= {k: _bf16(got[k]) for k in ("mean", "logvar")}
        if "timestep" in got:
            out["timestep"] = torch.from_numpy(got["timestep"])
        return out

    def train_batches(self) -> Iterator[Batch]:
        """Global batches in a seeded order, the same on every rank (each takes its slice), reshuffled each epoch;
        the last partial batch of an epoch is dropped."""
        assert self.train is not None
        gb, n = self.global_batch_size, self.local_batch_size
        mine = slice(self.dist.rank * n, (self.dist.rank + 1) * n)
        epoch = 0
        while True:
            order = seeds.numpy_rng(self.config.seed, seeds.STREAM_SHUFFLE, epoch).permutation(len(self.train))
            for b in range(0, len(order) // gb * gb, gb):
                yield self._batch(self.train, order[b : b + gb][mine])
            epoch += 1

    def _encoded(self, batch: Batch) -> Batch:
        """A batch as the transformer reads it: a raw batch encoded by the user's encoders (the reference's
        preprocess_data before each step), a preprocessed one as it is."""
        return self.encoders.encode(batch) if "image" in batch and self.encoders is not None else batch

    def _noise(self) -> torch.Generator:
        """This rank's stream of posterior draws, noise, timesteps and text dropout (the reference seeds each
        data-parallel rank apart so that ranks draw different noise)."""
        if self.noise_gen is None:
            seed = seeds.derive(self.config.seed, seeds.STREAM_AUGMENT, self.dist.rank)
            self.noise_gen = torch.Generator(device=self.device).manual_seed(seed)
        return self.noise_gen

    def loss(self, model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        """The reference's train_step: x_0 drawn from the posterior, t ~ U[0, 1), x_t = (1 - t) x_0 + t noise, the
        text of a sample dropped with probability ``classifier_free_guidance_prob``, MSE against noise - x_0."""
        b = {k: v.to(self.device, non_blocking=True).float() for k, v in self._encoded(batch).items()}
        g, shape = self._noise(), b["mean"].shape
        x0 = flow.latent(b["mean"], b["logvar"], torch.randn(shape, generator=g, device=self.device), *self.shift_scale)
        noise = torch.randn(shape, generator=g, device=self.device)
        t = torch.rand(shape[0], generator=g, device=self.device)
        drop = torch.rand(shape[0], generator=g, device=self.device) < self.recipe.classifier_free_guidance_prob
        t5 = torch.where(drop[:, None, None], self.empty[0].to(self.device), b["t5"])
        clip = torch.where(drop[:, None], self.empty[1].to(self.device), b["clip"])
        pred = flow.predict(model, flow.noised(x0, noise, t), t, t5, clip)
        return flow.sample_losses(pred, flow.velocity(x0, noise)).mean()

    # --- evaluation ------------------------------------------------------------------------------------
    def _eval_draws(self, indices: np.ndarray, shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        """(posterior eps, noise) of each validation sample, from its own stream: the value does not depend on
        which rank scores the sample, and every evaluation of a run sees the same draws."""
        eps, noise = [], []
        for i in indices:
            g = seeds.torch_generator(self.config.seed, seeds.STREAM_DATA, EVAL_NOISE, int(i))
            eps.append(torch.randn(shape, generator=g))
            noise.append(torch.randn(shape, generator=g))
        return torch.stack(eps).to(self.device), torch.stack(noise).to(self.device)

    @torch.no_grad()
    def timestep_losses(self, model: torch.nn.Module, batch: Batch, indices: np.ndarray) -> torch.Tensor:
        """Each validation sample's loss at its own timestep k / 8 (the reference's eval_step)."""
        batch = self._encoded(batch)
        b = {k: v.to(self.device).float() for k, v in batch.items() if k != "timestep"}
        eps, noise = self._eval_draws(indices, tuple(b["mean"].shape[1:]))
        x0 = flow.latent(b["mean"], b["logvar"], eps, *self.shift_scale)
        t = batch["timestep"].to(self.device).float() / flow.VALIDATION_TIMESTEPS
        pred = flow.predict(model, flow.noised(x0, noise, t), t, b["t5"], b["clip"])
        return flow.sample_losses(pred, flow.velocity(x0, noise))

    @torch.no_grad()
    def sample_losses(self, model: torch.nn.Module) -> tuple[np.ndarray, np.ndarray]:
        """This rank's validation samples' losses, each at its own timestep, and their timestep indices (its shard,
        scored once)."""
        assert self.valid is not None
        model.eval()
        losses, steps = [np.zeros(0)], [np.zeros(0, dtype=np.int64)]
        shard = self.dist.shard(len(self.valid))
        # Every rank takes as many forward passes as the largest shard needs: FSDP gathers each block's shards from
        # all ranks, so a rank with one sample fewer scores sample 0 once more and drops it.
        passes = math.ceil(self.dist.longest_shard(len(self.valid)) / self.eval_batch)
        for n in range(passes):
            start = shard.start + n * self.eval_batch
            idx = np.arange(start, min(start + self.eval_batch, shard.stop))
            if not len(idx):
                self.timestep_losses(model, self._batch(self.valid, np.array([0])), np.array([0]))
                continue
            batch = self._batch(self.valid, idx)
            losses.append(self.timestep_losses(model, batch, idx).double().cpu().numpy())
            steps.append(batch["timestep"].numpy())
        model.train()
        return np.concatenate(losses), np.concatenate(steps)

    @torch.no_grad()
    def evaluate(self, model: torch.nn.Module) -> Mapping[str, float]:
        """The validation loss: each rank scores its shard once, losses summed per timestep over all ranks, then the
        mean over the 8 timesteps of each one's mean (the reference README's algorithm); each timestep's mean is
        logged beside it."""
        assert self.valid is not None
        k = flow.VALIDATION_TIMESTEPS
        losses, steps = self.sample_losses(model)
        sums, counts = np.bincount(steps, losses, minlength=k), np.bincount(steps, minlength=k).astype(np.float64)
        total = torch.tensor(self.dist.all_reduce([*sums.tolist(), *counts.tolist()]), dtype=torch.float64)
        sums, counts = total[:k], total[k:]
        if counts.sum() != len(self.valid):
            raise RuntimeError(f"flux1: evaluated {counts.sum():.0f} of {len(self.valid)} validation samples")
        per_step = {f"eval_loss_t{j}": float(sums[j] / counts[j]) for j in range(k) if counts[j]}
        return {"eval_loss": flow.validation_loss(sums, counts), **per_step}

    @torch.no_grad()
    def dry_run_evaluate(self, model: torch.nn.Module) -> Mapping[str, float]:
        """A dry run's evaluation: the synthetic batch scored at timesteps 0/8 .. 7/8 in turn, the loss of a model
        that has learnt nothing (about 1 + the latents' variance), never a value that meets the target as 0 would."""
        model.eval()
        batch = self.synthetic_batch()
        idx = np.arange(len(batch["mean"]))
        batch["timestep"] = torch.from_numpy(idx % flow.VALIDATION_TIMESTEPS)
        loss = float(self.timestep_losses(model, batch, idx).mean())
        model.train()
        return {"eval_loss": loss}

    # --- pictures --------------------------------------------------------------------------------------
    def snapshot(self, model: torch.nn.Module) -> Any | None:
        """The mini's weights at an evaluation (7 MB), for the grid drawn after the run; the reference draws none."""
        return pictures.weights(model) if self.facts.draws and not self.smoke else None

    def pictures(self, snapshots: list[tuple[float, Any]]) -> bytes | None:
        """The mini's images of fixed captions at each evaluation (pictures.py), drawn after ``run_stop``."""
        assert self.files is not None
        encoder = glyphs.TextEncoder.load(self.files.train.parent / mini.ENCODER)
        return pictures.grid(self.args, snapshots, encoder, self.config.seed)


def lr_policy(warmup: int):
    """torchtitan's linear_warmup_stable_decay with decay_ratio 0 as a LambdaLR factor: ``(step + 1) / warmup`` for
    the first ``warmup`` steps, then 1."""

    def factor(step: int) -> float:
        return (step + 1) / warmup if step < warmup else 1.0

    return factor
