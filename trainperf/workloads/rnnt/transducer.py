"""The RNN-T joint's ReLU + dropout and the transducer loss, written for the CPU.

Both compute what the reference computes (``nn.ReLU`` and ``nn.Dropout`` on the joint tensor, torchaudio's
``rnnt_loss`` with ``reduction="mean"``); the workload uses them on a CPU, where they are the mini step's
cost, and the library versions on a GPU. Measured on two cores at the mini batch (32 utterances, joint tensor
32 x 38 x 8 x 128, 38 classes; ``benchmarks/rnnt_throughput.py``, rnnt's README "Profile"):

- torch's CPU dropout draws one Bernoulli sample per element through mt19937 and keeps a float mask: the
  joint (add, ReLU, dropout, the last linear layer) took 18-21 ms of forward and backward, 7-9 ms without the
  dropout. Here one 64-bit draw gives the keep-decisions of four elements (16 bits each), and only the output
  is kept for the backward pass (it is positive exactly where the gradient passes): 11-14 ms. NVIDIA's MLPerf
  RNN-T fuses the same ReLU and dropout into its transducer joint for the same reason; ``torch.compile`` of
  the joint was slower here (31 ms).
- torchaudio's CPU ``rnnt_loss`` took 13-26 ms for the mini batch. Here the forward variables are computed one
  target position at a time (at most 8 at the mini scale), each a ``logcumsumexp`` over the frames, and
  autograd gives the gradients: 5 ms, the same losses and gradients to 1e-5 (``tests/workloads/
  test_rnnt_transducer.py`` checks them against torchaudio's).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

_BITS = 16  # keep-decisions are drawn as 16-bit integers: the dropout rate is p rounded to 1/65,536


class _ReluDropoutSum(torch.autograd.Function):
    """dropout(relu(f[:, :, None] + g[:, None])) with a (B, T, U, H) output."""

    @staticmethod
    def forward(ctx, f: torch.Tensor, g: torch.Tensor, p: float) -> torch.Tensor:
        h = f.unsqueeze(2) + g.unsqueeze(1)
        n = h.numel()
        words = torch.empty((n + 3) // 4, dtype=torch.int64, device=h.device).random_(-(2**63), 2**63 - 1)
        drawn = words.view(torch.int16)[:n].view(h.shape)  # uniform on [-32768, 32767]
        keep = drawn >= round(p * 2**_BITS) - 2 ** (_BITS - 1)
        scale = 1.0 / (1.0 - p)
        h = h.clamp_min_(0).mul_(keep).mul_(scale)
        ctx.scale = scale
        ctx.save_for_backward(h)
        return h

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (h,) = ctx.saved_tensors
        grad = torch.where(h > 0, grad * ctx.scale, 0.0)
        return grad.sum(2), grad.sum(1), None


def relu_dropout_sum(f: torch.Tensor, g: torch.Tensor, p: float) -> torch.Tensor:
    """The joint's hidden tensor in training: ``dropout(relu(f.unsqueeze(2) + g.unsqueeze(1)), p)`` for f of
    shape (B, T, H) and g of shape (B, U, H)."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout rate {p} is not in [0, 1)")
    if p == 0.0:
        return F.relu(f.unsqueeze(2) + g.unsqueeze(1))
    return _ReluDropoutSum.apply(f, g, p)


def transducer_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    blank: int,
) -> torch.Tensor:
    """The RNN-T loss averaged over the batch, as ``torchaudio.functional.rnnt_loss(..., reduction="mean")``.

    logits (B, T, U + 1, classes), targets (B, U), the lengths (B,). With ``lp`` the log-softmax, the forward
    variable alpha(t, u) = logaddexp(alpha(t - 1, u) + blank(t - 1, u), alpha(t, u - 1) + emit(t, u - 1)), and
    a sequence's loss is -(alpha(T - 1, U) + blank(T - 1, U)). Along the frames, for one u, that recursion is
    a cumulative log-sum: alpha(t, u) = S(t) + logcumsumexp_t(alpha(t, u - 1) + emit(t, u - 1) - S(t)), where
    S(t) sums the blanks of frames before t. So one ``logcumsumexp`` per target position does it.
    """
    lp = torch.log_softmax(logits.float(), dim=-1)
    b, frames, positions, _ = lp.shape
    if targets.shape != (b, positions - 1):
        raise ValueError(f"targets of shape {tuple(targets.shape)} do not fit logits of shape {tuple(lp.shape)}")
    blanks = lp[..., blank]  # (B, T, U + 1)
    index = targets.long()[:, None, :, None].expand(b, frames, positions - 1, 1)
    emits = lp[:, :, :-1].gather(3, index).squeeze(3)  # (B, T, U)
    before = F.pad(blanks[:, :-1].cumsum(1), (0, 0, 1, 0))  # S: the blanks of the frames before t, per u
    alpha = before[:, :, 0]
    alphas = [alpha]
    for u in range(1, positions):
        alpha = before[:, :, u] + torch.logcumsumexp(alpha + emits[:, :, u - 1] - before[:, :, u], dim=1)
        alphas.append(alpha)
    last_t, last_u = logit_lengths.long() - 1, target_lengths.long()
    rows = torch.arange(b, device=lp.device)
    log_likelihood = torch.stack(alphas, 2)[rows, last_t, last_u] + blanks[rows, last_t, last_u]
    return -log_likelihood.mean()
