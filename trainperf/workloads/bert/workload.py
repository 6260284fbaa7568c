"""bert's workload: packed HDF5 examples, BERT for pretraining, LAMB, masked-LM accuracy (facts in ``__init__.py``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from trainperf import seeds
from trainperf.contract.workload import TorchState, Workload
from trainperf.errors import DataError, UsageError
from trainperf.workloads.bert import data, mini, reference
from trainperf.workloads.bert.model import BERT_LARGE, BertConfig, BertForPreTraining, pretraining_loss, tf_name


@dataclass(frozen=True)
class Flavour:
    """What a scale fixes beyond the recipe: the network, where its examples come from, and a dry run's batch."""

    model: BertConfig  # the GELU's form comes from the recipe (__init__.py)
    # True: the mini files trainperf prepares (train and eval HDF5, verified, held in memory); False: the
    # reference's shards and its starting checkpoint, with the reference's tensor names.
    mini_files: bool
    # A dry run's synthetic batch (sequence length, predictions): the reference layout at a CPU-sized sequence on
    # a CPU; ``gpu_synthetic_shape`` where a GPU must use another (None: the same).
    synthetic_shape: tuple[int, int]
    gpu_synthetic_shape: tuple[int, int] | None = None


FLAVOURS = {
    # On a GPU a dry run uses the reference's own 512 tokens and 76 predictions (what a throughput measurement
    # there must use); the model is full size.
    "reference": Flavour(model=BERT_LARGE, mini_files=False, synthetic_shape=(128, 20), gpu_synthetic_shape=(512, 76)),
    "mini": Flavour(
        # Dropout off: a model trained from scratch for two minutes is far from overfitting 125,000 examples.
        model=BertConfig(
            vocab_size=mini.VOCAB_SIZE,
            hidden_size=128,
            num_layers=2,
            num_heads=2,
            intermediate_size=512,
            max_position_embeddings=mini.MASKING.max_seq_length,
            dropout=0.0,
        ),
        mini_files=True,
        synthetic_shape=(mini.MASKING.max_seq_length, mini.MASKING.max_predictions),
    ),
}
EVAL_BATCH = 500
GELU_FORMS = ("tanh", "none")  # the recipe's model_gelu_approximate: the reference's, exact erf


class BertWorkload(Workload):
    DRY_RUN_LOCAL_BATCH = 2
    # Small BERTs train 3-4x faster on CPUs with denormal floats flushed to zero (DESIGN.md); the harness sets it
    # for the run and restores it afterwards.
    TORCH_STATE = TorchState(flush_denormal=True)
    _sizes: tuple[int, int] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        gelu = self.recipe.model_gelu_approximate
        if gelu not in GELU_FORMS:
            raise UsageError(
                f"bert: model_gelu_approximate {gelu!r} is not one of {', '.join(map(repr, GELU_FORMS))} "
                "(torch's F.gelu approximate: 'tanh' is the reference's)"
            )
        self.flavour = FLAVOURS[self.spec.scale]
        self.model_config = dataclasses.replace(self.flavour.model, gelu_approximate=gelu)
        self.train: data.Examples | None = None
        self.eval: data.Examples | None = None
        self.shards: reference.Shards | None = None

    @property
    def mini(self) -> bool:
        return self.flavour.mini_files

    # --- files ---------------------------------------------------------------------------------------
    def prepare(self) -> None:
        if self.mini:
            problems = mini.verify_mini(self.data_dir, trust_cache=True)
            if problems:
                raise DataError(f"bert mini data: {problems[0]}; {mini.FIX}")
            return
        self.shards = reference.find(self.data_dir, vocab_size=self.model_config.vocab_size)

    def load_data(self) -> None:
        vocab = self.model_config.vocab_size
        if self.mini:
            root = mini.mini_dir(self.data_dir)
            self.train = data.read_examples(root / mini.TRAIN_FILE, vocab_size=vocab)
            self.eval = data.read_examples(root / mini.EVAL_FILE, vocab_size=vocab)
            self._sizes = (len(self.train), len(self.eval))
            return
        assert self.shards is not None
        self.eval = data.Examples.concat([data.read_examples(p, vocab_size=vocab) for p in self.shards.eval_files])
        self._sizes = (self.shards.train_examples, len(self.eval))

    @property
    def train_samples(self) -> int:
        return (self._sizes or (self.spec.train_samples, self.spec.eval_samples))[0]

    @property
    def eval_samples(self) -> int:
        return (self._sizes or (self.spec.train_samples, self.spec.eval_samples))[1]

    # --- model and optimizer -------------------------------------------------------------------------
    def build_model(self) -> torch.nn.Module:
        model = BertForPreTraining(self.model_config)
        if not self.mini and not self.dry_run:
            assert self.shards is not None
            reference.load_checkpoint(model, self.shards.checkpoint)  # untimed: part of initialization
        return model

    def reference_tensor_names(self, model: torch.nn.Module) -> list[str]:
        if self.mini:
            return []
        return [tf_name(name) for name, _ in model.named_parameters()]

    def build_optimizer(self, model: torch.nn.Module) -> tuple[Any, Any]:
        """timm's LAMB (its update checked against the reference's in tests/unit/test_bert_lamb.py); LayerNorm
        and bias tensors get neither weight decay nor the layer-wise trust ratio, as the reference excludes them."""
        from timm.optim import Lamb

        r = self.recipe
        decay = [p for n, p in model.named_parameters() if p.ndim > 1 and "LayerNorm" not in n]
        plain = [p for n, p in model.named_parameters() if p.ndim <= 1 or "LayerNorm" in n]
        opt = Lamb(
            [{"params": decay, "weight_decay": r.opt_lamb_weight_decay_rate}, {"params": plain, "weight_decay": 0.0}],
            lr=r.opt_base_learning_rate,
            betas=(r.opt_lamb_beta_1, r.opt_lamb_beta_2),
            eps=r.opt_epsilon,
            max_grad_norm=None,  # the harness clips to the recipe's clip_grad_norm (1.0) before the step
        )
        return opt, torch.optim.lr_scheduler.LambdaLR(opt, lr_policy(r))

    def hparams(self) -> dict[str, Any]:
        out = super().hparams()
        out["num_warmup_steps"] = self.recipe.opt_learning_rate_warmup_steps
        return out

    # --- training data ---------------------------------------------------------------------------------
    def synthetic_batch(self) -> dict[str, torch.Tensor]:
        g = seeds.torch_generator(self.config.seed, seeds.STREAM_DATA, self.dist.rank)
        shape = self.flavour.synthetic_shape
        if self.device.type == "cuda" and self.flavour.gpu_synthetic_shape is not None:
            shape = self.flavour.gpu_synthetic_shape
        n, (seq, npred) = self.local_batch_size, shape
        vocab = self.model_config.vocab_size
        positions = torch.stack([torch.randperm(seq - 1, generator=g)[:npred] + 1 for _ in range(n)]).sort(1).values
        return {
            "input_ids": torch.randint(5, vocab, (n, seq), generator=g),
            "input_mask": torch.ones(n, seq, dtype=torch.long),
            "segment_ids": (torch.arange(seq) >= seq // 2).long().expand(n, seq),
            "masked_lm_positions": positions,
            "masked_lm_ids": torch.randint(5, vocab, (n, npred), generator=g),
            "next_sentence_labels": torch.randint(0, 2, (n,), generator=g),
        }

    def _rank_slice(self) -> slice:
        n = self.local_batch_size
        return slice(self.dist.rank * n, (self.dist.rank + 1) * n)

    def train_batches(self) -> Iterator[dict[str, torch.Tensor]]:
        """Global batches in a seeded order (the same on every rank; each rank takes its slice). Mini: one
        in-memory file, reshuffled each epoch. Reference: the shuffled shard files one at a time, each
        shuffled within, the remainder of one carried into the next."""
        gb, mine = self.global_batch_size, self._rank_slice()
        epoch = 0
        while True:
            if self.mini:
                assert self.train is not None
                blocks: Iterator[data.Examples] = iter([self.train])
            else:
                assert self.shards is not None
                blocks = self.shards.read_in_order(seeds.numpy_rng(self.config.seed, seeds.STREAM_SHUFFLE, epoch, 0))
            rng = seeds.numpy_rng(self.config.seed, seeds.STREAM_SHUFFLE, epoch)
            pending: data.Examples | None = None
            for block in blocks:
                block = block if pending is None else data.Examples.concat([pending, block])
                order = rng.permutation(len(block))
                full = len(block) // gb * gb
                for b in range(0, full, gb):
                    yield to_tensors(block.take(np.sort(order[b : b + gb][mine])))
                pending = block.take(order[full:])
            epoch += 1  # the last partial batch of an epoch is dropped

    def loss(self, model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return pretraining_loss(model, {k: v.to(self.device, non_blocking=True) for k, v in batch.items()})

    # --- evaluation -------------------------------------------------------------------------------------
    def evaluate(self, model: torch.nn.Module) -> Mapping[str, float]:
        """Masked-LM accuracy over every prediction slot of the whole evaluation set (the reference's: correct
        predictions over masked tokens, summed over all examples before dividing)."""
        hits = self.masked_lm_hits(model)
        correct, total, examples = self.dist.all_reduce(
            [float(hits[0].sum()), float(hits[1].sum()), float(len(hits[1]))]
        )
        if examples != self.eval_samples:
            raise RuntimeError(f"bert: evaluated {examples:.0f} of {self.eval_samples} examples")
        return {"mlm_accuracy": correct / total}

    @torch.no_grad()
    def masked_lm_hits(self, model: torch.nn.Module) -> tuple[np.ndarray, np.ndarray]:
        """(correct predictions, masked tokens) of each example of this rank's shard, in order: what
        :meth:`evaluate` sums, and what ``benchmarks/metric_error.py`` resamples."""
        assert self.eval is not None
        model.eval()
        shard = self.dist.shard(self.eval_samples)  # this rank's examples, each evaluated exactly once
        correct, counts = [], []
        for i in range(shard.start, shard.stop, EVAL_BATCH):
            b = {
                k: v.to(self.device)
                for k, v in to_tensors(self.eval.take(slice(i, min(i + EVAL_BATCH, shard.stop)))).items()
            }
            logits, _ = model(b["input_ids"], b["segment_ids"], b["input_mask"], b["masked_lm_positions"])
            valid = b["masked_lm_positions"] != 0
            right = (logits.argmax(-1) == b["masked_lm_ids"]) & valid
            correct.append(right.sum(1).cpu().numpy())
            counts.append(valid.sum(1).cpu().numpy())
        model.train()
        if not counts:
            return np.zeros(0), np.zeros(0)
        return np.concatenate(correct), np.concatenate(counts)


def to_tensors(ex: data.Examples) -> dict[str, torch.Tensor]:
    """int64 tensors (embedding and gather indices) of a block of examples."""
    return {name: torch.from_numpy(np.ascontiguousarray(getattr(ex, name))).long() for name in data.FIELDS}


def lr_policy(r: Any):
    """The reference's learning rate as a LambdaLR factor: polynomial (power 1) decay from the base rate to 0 at
    ``opt_learning_rate_training_steps``; before ``start_warmup_step + opt_learning_rate_warmup_steps`` the
    warm-up rate ``(step - start_warmup_step) / warmup`` of the base rate instead (optimization.py's
    create_optimizer: its first step has rate 0 and changes no weight, though it does update LAMB's moments).
    ``opt_learning_rate_warmup_from_zero`` off (the mini recipe, as calibrated): ``(step - start + 1) / warmup``,
    one step ahead. A step before ``start_warmup_step`` takes 0 (the reference's would be negative)."""
    warmup, start, total = r.opt_learning_rate_warmup_steps, r.start_warmup_step, r.opt_learning_rate_training_steps
    ahead = 0 if r.opt_learning_rate_warmup_from_zero else 1

    def factor(step: int) -> float:
        if warmup and step - start < warmup:
            return max(0.0, (step - start + ahead) / warmup)
        return max(0.0, 1.0 - min(step, total) / total)

    return factor
