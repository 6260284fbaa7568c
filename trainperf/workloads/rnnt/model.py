"""The MLPerf RNN-T (architecture only): LSTM encoder with time stacking, prediction network, joint network.

As the v2.0 reference builds it (mlcommons/training ``rnn_speech_recognition/pytorch/rnnt/model.py``): the
encoder is ``pre_rnn`` (LSTM layers), a time-stacking layer that concatenates ``enc_stack_time_factor``
consecutive frames, then ``post_rnn``; the prediction network embeds the previous symbol (``pred_embed``;
the start symbol is a zero vector) into an LSTM (``dec_rnn``); the joint network adds ``joint_enc`` of the
encoder output and ``joint_pred`` of the prediction output, then ReLU, dropout and ``joint_net``. Every
LSTM's forget-gate input bias starts at ``forget_gate_bias`` and its hidden-hidden biases at 0 (the
reference's ``forget_gate_bias=1.0, hidden_hidden_bias_scale=0.0``). The blank is the last class.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from trainperf.workloads.rnnt.transducer import relu_dropout_sum


@dataclass(frozen=True, kw_only=True)
class RNNTConfig:
    n_classes: int  # vocabulary pieces + 1 (the blank, last)
    in_features: int = 240
    enc_n_hid: int = 1024
    enc_pre_rnn_layers: int = 2
    enc_stack_time_factor: int = 2
    enc_post_rnn_layers: int = 3
    enc_dropout: float = 0.1
    pred_n_hid: int = 512
    pred_rnn_layers: int = 2
    pred_dropout: float = 0.3
    joint_n_hid: int = 512
    joint_dropout: float = 0.3
    forget_gate_bias: float = 1.0


class LSTM(nn.Module):
    """torch's LSTM with the reference's bias initialization and dropout on its output."""

    def __init__(self, input_size: int, hidden: int, layers: int, dropout: float, forget_gate_bias: float) -> None:
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden, num_layers=layers, dropout=dropout if layers > 1 else 0.0)
        for name, p in self.lstm.named_parameters():
            if name.startswith("bias_ih"):
                with torch.no_grad():
                    p[hidden : 2 * hidden].fill_(forget_gate_bias)
            elif name.startswith("bias_hh"):
                with torch.no_grad():
                    p.zero_()
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, state=None):
        y, state = self.lstm(x, state)  # x: (time, batch, features)
        return self.dropout(y), state


def stack_time(x: torch.Tensor, lengths: torch.Tensor, factor: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(T, B, H) -> (ceil(T / factor), B, H * factor): consecutive frames concatenated (zeros pad the end)."""
    t, b, h = x.shape
    pad = (-t) % factor
    if pad:
        x = torch.cat([x, x.new_zeros(pad, b, h)])
    x = x.reshape(-1, factor, b, h).permute(0, 2, 1, 3).reshape(-1, b, h * factor)
    return x, (lengths + factor - 1) // factor


class RNNT(nn.Module):
    def __init__(self, config: RNNTConfig) -> None:
        super().__init__()
        c = self.config = config
        self.pre_rnn = LSTM(c.in_features, c.enc_n_hid, c.enc_pre_rnn_layers, c.enc_dropout, c.forget_gate_bias)
        self.post_rnn = LSTM(
            c.enc_n_hid * c.enc_stack_time_factor, c.enc_n_hid, c.enc_post_rnn_layers, c.enc_dropout, c.forget_gate_bias
        )
        self.pred_embed = nn.Embedding(c.n_classes - 1, c.pred_n_hid)
        self.dec_rnn = LSTM(c.pred_n_hid, c.pred_n_hid, c.pred_rnn_layers, c.pred_dropout, c.forget_gate_bias)
        self.joint_pred = nn.Linear(c.pred_n_hid, c.joint_n_hid)
        self.joint_enc = nn.Linear(c.enc_n_hid, c.joint_n_hid)
        self.joint_net = nn.Sequential(nn.ReLU(), nn.Dropout(c.joint_dropout), nn.Linear(c.joint_n_hid, c.n_classes))

    @property
    def blank(self) -> int:
        return self.config.n_classes - 1

    def encode(self, feats: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, T, F) features -> (B, T', enc_n_hid) and the new lengths."""
        x, _ = self.pre_rnn(feats.transpose(0, 1))
        x, lengths = stack_time(x, lengths, self.config.enc_stack_time_factor)
        x, _ = self.post_rnn(x)
        return x.transpose(0, 1), lengths

    def predict(self, tokens: torch.Tensor | None, state=None, batch: int = 1):
        """The prediction network on (B, U) previous symbols; None: the start symbol (zero input)."""
        if tokens is None:
            emb = torch.zeros(batch, 1, self.config.pred_n_hid, device=self.pred_embed.weight.device)
        else:
            emb = self.pred_embed(tokens)
        y, state = self.dec_rnn(emb.transpose(0, 1), state)
        return y.transpose(0, 1), state

    def joint(self, f: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """(B, T, H_enc) and (B, U, H_pred) -> logits (B, T, U, classes)."""
        f, g = self.joint_enc(f), self.joint_pred(g)
        if self.training and f.device.type == "cpu":  # the same ReLU and dropout, cheaper on a CPU (transducer.py)
            return self.joint_net[2](relu_dropout_sum(f, g, self.config.joint_dropout))
        return self.joint_net(f.unsqueeze(2) + g.unsqueeze(1))

    def forward(self, feats, feat_lengths, tokens) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits (B, T', U + 1, classes) for targets ``tokens`` (B, U), and the encoder lengths."""
        f, lengths = self.encode(feats, feat_lengths)
        start = torch.zeros(tokens.shape[0], 1, self.config.pred_n_hid, device=tokens.device)
        emb = torch.cat([start, self.pred_embed(tokens)], dim=1)
        g, _ = self.dec_rnn(emb.transpose(0, 1))
        return self.joint(f, g.transpose(0, 1)), lengths


@torch.no_grad()
def greedy_decode(
    model: RNNT, feats: torch.Tensor, lengths: torch.Tensor, *, max_symbols_per_step: int, max_symbols: int
) -> list[list[int]]:
    """The reference's greedy decoder, batched: at each encoder frame emit the joint's best symbol until it
    is the blank (at most ``max_symbols_per_step`` per frame, ``max_symbols`` per utterance)."""
    f, lengths = model.encode(feats, lengths)
    b = f.shape[0]
    blank = model.blank
    g, state = model.predict(None, batch=b)
    out: list[list[int]] = [[] for _ in range(b)]
    counts = torch.zeros(b, dtype=torch.long)
    for t in range(f.shape[1]):
        active = lengths.to(torch.long) > t
        for _ in range(max_symbols_per_step):
            logits = model.joint(f[:, t : t + 1], g)[:, 0, 0]
            k = logits.argmax(dim=-1)
            emit = active & (k != blank) & (counts < max_symbols)
            if not bool(emit.any()):
                break
            g_new, state_new = model.predict(torch.where(emit, k, 0).unsqueeze(1), state)
            m = emit.view(-1, 1, 1)
            g = torch.where(m, g_new, g)
            state = tuple(torch.where(emit.view(1, -1, 1), s_new, s) for s_new, s in zip(state_new, state, strict=True))
            for i in torch.nonzero(emit).flatten().tolist():
                out[i].append(int(k[i]))
            counts += emit.long()
            active = emit
    return out
