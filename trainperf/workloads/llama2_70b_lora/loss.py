"""llama2_70b_lora's batches and loss: right-padded sequences and Hugging Face's causal-LM loss, shared by the workload
and the mini's base model (whose own evaluation loss its manifest records)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from trainperf.workloads.llama2_70b_lora.reference import IGNORE, Sequences


def collate(split: Sequences, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded (ids, labels): padding takes no loss, and a causal model's real tokens never see it."""
    width = max(len(split.ids[i]) for i in rows)
    ids = np.zeros((len(rows), width), dtype=np.int64)
    labels = np.full((len(rows), width), IGNORE, dtype=np.int64)
    for k, i in enumerate(rows):
        ids[k, : len(split.ids[i])] = split.ids[i]
        labels[k, : len(split.labels[i])] = split.labels[i]
    return torch.from_numpy(ids), torch.from_numpy(labels)


def causal_lm_loss(model: torch.nn.Module, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Hugging Face's causal-LM loss: the mean cross-entropy of each next token whose label is not -100. The decoder
    computes logits at those positions alone (a summary is a fifth of a sequence's tokens): the same loss as
    ``cross_entropy(logits, labels, ignore_index=-100)`` over every position, without the output layer's products and
    softmax where nothing is scored."""
    target = labels[:, 1:]
    scored = target != IGNORE
    logits = model(ids[:, :-1], scored=scored)
    return F.cross_entropy(logits.float(), target[scored])


@torch.no_grad()
def mean_sequence_loss(model: torch.nn.Module, split: Sequences) -> float:
    """The evaluation loss in one process: each sequence's loss (a batch of 1), averaged over the split."""
    was_training = model.training
    model.eval()
    total = sum(float(causal_lm_loss(model, *collate(split, np.array([i])))) for i in range(len(split)))
    model.train(was_training)
    return total / len(split)
