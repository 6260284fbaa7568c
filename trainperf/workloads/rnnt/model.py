"""The MLPerf RNN-T (architecture only): LSTM encoder with time stacking, prediction network, joint network.

As the v2.0 reference builds it (mlcommons/training ``rnn_speech_recognition/pytorch/rnnt/model.py``): the
encoder is ``pre_rnn`` (LSTM layers), a time-stacking layer that concatenates ``enc_stack_time_factor``
consecutive frames, then ``post_rnn``; the prediction network embeds the previous symbol (``pred_embed``;
the start symbol is a zero vector) into an LSTM (``dec_rnn``); the joint network adds ``joint_enc`` of the
encoder output and ``joint_pred`` of the prediction output, then ReLU, dropout and ``joint_net``. The LSTMs
start as the reference's ``common/rnn.py`` leaves them (``LSTM``). The blank is the last class.
"""

from __future__ import annotations

import functools
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
    weights_init_scale: float = 0.5  # the v2.0 run's (train.py's default, scripts/train.sh)
    zero_all_bias_hh: bool = False  # True: every hidden-hidden bias 0, not only the forget gate's (mini's)


class LSTM(nn.Module):
    """torch's LSTM, initialized as the reference's ``common/rnn.py`` does, with dropout on its output.

    After torch's default draw (uniform in +-1/sqrt(hidden)), in each layer the forget gate's slice (torch's gate
    order is input, forget, cell, output) of ``bias_ih`` is set to ``forget_gate_bias`` and that of ``bias_hh``
    to 0 (the reference's ``hidden_hidden_bias_scale`` 0.0; ``zero_all_bias_hh``: all of ``bias_hh``); then every
    weight and bias, those two slices included, is multiplied by ``weights_init_scale``.
    """

    def __init__(
        self,
        input_size: int,
        hidden: int,
        layers: int,
        dropout: float,
        *,
        forget_gate_bias: float = 1.0,
        weights_init_scale: float = 0.5,
        zero_all_bias_hh: bool = False,
    ) -> None:
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden, num_layers=layers, dropout=dropout if layers > 1 else 0.0)
        forget = slice(hidden, 2 * hidden)
        with torch.no_grad():
            for name, p in self.lstm.named_parameters():
                if name.startswith("bias_ih"):
                    p[forget].fill_(forget_gate_bias)
                elif name.startswith("bias_hh"):
                    (p if zero_all_bias_hh else p[forget]).zero_()
                p.mul_(weights_init_scale)
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
        lstm = functools.partial(
            LSTM,
            forget_gate_bias=c.forget_gate_bias,
            weights_init_scale=c.weights_init_scale,
            zero_all_bias_hh=c.zero_all_bias_hh,
        )
        self.pre_rnn = lstm(c.in_features, c.enc_n_hid, c.enc_pre_rnn_layers, c.enc_dropout)
        self.post_rnn = lstm(c.enc_n_hid * c.enc_stack_time_factor, c.enc_n_hid, c.enc_post_rnn_layers, c.enc_dropout)
        self.pred_embed = nn.Embedding(c.n_classes - 1, c.pred_n_hid)
        self.dec_rnn = lstm(c.pred_n_hid, c.pred_n_hid, c.pred_rnn_layers, c.pred_dropout)
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
    model: RNNT,
    feats: torch.Tensor,
    lengths: torch.Tensor,
    *,
    max_symbols_per_step: int,
    max_symbols: int,
    cap_before_frames: bool = False,
) -> list[list[int]]:
    """The reference's greedy decoder, batched: at each encoder frame emit the joint's best symbol until it
    is the blank (at most ``max_symbols_per_step`` per frame and ``max_symbols`` per utterance).

    ``cap_before_frames``: the per-utterance cap as the reference's decoder checks it, before each frame
    (``rnnt/decoder.py:94-96``: an utterance holding more than ``max_symbols`` stops, so a frame begun at the cap
    can still add up to ``max_symbols_per_step``). Otherwise (the mini scale, as calibrated) no utterance
    passes ``max_symbols``."""
    f, lengths = model.encode(feats, lengths)
    b = f.shape[0]
    blank = model.blank
    g, state = model.predict(None, batch=b)
    out: list[list[int]] = [[] for _ in range(b)]
    counts = torch.zeros(b, dtype=torch.long, device=f.device)  # beside the lengths and logits (a GPU's too)
    for t in range(f.shape[1]):
        active = lengths.to(torch.long) > t
        if cap_before_frames:
            active = active & (counts <= max_symbols)
        for _ in range(max_symbols_per_step):
            logits = model.joint(f[:, t : t + 1], g)[:, 0, 0]
            k = logits.argmax(dim=-1)
            emit = active & (k != blank)
            if not cap_before_frames:
                emit = emit & (counts < max_symbols)
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
