"""llama2_70b_lora's workload: the shared decoder at Llama 2 70B's size, its base weights read from the reference's
safetensors checkpoint and frozen, LoRA adapters from ``peft`` on the fused qkv and output projections, GovReport
sequences one per micro-batch slot, AdamW with the reference's cosine, evaluation loss (facts in ``__init__.py``)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import torch

from trainperf import seeds
from trainperf.contract.workload import TorchState, Workload
from trainperf.errors import DataError
from trainperf.workloads.common.fsdp import copy_into, shard_units
from trainperf.workloads.common.llm.model import Decoder
from trainperf.workloads.llama2_70b_lora import base, checkpoint, reference
from trainperf.workloads.llama2_70b_lora.loss import causal_lm_loss, collate
from trainperf.workloads.llama2_70b_lora.model import FLAVOURS, LORA_TARGETS, Dropout
from trainperf.workloads.llama2_70b_lora.reference import IGNORE

CPU_CHECK_SEQ_LEN = 256  # a reference dry or smoke run on a CPU: sequences of at most 256 tokens, not 8,192
# Where a scale's files are: the mini's that `trainperf data prepare` makes (their manifests checked), or the
# reference's GovReport parquet files and checkpoint folder.
FIND_FILES = {"mini": base.files, "reference": reference.find}


class LoraWorkload(Workload):
    DRY_RUN_LOCAL_BATCH = 1
    TORCH_STATE = TorchState(flush_denormal=True)  # small decoders step faster on CPUs with denormals flushed

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.flavour = self.recipe.model_flavour
        checking = self.dry_run or self.smoke
        if checking and self.device.type == "cpu" and self.flavour == "70B":
            self.flavour = "debug"  # a 70B model does not fit a CPU's memory: the same code at a toy width
        self.seq_len = self.recipe.max_sequence_length
        if checking and self.device.type == "cpu":
            self.seq_len = min(self.seq_len, CPU_CHECK_SEQ_LEN)
        self.args = dataclasses.replace(
            FLAVOURS[self.flavour],
            max_seq_len=max(self.seq_len, FLAVOURS[self.flavour].max_seq_len),
            checkpoint_activations=self.recipe.activation_checkpointing,
        )
        self.files: reference.Files | None = None
        self.ckpt: checkpoint.Checkpoint | None = None
        self.train: reference.Sequences | None = None
        self.valid: reference.Sequences | None = None
        # On a GPU the frozen base matrices stay in bf16, the checkpoint's own dtype (as the reference loads them);
        # the LoRA tensors the optimizer updates, and the norms, are fp32.
        self.base_dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32

    # --- files -----------------------------------------------------------------------------------------
    def prepare(self) -> None:
        """Untimed: the parquet files' footers and the checkpoint's headers checked (every tensor's name and shape
        against the model's); no sequence and no weight is read. The mini's files are first checked against their
        manifests (the base checkpoint's SHA-256 among them)."""
        self.files = FIND_FILES[self.spec.scale](self.data_dir)
        self.ckpt = checkpoint.check(self.files.checkpoint, self.args)
        for path in (self.files.train, self.files.validation):
            if reference.count_rows(path) == 0:
                raise DataError(f"{path}: no rows; copy the reference's GovReport files again")

    def load_data(self) -> None:
        """Timed: both splits read and every sequence checked (vocabulary, labels, length)."""
        assert self.files is not None
        read = dict(vocab_size=self.args.vocab_size, max_len=self.seq_len)
        self.train = reference.read(self.files.train, **read)
        self.valid = reference.read(self.files.validation, **read)

    @property
    def train_samples(self) -> int:
        return len(self.train) if self.train is not None else self.spec.train_samples

    @property
    def eval_samples(self) -> int:
        return len(self.valid) if self.valid is not None else self.spec.eval_samples

    # --- model -----------------------------------------------------------------------------------------
    def build_model(self) -> torch.nn.Module:
        """The decoder on the meta device (no memory: a 70B model is built shard by shard in ``parallelize``) with
        peft's LoRA layers in its qkv and output projections; everything but the adapters frozen."""
        import peft

        with torch.device("meta"):
            model = Decoder(self.args)
        config = peft.LoraConfig(
            r=self.recipe.lora_rank,
            lora_alpha=self.recipe.lora_alpha,
            lora_dropout=self.recipe.lora_dropout,
            target_modules=LORA_TARGETS,
            bias="none",
        )
        model = peft.inject_adapter_in_model(config, model)
        for module in model.modules():
            if isinstance(module, peft.tuners.lora.LoraLayer):
                for adapter, dropout in module.lora_dropout.items():
                    if isinstance(dropout, torch.nn.Dropout):
                        module.lora_dropout[adapter] = Dropout(dropout.p)
        for p in model.parameters():
            if not p.requires_grad and p.ndim > 1:
                p.data = p.data.to(self.base_dtype)
        return model

    def parallelize(self, model: torch.nn.Module) -> torch.nn.Module:
        """Several processes: FSDP2 (``fully_shard``) of each block, then the whole model: parameters, gradients and
        optimizer state sharded over the data-parallel ranks, which is what the reference's DeepSpeed ZeRO-3 does
        (configs/default_config.yaml); on a GPU the shards are gathered in bf16 and gradients reduced in fp32. Then
        each rank allocates its shards and reads them: base weights from the checkpoint (a dry run: random), the
        adapters as peft initializes them (A: Kaiming-uniform, B: zeros), the same on every rank."""
        if self.dist.distributed:
            shard_units(model, model.layers, self.device)  # type: ignore[arg-type]
        model.to_empty(device=self.device)
        model.reset_rope()  # type: ignore[operator]
        self._fill(model)
        return model

    @torch.no_grad()
    def _fill(self, model: torch.nn.Module) -> None:
        g = torch.Generator().manual_seed(self.config.seed)
        for name, p in model.named_parameters():
            if "lora_A" in name:
                full = torch.empty(p.shape)
                torch.nn.init.kaiming_uniform_(full, a=math.sqrt(5), generator=g)  # peft's init_lora_weights=True
            elif "lora_B" in name:
                full = torch.zeros(p.shape)
            elif self.ckpt is not None:
                full = checkpoint.full_tensor(self.ckpt, name)
            elif p.ndim == 1:
                full = torch.ones(p.shape)  # a dry run reads no checkpoint: norms at 1, matrices N(0, 0.02)
            else:
                full = torch.empty(p.shape).normal_(0.0, self.args.init_std, generator=g)
            copy_into(p, full)

    def build_optimizer(self, model: torch.nn.Module) -> tuple[Any, Any]:
        """AdamW over the adapters alone (every one decayed, as transformers' Trainer decays all but biases and
        norms), with the reference's schedule."""
        r = self.recipe
        trained = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(
            trained,
            lr=r.opt_base_learning_rate,
            betas=(r.opt_adamw_beta_1, r.opt_adamw_beta_2),
            eps=r.opt_adamw_epsilon,
            weight_decay=r.opt_adamw_weight_decay,
        )
        return opt, torch.optim.lr_scheduler.LambdaLR(opt, lr_policy(r))

    def hparams(self) -> dict[str, Any]:
        out = super().hparams()
        out.update(
            opt_gradient_clip_norm=self.recipe.clip_grad_norm,
            trainperf_model_flavour=self.flavour,  # "debug" where a CPU check ran the 70B's code at a toy width
            trainperf_sequence_length=self.seq_len,  # the most tokens a sequence may hold in this run
        )
        return out

    # --- training data ---------------------------------------------------------------------------------
    def synthetic_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        g = seeds.torch_generator(self.config.seed, seeds.STREAM_DATA, self.dist.rank)
        ids = torch.randint(3, self.args.vocab_size, (self.local_batch_size, self.seq_len), generator=g)
        labels = ids.clone()
        labels[:, : self.seq_len // 2] = IGNORE  # the prompt's half takes no loss, as the reference's labels
        return ids, labels

    def train_batches(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Global batches in a seeded order, the same on every rank (each takes its slice); each epoch reshuffled,
        as transformers' Trainer samples (its last partial batch of an epoch is dropped here)."""
        assert self.train is not None
        gb, n = self.global_batch_size, self.local_batch_size
        mine = slice(self.dist.rank * n, (self.dist.rank + 1) * n)
        epoch = 0
        while True:
            order = seeds.numpy_rng(self.config.seed, seeds.STREAM_SHUFFLE, epoch).permutation(len(self.train))
            for b in range(0, len(order) // gb * gb, gb):
                yield collate(self.train, order[b : b + gb][mine])
            epoch += 1

    def loss(self, model: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        ids, labels = (t.to(self.device, non_blocking=True) for t in batch)
        return causal_lm_loss(model, ids, labels)

    # --- evaluation ------------------------------------------------------------------------------------
    @torch.no_grad()
    def evaluate(self, model: torch.nn.Module) -> Mapping[str, float]:
        """Evaluation loss: each validation sequence's loss (one per batch of 1, as the reference's
        per_device_eval_batch_size 1 gives), averaged over all sequences; each rank scores its shard once."""
        assert self.valid is not None
        losses = self.summary_losses(model)
        summed, count = self.dist.all_reduce([float(sum(losses.tolist())), float(len(losses))])
        if count != len(self.valid):
            raise RuntimeError(f"llama2_70b_lora: evaluated {count:.0f} of {len(self.valid)} sequences")
        return {"eval_loss": summed / count}

    @torch.no_grad()
    def summary_losses(self, model: torch.nn.Module) -> np.ndarray:
        """Each validation sequence's loss (the mean over its scored tokens) in this rank's shard, in order: what
        :meth:`evaluate` averages, and what ``benchmarks/metric_error.py`` resamples."""
        assert self.valid is not None
        model.eval()
        shard = self.dist.shard(len(self.valid))
        losses = []
        # FSDP: each forward gathers the parameters on every rank, so every rank runs as many (173 sequences do not
        # divide over 8 ranks); a rank whose shard is shorter scores the first sequence again and drops the loss.
        for k in range(self.dist.longest_shard(len(self.valid))):
            loss = float(self.loss(model, collate(self.valid, np.array([shard.start + k if k < len(shard) else 0]))))
            if k < len(shard):
                losses.append(loss)
        model.train()
        return np.array(losses)

    @torch.no_grad()
    def dry_run_evaluate(self, model: torch.nn.Module) -> Mapping[str, float]:
        """A dry run's evaluation: the loss of one synthetic batch (about the log of the vocabulary's size for the
        random base a dry run builds), never a value that meets the target as a 0 would."""
        model.eval()
        loss = float(self.loss(model, self.synthetic_batch()))
        model.train()
        return {"eval_loss": loss}


def lr_policy(r: Any):
    """transformers' cosine schedule (get_cosine_schedule_with_warmup) as a LambdaLR factor: ``step / warmup`` over
    ``ceil(warmup_factor x training_steps)`` steps, then ``0.5 (1 + cos(pi x progress))`` to 0 at
    ``opt_learning_rate_training_steps``, flat at 0 after."""
    total = r.opt_learning_rate_training_steps
    warmup = math.ceil(r.opt_learning_rate_warmup_factor * total)

    def factor(step: int) -> float:
        if step < warmup:
            return step / max(1, warmup)
        done = min(1.0, (step - warmup) / max(1, total - warmup))
        return 0.5 * (1.0 + math.cos(math.pi * done))

    return factor
