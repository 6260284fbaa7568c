"""BERT for pretraining (masked LM and next sentence), architecture only.

Parameter names are those of Hugging Face's ``BertForPreTraining`` (``bert.encoder.layer.0.attention.self.query
.weight``, ...), so its state dicts load as they are; :func:`tf_name` gives the reference TensorFlow
checkpoint's name of each (``bert/encoder/layer_0/attention/self/query/kernel``), the names MLPerf's
``weights_initialization`` lines carry. The masked-LM decoder shares the word embeddings and is applied to the
masked positions only (as the reference does), so the vocabulary's size costs little per step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True, kw_only=True)
class BertConfig:
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    dropout: float = 0.1
    layer_norm_eps: float = 1e-12
    initializer_range: float = 0.02
    # The activation of the intermediate layers and the masked-LM transform: torch's F.gelu with this
    # ``approximate``. "tanh" is the reference's (modeling.py's gelu: 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))));
    # "none" is the exact erf form, which the mini recipe keeps (README.md).
    gelu_approximate: str = "tanh"


# The reference's bert_config.json (BERT-large, uncased): 24 layers, hidden 1024, 16 heads, 30,522 WordPieces.
BERT_LARGE = BertConfig(vocab_size=30522, hidden_size=1024, num_layers=24, num_heads=16, intermediate_size=4096)


class Embeddings(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, c.hidden_size)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, input_ids: torch.Tensor, segment_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = (
            self.word_embeddings(input_ids)
            + self.position_embeddings(positions)
            + self.token_type_embeddings(segment_ids)
        )
        return self.dropout(self.LayerNorm(x))


class SelfAttention(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.heads, self.p = c.num_heads, c.dropout
        self.query = nn.Linear(c.hidden_size, c.hidden_size)
        self.key = nn.Linear(c.hidden_size, c.hidden_size)
        self.value = nn.Linear(c.hidden_size, c.hidden_size)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, s, self.heads, h // self.heads).transpose(1, 2)

        out = F.scaled_dot_product_attention(
            split(self.query(x)), split(self.key(x)), split(self.value(x)), attn_mask=mask,
            dropout_p=self.p if self.training else 0.0,
        )  # fmt: skip
        return out.transpose(1, 2).reshape(b, s, h)


class DenseNorm(nn.Module):
    """dense -> dropout -> LayerNorm(residual + .): BERT's attention output and layer output."""

    def __init__(self, c: BertConfig, d_in: int) -> None:
        super().__init__()
        self.dense = nn.Linear(d_in, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(residual + self.dropout(self.dense(x)))


class Attention(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.self = SelfAttention(c)
        self.output = DenseNorm(c, c.hidden_size)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.output(self.self(x, mask), x)


class Intermediate(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.intermediate_size)
        self.gelu = c.gelu_approximate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.dense(x), approximate=self.gelu)


class Layer(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.attention = Attention(c)
        self.intermediate = Intermediate(c)
        self.output = DenseNorm(c, c.intermediate_size)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.attention(x, mask)
        return self.output(self.intermediate(x), x)


class Encoder(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.layer = nn.ModuleList(Layer(c) for _ in range(c.num_layers))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        for layer in self.layer:
            x = layer(x, mask)
        return x


class Pooler(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(x[:, 0]))


class BertModel(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.embeddings = Embeddings(c)
        self.encoder = Encoder(c)
        self.pooler = Pooler(c)

    def forward(self, input_ids, segment_ids, input_mask) -> tuple[torch.Tensor, torch.Tensor]:
        # A boolean mask (True: attend) over the keys, broadcast over heads and queries.
        mask = input_mask.bool()[:, None, None, :]
        x = self.encoder(self.embeddings(input_ids, segment_ids), mask)
        return x, self.pooler(x)


class Transform(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.gelu = c.gelu_approximate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(F.gelu(self.dense(x), approximate=self.gelu))


class Predictions(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.transform = Transform(c)
        self.bias = nn.Parameter(torch.zeros(c.vocab_size))  # the decoder's weight is the word embeddings


class Heads(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.predictions = Predictions(c)
        self.seq_relationship = nn.Linear(c.hidden_size, 2)


class BertForPreTraining(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.bert = BertModel(config)
        self.cls = Heads(config)
        self.apply(self._init)

    def _init(self, m: nn.Module) -> None:
        """BERT's initialization: weights from N(0, 0.02) (truncated in the original), biases 0, LayerNorm 1 and 0."""
        std = self.config.initializer_range
        if isinstance(m, nn.Linear | nn.Embedding):
            nn.init.trunc_normal_(m.weight, std=std, a=-2 * std, b=2 * std)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)

    def forward(self, input_ids, segment_ids, input_mask, masked_lm_positions) -> tuple[torch.Tensor, torch.Tensor]:
        """(masked-LM logits at ``masked_lm_positions`` (B, P, vocab), next-sentence logits (B, 2))."""
        seq, pooled = self.bert(input_ids, segment_ids, input_mask)
        index = masked_lm_positions.long().unsqueeze(-1).expand(-1, -1, seq.shape[-1])
        picked = self.cls.predictions.transform(seq.gather(1, index))
        logits = F.linear(picked, self.bert.embeddings.word_embeddings.weight, self.cls.predictions.bias)
        return logits, self.cls.seq_relationship(pooled)


def pretraining_loss(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Masked-LM cross-entropy over the real prediction slots (position != 0) plus next-sentence cross-entropy."""
    mlm, nsp = model(batch["input_ids"], batch["segment_ids"], batch["input_mask"], batch["masked_lm_positions"])
    valid = batch["masked_lm_positions"] != 0
    loss = F.cross_entropy(mlm[valid], batch["masked_lm_ids"][valid].long())
    return loss + F.cross_entropy(nsp, batch["next_sentence_labels"].long().view(-1))


def tf_name(name: str) -> str:
    """Our (Hugging Face's) parameter name -> the reference TensorFlow checkpoint's tensor name.

    ``bert.encoder.layer.3.attention.self.query.weight`` -> ``bert/encoder/layer_3/attention/self/query/kernel``;
    ``bert.embeddings.word_embeddings.weight`` -> ``bert/embeddings/word_embeddings``; LayerNorm weight/bias ->
    gamma/beta; ``cls.predictions.bias`` -> ``cls/predictions/output_bias``; ``cls.seq_relationship.weight`` ->
    ``cls/seq_relationship/output_weights``.
    """
    parts = name.split(".")
    if parts[:2] == ["cls", "seq_relationship"]:
        return "cls/seq_relationship/output_" + ("weights" if parts[2] == "weight" else "bias")
    if parts == ["cls", "predictions", "bias"]:
        return "cls/predictions/output_bias"
    out = []
    i = 0
    while i < len(parts):
        p = parts[i]
        if p == "layer" and i + 1 < len(parts) and parts[i + 1].isdigit():
            out.append(f"layer_{parts[i + 1]}")
            i += 2
            continue
        out.append(p)
        i += 1
    last = out.pop()
    if out[-1] == "LayerNorm":
        out.append("gamma" if last == "weight" else "beta")
    elif out[-1].endswith("_embeddings"):
        pass  # an embedding table is stored under its own name
    else:
        out.append("kernel" if last == "weight" else "bias")
    return "/".join(out)


def tf_is_transposed(name: str) -> bool:
    """Whether the TensorFlow tensor is stored transposed ([in, out] kernels of dense layers)."""
    return tf_name(name).endswith("/kernel")


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
