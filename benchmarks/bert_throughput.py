"""Training throughput (tokens/s) of the mini bert model beside Hugging Face's BertForPreTraining of the same size.

    python benchmarks/bert_throughput.py [--steps 20] [--repeats 3] [--batch 64]

Both models have the mini flavour's size (2 layers, hidden 128, 2 heads, 8,192 WordPieces, 64 tokens) and take
the same batch of the mini layout, with the same loss (masked LM over the real prediction slots plus next
sentence), the same LAMB (timm's, as the workload builds it) and the harness's step, in this one process, under
the workload's torch state (denormals flushed to zero), alternating. Each measurement times ``steps`` optimizer
steps after warm-up; the median of ``repeats`` is reported, and the ratio ours / Hugging Face's. tokens/s counts
every position of the batch (padding included), samples/s x 64.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from pathlib import Path

import torch

from trainperf import registry
from trainperf.dist import DistContext
from trainperf.harness.runner import RunObserver
from trainperf.harness.schedule import Schedule
from trainperf.harness.steps import Stepper
from trainperf.harness.torch_state import torch_state
from trainperf.spec import RunConfig
from trainperf.workloads.bert.workload import FLAVOURS


class HuggingFaceBert(torch.nn.Module):
    """transformers' BertForPreTraining of the mini flavour's size, called the way our model is."""

    def __init__(self) -> None:
        super().__init__()
        import transformers

        c = FLAVOURS["mini"]
        self.hf = transformers.BertForPreTraining(
            transformers.BertConfig(
                vocab_size=c.vocab_size, hidden_size=c.hidden_size, num_hidden_layers=c.num_layers,
                num_attention_heads=c.num_heads, intermediate_size=c.intermediate_size, hidden_act="gelu",
                hidden_dropout_prob=c.dropout, attention_probs_dropout_prob=c.dropout,
                max_position_embeddings=c.max_position_embeddings, layer_norm_eps=c.layer_norm_eps,
            )
        )  # fmt: skip

    def forward(self, input_ids, segment_ids, input_mask, masked_lm_positions):
        out = self.hf(input_ids=input_ids, attention_mask=input_mask, token_type_ids=segment_ids)
        logits = out.prediction_logits  # every position: that is how its head works
        picked = logits.gather(1, masked_lm_positions[..., None].expand(-1, -1, logits.shape[-1]))
        return picked, out.seq_relationship_logits


def build(batch: int, peer: bool):
    spec, recipe = registry.get_spec("bert", "mini"), registry.default_recipe("bert", "mini")
    recipe = dataclasses.replace(recipe, global_batch_size=batch)
    w = registry.workload_class("bert")(
        spec, recipe, RunConfig(seed=0, dry_run=True), data_dir=Path("."), dist=DistContext()
    )
    torch.manual_seed(0)
    model = HuggingFaceBert() if peer else w.build_model()
    opt, sched = w.build_optimizer(model)
    stepper = Stepper(model, w, opt, sched, RunObserver(), Schedule.for_run(spec, w, dry_run_steps=1))
    return w, stepper, w.synthetic_batch()


def tokens_per_second(w, stepper, batch, steps: int) -> float:
    for _ in range(2):  # warm-up
        stepper.step([batch])
    t = time.perf_counter()
    for _ in range(steps):
        stepper.step([batch])
    return steps * batch["input_ids"].numel() / (time.perf_counter() - t)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--batch", type=int, default=64, help="examples per step (the mini recipe's: 64)")
    a = p.parse_args()
    results: dict[str, list[float]] = {"trainperf": [], "transformers": []}
    with torch_state(registry.workload_class("bert").TORCH_STATE):
        setups = {"trainperf": build(a.batch, peer=False), "transformers": build(a.batch, peer=True)}
        for _ in range(a.repeats):
            for name, (w, stepper, batch) in setups.items():
                results[name].append(tokens_per_second(w, stepper, batch, a.steps))
    print(
        f"mini bert training throughput, batch {a.batch} x 64 tokens, CPU {torch.get_num_threads()} threads (median of {a.repeats}):"
    )
    med = {k: statistics.median(v) for k, v in results.items()}
    for name, values in results.items():
        print(f"  {name:12s} {med[name]:9.0f} tokens/s  (runs: {', '.join(f'{v:.0f}' for v in values)})")
    print(f"  ratio trainperf / transformers: {med['trainperf'] / med['transformers']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
