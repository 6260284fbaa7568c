"""llama31_8b's workload: packed sequences from Megatron indexed files, the shared decoder, AdamW with the reference's
cosine schedule, validation log-perplexity (facts in ``__init__.py``)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from trainperf import seeds
from trainperf.contract.workload import TorchState, Workload
from trainperf.errors import DataError
from trainperf.workloads.common.llm import indexed, tokenizer
from trainperf.workloads.common.llm.model import (
    LLAMA31_8B,
    Decoder,
    DecoderArgs,
    reference_tensor_names,
    token_cross_entropy,
)
from trainperf.workloads.common.llm.packing import PackedSequences
from trainperf.workloads.llama31_8b import DECAY_SCHEDULE, mini, reference

# The network's sizes, named by the recipe's model_flavour: one decoder, three widths.
FLAVOURS: dict[str, DecoderArgs] = {
    "8B": LLAMA31_8B,
    # The mini decoder (README.md): Llama 3.1's shape (grouped-query attention, SwiGLU, RMSNorm, RoPE) at a width a
    # two-core CPU trains in a minute or two; no long-context frequency adjustment at 128 tokens.
    "mini": DecoderArgs(
        dim=192, n_layers=4, n_heads=6, n_kv_heads=2, ffn_dim=512, vocab_size=mini.VOCAB_SIZE, max_seq_len=128
    ),
    # A toy width for a reference dry or smoke run on a CPU (torchtitan's "debugmodel" idea): the 8B's code and
    # data path, at a size a CPU steps through in seconds. Its vocabulary is the tokenizer's (or the 8B's).
    "debug": DecoderArgs(
        dim=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=128, vocab_size=LLAMA31_8B.vocab_size, max_seq_len=8192
    ),
}
# Where a scale's data comes from: the mini files trainperf prepares, or the reference's C4 files and tokenizer.
MINI_FILES = {"mini": True, "reference": False}
CPU_CHECK_SEQ_LEN = 256  # a reference dry or smoke run on a CPU: sequences of 256 tokens, not 8,192
EVAL_BATCH = 64


class LlamaWorkload(Workload):
    DRY_RUN_LOCAL_BATCH = 1
    # The sizes a recipe's model_flavour names, and the one too large for a CPU (another benchmark of the family,
    # gpt_oss_20b, subclasses this workload with its own).
    FLAVOURS = FLAVOURS
    FULL_FLAVOUR = "8B"
    CPU_CHECK_SEQ_LEN = CPU_CHECK_SEQ_LEN
    # Small decoders step 2-4x faster on CPUs with denormal floats flushed to zero, as small BERTs do (DESIGN.md).
    TORCH_STATE = TorchState(flush_denormal=True)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.flavour = self.recipe.model_flavour
        checking = self.dry_run or self.smoke
        if checking and self.device.type == "cpu" and self.flavour == self.FULL_FLAVOUR:
            self.flavour = "debug"  # the full model does not fit a CPU's memory: the same code at a toy width
        self.seq_len = self.recipe.max_sequence_length
        if checking and self.device.type == "cpu":
            self.seq_len = min(self.seq_len, self.CPU_CHECK_SEQ_LEN)
        self.args = dataclasses.replace(
            self.FLAVOURS[self.flavour],
            max_seq_len=max(self.seq_len, self.FLAVOURS[self.flavour].max_seq_len),
            checkpoint_activations=self.recipe.activation_checkpointing,
        )
        self.train: list[indexed.IndexedDataset] | None = None
        self._validation: indexed.IndexedDataset | None = None
        self.valid: PackedSequences | None = None
        self.files: reference.Files | None = None
        self._train_samples = 0

    @property
    def mini_files(self) -> bool:
        return MINI_FILES[self.spec.scale]

    def find_reference_files(self) -> reference.Files:
        return reference.find(self.data_dir)

    # --- files ---------------------------------------------------------------------------------------
    def prepare(self) -> None:
        """Untimed, as the reference builds its data sets before run_start: the files are found and every index is
        checked against its token file (structure only: no token is read)."""
        if self.mini_files:
            if problems := mini.verify_mini(self.data_dir, trust_cache=True):
                raise DataError(f"llama31_8b mini data: {problems[0]}; {mini.FIX}")
            root = mini.mini_dir(self.data_dir)
            prefixes, validation = [root / mini.TRAIN_PREFIX], root / mini.VALID_PREFIX
        else:
            self.files = self.find_reference_files()
            vocab = tokenizer.load(self.files.tokenizer).get_vocab_size()
            if self.flavour == "debug":
                self.args = dataclasses.replace(self.args, vocab_size=vocab)
            elif vocab > self.args.vocab_size:
                raise DataError(
                    f"{self.files.tokenizer}: {vocab} tokens, more than the model's {self.args.vocab_size}; "
                    "give the Llama 3.1 tokenizer"
                )
            prefixes, validation = list(self.files.train), self.files.validation
        self.train = [indexed.IndexedDataset(p) for p in prefixes]
        self._validation = indexed.IndexedDataset(validation)

    def load_data(self) -> None:
        """Timed: the validation sequences packed and their tokens checked against the vocabulary; the training
        samples counted (their tokens are checked batch by batch as they are read)."""
        assert self.train is not None
        self.valid = PackedSequences(self._validation, self.seq_len)
        if len(self.valid) < self.spec.eval_samples and not self.smoke:
            raise DataError(
                f"{self._validation.prefix}: {len(self.valid)} validation sequences of {self.seq_len} tokens, fewer "
                f"than the {self.spec.eval_samples} the evaluation scores"
            )
        scored = self.valid.batch(np.arange(min(len(self.valid), self.spec.eval_samples)))
        self._check_tokens(scored, self._validation)
        self._train_samples = sum(len(PackedSequences(s, self.seq_len)) for s in self.train)

    def _check_tokens(self, tokens: np.ndarray, source: indexed.IndexedDataset) -> None:
        if tokens.size and (int(tokens.max()) >= self.args.vocab_size or int(tokens.min()) < 0):
            raise DataError(
                f"{source.prefix}.bin: token id {int(tokens.max())} lies outside the model's vocabulary of "
                f"{self.args.vocab_size}; the files were tokenized with another tokenizer"
            )

    @property
    def train_samples(self) -> int:
        return self._train_samples or self.spec.train_samples

    @property
    def eval_samples(self) -> int:
        if self.valid is not None and self.smoke:
            return min(len(self.valid), self.spec.eval_samples)
        return self.spec.eval_samples

    # --- model and optimizer -------------------------------------------------------------------------
    def build_model(self) -> torch.nn.Module:
        return Decoder(self.args)

    def reference_tensor_names(self, model: torch.nn.Module) -> list[str]:
        return [] if self.mini_files else reference_tensor_names(model)  # type: ignore[arg-type]

    def parallelize(self, model: torch.nn.Module) -> torch.nn.Module:
        """One process: the model on the device. Several: FSDP2 (``fully_shard``) of each block, then the whole
        model, as the reference shards its parameters, gradients and optimizer state over data-parallel ranks."""
        model = model.to(self.device)
        if not self.dist.distributed:
            return model
        from torch.distributed.fsdp import fully_shard

        for block in model.layers:  # type: ignore[union-attr]
            fully_shard(block)
        return fully_shard(model)

    def build_optimizer(self, model: torch.nn.Module) -> tuple[Any, Any]:
        """AdamW; norms (1-D tensors) get no weight decay, as Megatron excludes them; the reference's schedule."""
        r = self.recipe
        opt = torch.optim.AdamW(
            self.param_groups(model),
            lr=r.opt_base_learning_rate,
            betas=(r.opt_adamw_beta_1, r.opt_adamw_beta_2),
            eps=r.opt_adamw_epsilon,
        )
        return opt, torch.optim.lr_scheduler.LambdaLR(opt, lr_policy(r))

    def param_groups(self, model: torch.nn.Module) -> list[dict[str, Any]]:
        """The parameters with weight decay (matrices) and without (norms, 1-D)."""
        decay = [p for p in model.parameters() if p.ndim > 1]
        plain = [p for p in model.parameters() if p.ndim <= 1]
        return [
            {"params": decay, "weight_decay": self.recipe.opt_adamw_weight_decay},
            {"params": plain, "weight_decay": 0.0},
        ]

    def hparams(self) -> dict[str, Any]:
        r = self.recipe
        out = super().hparams()
        out.update(
            opt_end_learning_rate=r.opt_end_learning_rate,
            opt_learning_rate_decay_steps=r.opt_learning_rate_decay_steps,
            opt_learning_rate_decay_schedule=DECAY_SCHEDULE,
            opt_gradient_clip_norm=r.clip_grad_norm,
            trainperf_model_flavour=self.flavour,  # "debug" where a CPU check ran the 8B's code at a toy width
            trainperf_sequence_length=self.seq_len,  # the tokens a step's sequences held
        )
        return out

    # --- training data ---------------------------------------------------------------------------------
    def synthetic_batch(self) -> torch.Tensor:
        g = seeds.torch_generator(self.config.seed, seeds.STREAM_DATA, self.dist.rank)
        return torch.randint(0, self.args.vocab_size, (self.local_batch_size, self.seq_len + 1), generator=g)

    def train_batches(self) -> Iterator[torch.Tensor]:
        """Global batches in a seeded order, the same on every rank (each takes its slice): each epoch the
        documents of each shard are shuffled and packed, and the packed samples of all shards shuffled."""
        assert self.train is not None
        gb, n = self.global_batch_size, self.local_batch_size
        mine = slice(self.dist.rank * n, (self.dist.rank + 1) * n)
        epoch = 0
        while True:
            rng = seeds.numpy_rng(self.config.seed, seeds.STREAM_SHUFFLE, epoch)
            packed = [PackedSequences(s, self.seq_len, rng.permutation(len(s))) for s in self.train]
            which = np.concatenate([np.full(len(p), k) for k, p in enumerate(packed)])
            local = np.concatenate([np.arange(len(p)) for p in packed])
            order = rng.permutation(len(which))
            for b in range(0, len(order) // gb * gb, gb):
                picked = order[b : b + gb][mine]
                rows = np.stack([packed[which[i]].sample(int(local[i])) for i in picked])
                self._check_tokens(rows, self.train[int(which[picked[0]])])
                yield torch.from_numpy(rows)
            epoch += 1  # the last partial batch of an epoch is dropped

    def loss(self, model: torch.nn.Module, batch: torch.Tensor) -> torch.Tensor:
        batch = batch.to(self.device, non_blocking=True)
        return token_cross_entropy(model(batch[:, :-1]), batch[:, 1:], compiled=self.config.switches.compile)

    # --- evaluation -------------------------------------------------------------------------------------
    def evaluate(self, model: torch.nn.Module) -> Mapping[str, float]:
        """Log-perplexity: the mean next-token cross-entropy over every token of the first ``eval_samples``
        validation sequences (summed over all sequences before dividing), each rank scoring its shard once."""
        losses, tokens = self.sequence_losses(model)
        total, count, seqs = self.dist.all_reduce([float(losses.sum()), float(tokens.sum()), float(len(tokens))])
        if seqs != self.eval_samples:
            raise RuntimeError(f"llama31_8b: evaluated {seqs:.0f} of {self.eval_samples} sequences")
        return {"log_perplexity": total / count}

    @torch.no_grad()
    def sequence_losses(self, model: torch.nn.Module) -> tuple[np.ndarray, np.ndarray]:
        """(summed next-token cross-entropy, scored tokens) of each validation sequence of this rank's shard, in
        order: what :meth:`evaluate` sums, and what ``benchmarks/metric_error.py`` resamples."""
        assert self.valid is not None
        model.eval()
        shard = self.dist.shard(self.eval_samples)
        losses, tokens = [], []
        # Every rank takes as many forward passes as the longest shard needs (FSDP gathers in each): a rank whose
        # shard runs out scores sequence 0 once more and drops it.
        for n in range(math.ceil(self.dist.longest_shard(self.eval_samples) / EVAL_BATCH)):
            i = shard.start + n * EVAL_BATCH
            idx = np.arange(i, min(i + EVAL_BATCH, shard.stop))
            if not len(idx):
                model(torch.from_numpy(self.valid.batch(np.array([0]))).to(self.device)[:, :-1])
                continue
            batch = torch.from_numpy(self.valid.batch(idx)).to(self.device)
            logits = model(batch[:, :-1])
            each = F.cross_entropy(logits.float().transpose(1, 2), batch[:, 1:], reduction="none").sum(1)
            losses.append(each.double().cpu().numpy())
            tokens.append(np.full(len(batch), batch.shape[1] - 1, dtype=np.float64))
        model.train()
        if not losses:
            return np.zeros(0), np.zeros(0)
        return np.concatenate(losses), np.concatenate(tokens)

    @torch.no_grad()
    def dry_run_evaluate(self, model: torch.nn.Module) -> Mapping[str, float]:
        """A dry run's evaluation: the loss of one synthetic batch (about the log of the vocabulary's size for a
        model that has learnt nothing), never a value that meets the target as a 0 would."""
        model.eval()
        loss = float(self.loss(model, self.synthetic_batch()))
        model.train()
        return {"log_perplexity": loss}


def lr_policy(r: Any):
    """The reference's learning rate (NeMo's CosineAnnealing with linear warm-up) as a LambdaLR factor: ``(step + 1)
    / (warmup + 1)`` of the base rate up to step ``warmup``, then cosine decay to END_LR_FACTOR x the base over
    ``max_steps - warmup`` steps, flat after."""
    warmup, decay = r.opt_learning_rate_warmup_steps, r.opt_learning_rate_decay_steps
    end = r.opt_end_learning_rate / r.opt_base_learning_rate

    def factor(step: int) -> float:
        if step <= warmup:
            return (step + 1) / (warmup + 1)
        done = min(1.0, (step - warmup) / max(1, decay))
        return end + (1.0 - end) * 0.5 * (1.0 + math.cos(math.pi * done))

    return factor
