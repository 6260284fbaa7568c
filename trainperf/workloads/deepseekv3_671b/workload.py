"""deepseekv3_671b's workload: gpt_oss_20b's (llama31_8b's C4 indexed files and tokenizer reader, packed sequences,
AdamW, log-perplexity, the experts' load), with DeepSeek-V3's decoder continued from the benchmark's checkpoint (the
reference's, or the mini's that ``trainperf data prepare`` trains: ``mini_start.py``), the multi-token prediction loss
and Megatron's learning-rate schedule (facts in ``__init__.py``)."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from trainperf.errors import DataError
from trainperf.workloads.common.fsdp import copy_into
from trainperf.workloads.common.llm import expert_parallel, tokenizer
from trainperf.workloads.common.llm.model import Decoder, token_cross_entropy
from trainperf.workloads.common.llm.moe import MoE
from trainperf.workloads.deepseekv3_671b import checkpoint, mini_start
from trainperf.workloads.deepseekv3_671b.model import FLAVOURS
from trainperf.workloads.gpt_oss_20b.workload import GptOssWorkload
from trainperf.workloads.llama31_8b import mini, reference

KEY = "deepseekv3_671b"
TRAIN_SHARD = "c4-train.en_6_text_document"  # pretrain_deepseek_v3_671b.py get_data: the training blend is shard 6


class DeepSeekWorkload(GptOssWorkload):
    FLAVOURS = FLAVOURS
    FULL_FLAVOUR = "671B"
    CPU_CHECK_SEQ_LEN = 64  # a CPU dry or smoke run: 64 tokens (the log says trainperf_sequence_length)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ckpt: checkpoint.Checkpoint | None = None

    def find_reference_files(self) -> reference.Files:
        """llama31_8b's C4 files (in ``<data-dir>/deepseekv3_671b/reference`` where that folder holds them, else
        llama31_8b's), training on shard 6 alone as the reference does."""
        own = (reference.reference_dir(self.data_dir, KEY) / f"{reference.VALIDATION}.idx").is_file()
        files = reference.find(self.data_dir, KEY if own else "llama31_8b")
        shard = [p for p in files.train if p.name == TRAIN_SHARD]
        if not shard:
            raise DataError(f"{files.validation.parent}: no {TRAIN_SHARD}.idx, the shard the reference trains on")
        return reference.Files(train=tuple(shard), validation=files.validation, tokenizer=files.tokenizer)

    def prepare(self) -> None:
        """llama31_8b's checks of the data files, then (not in a dry run) every tensor name and shape of the
        starting checkpoint against the model's, headers only: the reference's in
        ``<data-dir>/deepseekv3_671b/reference/checkpoint``, or the mini's (``mini_start.py``), whose SHA-256 its
        manifest records."""
        super().prepare()
        if self.dry_run:
            return
        if self.mini_files:
            if problems := mini_start.verify_start(self.data_dir, trust_cache=True):
                raise DataError(f"deepseekv3_671b mini starting checkpoint: {problems[0]}; {mini_start.FIX}")
            folder = mini_start.start_dir(self.data_dir)
            tokens = mini.mini_dir(self.data_dir) / mini.TOKENIZER
        else:
            folder = reference.reference_dir(self.data_dir, KEY) / "checkpoint"
            assert self.files is not None
            tokens = self.files.tokenizer
        ids = tokenizer.load(tokens).get_vocab_size()
        self.args = checkpoint.vocabulary_of(folder, self.args, ids)
        self.ckpt = checkpoint.check(folder, self.args)

    def build_model(self) -> torch.nn.Module:
        """The decoder on the meta device: a 671B model is placed and filled shard by shard in ``parallelize``."""
        with torch.device("meta"):
            return Decoder(self.args)

    def parallelize(self, model: torch.nn.Module) -> torch.nn.Module:
        """Where there are several processes, expert parallelism (``common/llm/expert_parallel.py``: each rank keeps
        its slice of every MoE layer's experts) and FSDP2 of each block (and the prediction block), then the whole
        model, for the rest (``workloads/common/fsdp.py``: bf16 gathers and fp32 gradient reduction on a GPU, as
        flux1's and llama2_70b_lora's); then each rank allocates its shards and its experts and fills them: from the
        checkpoint, or (a dry run) the decoder's own initialization drawn whole, the same on every rank."""
        if self.dist.distributed:
            units = [b for b in [*model.layers, model.mtp] if b is not None]  # type: ignore[union-attr]
            expert_parallel.shard(model, units, self.device, self.expert_parallelism, mixed_precision=True)
        model.to_empty(device=self.device)  # every tensor uninitialized: filled below
        model.reset_rope()  # type: ignore[operator]
        for layer in model.modules():
            if isinstance(layer, MoE):
                layer.tokens_per_expert.zero_()
                layer.tokens_seen.zero_()
        if self.ckpt is None:
            self._initialize(model)
        else:
            self._load(model)
        expert_parallel.average_expert_gradients(model)
        return model

    @torch.no_grad()
    def _initialize(self, model: torch.nn.Module) -> None:
        reference_model = Decoder(self.args)  # seeded by the harness: every rank draws the same tensors
        whole = dict(reference_model.named_parameters()) | dict(reference_model.named_buffers())
        rows = expert_parallel.local_rows(model)  # this rank's experts, where they are sharded
        for name, p in [*model.named_parameters(), *model.named_buffers()]:
            if name in whole and not name.startswith("rope_"):
                full = whole[name].detach()
                copy_into(p, full[rows[name]] if name in rows else full)

    @torch.no_grad()
    def _load(self, model: torch.nn.Module) -> None:
        assert self.ckpt is not None
        rows = expert_parallel.local_rows(model)  # this rank's experts (only they are read), where they are sharded
        for name, p in model.named_parameters():
            copy_into(p, checkpoint.read(self.ckpt, name, self.args, experts=rows.get(name)).float())
        for name, b in model.named_buffers():
            if name.endswith("router.expert_bias"):
                copy_into(b, checkpoint.read(self.ckpt, name, self.args).float())

    def build_optimizer(self, model: torch.nn.Module) -> tuple[Any, Any]:
        """gpt_oss_20b's AdamW and bias balancing, with Megatron's schedule (below)."""
        opt, _ = super().build_optimizer(model)
        return opt, torch.optim.lr_scheduler.LambdaLR(opt, lr_policy(self.recipe))

    def hparams(self) -> dict[str, Any]:
        out = super().hparams()
        assert self.args.moe is not None
        out.update(moe_aux_loss_coeff=self.args.moe.aux_loss_coeff)
        return out

    def loss(self, model: torch.nn.Module, batch: torch.Tensor) -> torch.Tensor:
        """The next-token cross-entropy plus ``mtp_loss_scale`` x the multi-token prediction's (the training loss
        Megatron differentiates; evaluation scores the next-token loss alone); without a prediction layer, the
        next-token cross-entropy."""
        if not self.args.mtp_layers:  # the mini: no prediction layer
            return super().loss(model, batch)
        batch = batch.to(self.device, non_blocking=True)
        labels = batch[:, 1:]
        logits, mtp = model(batch[:, :-1], labels)
        lm = token_cross_entropy(logits, labels, compiled=self.config.switches.compile)
        return lm + self.args.mtp_loss_scale * mtp

    def dry_run_evaluate(self, model: torch.nn.Module):
        model.eval()
        with torch.no_grad():
            batch = self.synthetic_batch().to(self.device)
            logits = model(batch[:, :-1])
            loss = float(F.cross_entropy(logits.float().flatten(0, 1), batch[:, 1:].flatten()))
        model.train()
        return {"log_perplexity": loss}


def lr_policy(r: Any):
    """Megatron's OptimizerParamScheduler (Megatron-Bridge's cosine annealing) as a LambdaLR factor of the base rate:
    ``step / warmup`` during the warm-up (0 at the first step), then cosine from the base rate to the end rate over
    ``opt_learning_rate_decay_steps - warmup`` steps, flat after."""
    warmup, decay = r.opt_learning_rate_warmup_steps, r.opt_learning_rate_decay_steps
    end = r.opt_end_learning_rate / r.opt_base_learning_rate

    def factor(step: int) -> float:
        if warmup > 0 and step <= warmup:
            return step / warmup
        done = min(1.0, (step - warmup) / max(1, decay - warmup))
        return end + (1.0 - end) * 0.5 * (1.0 + math.cos(math.pi * done))

    return factor
