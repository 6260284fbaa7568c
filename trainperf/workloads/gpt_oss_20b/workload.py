"""gpt_oss_20b's workload: llama31_8b's (the same C4 indexed files and tokenizer reader, packed sequences, AdamW with
the cosine, log-perplexity), with the decoder's mixture-of-experts flavour (facts in ``__init__.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from trainperf.workloads.common.llm import expert_parallel
from trainperf.workloads.common.llm.moe import MoE, update_expert_bias
from trainperf.workloads.gpt_oss_20b.model import FLAVOURS
from trainperf.workloads.llama31_8b import reference
from trainperf.workloads.llama31_8b.workload import LlamaWorkload

KEY = "gpt_oss_20b"


class GptOssWorkload(LlamaWorkload):
    FLAVOURS = FLAVOURS
    FULL_FLAVOUR = "20B"
    # A CPU dry or smoke run: sequences of 64 tokens (its cost is the 128,256-token output layer's, already checked
    # at 256 by llama31_8b's; the log says trainperf_sequence_length 64).
    CPU_CHECK_SEQ_LEN = 64

    def find_reference_files(self) -> reference.Files:
        """The C4 files llama31_8b reads: in ``<data-dir>/gpt_oss_20b/reference`` where that folder exists (a smoke
        run's fixture), else in ``<data-dir>/llama31_8b/reference``, so that one copy serves both benchmarks."""
        own = reference.reference_dir(self.data_dir, KEY).is_dir()
        return reference.find(self.data_dir, KEY if own else "llama31_8b")

    @property
    def expert_parallelism(self) -> int:
        """The ranks the experts are split over: every rank where they split the experts evenly, else 1."""
        assert self.args.moe is not None
        return expert_parallel.degree(self.args.moe.n_experts, self.dist.world_size)

    def parallelism(self) -> dict[str, int]:
        return {**super().parallelism(), "expert_parallelism": self.expert_parallelism}

    def parallelize(self, model: torch.nn.Module) -> torch.nn.Module:
        """One process: the model on the device. Several: expert parallelism (``common/llm/expert_parallel.py``:
        each rank keeps its slice of the experts ``build_model`` drew whole, the same on every rank, so that the
        ranks start from one process's weights) and FSDP2 of each block, then the whole model, for the rest, as
        llama31_8b's (the parameters gathered in their own dtype)."""
        model = model.to(self.device)
        if not self.dist.distributed:
            return model
        blocks = list(model.layers)  # type: ignore[arg-type]
        expert_parallel.shard(model, blocks, self.device, self.expert_parallelism, mixed_precision=False)
        expert_parallel.average_expert_gradients(model)
        return model

    def param_groups(self, model: torch.nn.Module) -> list[dict[str, Any]]:
        """llama31_8b's groups, the experts a rank keeps in groups of their own (a foreach or fused optimizer
        kernel takes either FSDP's DTensors or plain tensors in one group, not both)."""
        groups = super().param_groups(model)
        local = {id(p) for layer in expert_parallel.moe_layers(model) if layer.ep_size > 1
                 for p in layer.experts.parameters()}  # fmt: skip
        if not local:
            return groups
        split = []
        for g in groups:
            for keep in (False, True):
                params = [p for p in g["params"] if (id(p) in local) == keep]
                split += [{**g, "params": params}] if params else []
        return split

    def clip_gradients(self, model: torch.nn.Module, max_norm: float) -> torch.Tensor:
        """The whole model's norm with the experts sharded (``expert_parallel.clip_grad_norm_``)."""
        return expert_parallel.clip_grad_norm_(model, max_norm)

    def build_optimizer(self, model: torch.nn.Module) -> tuple[Any, Any]:
        """llama31_8b's AdamW and schedule; where a flavour balances its experts by bias (DeepSeek-V3's way; GPT-OSS's
        reference balances nothing), the biases move after every optimizer step."""
        opt, sched = super().build_optimizer(model)
        if any(isinstance(m, MoE) and m.router.expert_bias is not None for m in model.modules()):
            opt.register_step_post_hook(lambda *_: update_expert_bias(model))
        return opt, sched

    def hparams(self) -> dict[str, Any]:
        out = super().hparams()
        moe = self.args.moe
        assert moe is not None
        out.update(trainperf_moe_experts=moe.n_experts, trainperf_moe_top_k=moe.top_k)
        return out

    def evaluate(self, model: torch.nn.Module) -> Mapping[str, float]:
        """llama31_8b's log-perplexity, and the expert load of the training tokens since the last evaluation (logged
        beside it as trainperf_eval_details)."""
        return {**super().evaluate(model), **self.expert_balance(model)}

    def expert_balance(self, model: torch.nn.Module) -> dict[str, float]:
        """The most-loaded expert's tokens over the mean expert's (1.0: perfectly balanced; ``n_experts / top_k``:
        every token to the same k), counted over all ranks since the counts last restarted: the worst layer's and the
        mean over layers. The counts then restart (apart from those a bias-balanced flavour moves its biases by)."""
        layers = [m for m in model.modules() if isinstance(m, MoE)]
        if not layers:
            return {}
        counts = np.array(self.dist.all_reduce([c for m in layers for c in m.tokens_seen.tolist()]))
        counts = counts.reshape(len(layers), -1)
        for m in layers:
            m.tokens_seen.zero_()
        if counts.sum() == 0:
            return {}
        ratio = counts.max(1) / np.maximum(counts.mean(1), 1e-12)
        return {"expert_load_max": float(ratio.max()), "expert_load_mean_max": float(ratio.mean())}
