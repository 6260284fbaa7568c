"""DLRM (Naumov et al. 2019), as MLPerf Training v2.0's reference builds it: architecture only.

A bottom MLP turns the 13 dense features into a vector of the embedding dimension; each of the 26
categorical features looks up a row of its own table. The 26 tables are stored as consecutive row ranges
of one ``nn.Embedding`` (sparse gradients, one lookup and one sparse update a step instead of 26: on a
CPU the per-table calls cost more than the arithmetic); a row of table ``f`` is row ``offset[f] + id``
of it, the same numbers as the reference's 26 ``nn.EmbeddingBag`` of bags of one id;
the dot interaction takes the pairwise dot products of these 27 vectors (351 of them, the lower
triangle without the diagonal) and concatenates the bottom MLP's output; the top MLP maps that to one
logit (the reference applies the sigmoid in the model; here it is in the loss, ``binary_cross_entropy_with_logits``,
for numerical safety). Initialization as the reference: tables uniform in ±sqrt(1/rows), MLP weights
normal with std sqrt(2/(fan_in+fan_out)), biases normal with std sqrt(1/fan_out).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True, kw_only=True)
class DLRMConfig:
    table_sizes: tuple[int, ...]
    embedding_dim: int
    bottom_mlp: tuple[int, ...]  # layer widths after the 13 inputs; the last is the embedding dimension
    top_mlp: tuple[int, ...]  # layer widths after the interaction; the last is 1
    num_dense: int = 13
    sparse_gradients: bool = True  # the reference's sparse embedding gradients (SGD updates touched rows only)

    @property
    def interaction_width(self) -> int:
        n = len(self.table_sizes) + 1
        return n * (n - 1) // 2 + self.embedding_dim


def _mlp(widths: list[int], *, last_relu: bool, device: torch.device | None) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (m, n) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        layers.append(nn.Linear(m, n, device=device))
        if i < len(widths) - 2 or last_relu:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(
        self,
        config: DLRMConfig,
        *,
        device: torch.device | str | None = None,
        table_device: torch.device | str | None = None,
    ) -> None:
        """``table_device``: where the tables live if not on ``device`` ("meta": not built, for sharding)."""
        super().__init__()
        if config.bottom_mlp[-1] != config.embedding_dim:
            raise ValueError("the bottom MLP must end at the embedding dimension")
        self.config = config
        device = torch.device(device) if device is not None else None
        sizes = torch.tensor((0, *config.table_sizes), dtype=torch.int64)
        self.embeddings = nn.Embedding(
            int(sizes.sum()), config.embedding_dim, sparse=config.sparse_gradients, device=table_device or device
        )
        self.register_buffer("_offsets", sizes.cumsum(0)[:-1].to(device), persistent=False)
        self.bottom_mlp = _mlp([config.num_dense, *config.bottom_mlp], last_relu=True, device=device)
        self.top_mlp = _mlp([config.interaction_width, *config.top_mlp], last_relu=False, device=device)
        n = len(config.table_sizes) + 1
        rows, cols = torch.tril_indices(n, n, offset=-1)  # pairs (i, j), i > j, in the reference's order
        self.register_buffer("_pairs", (rows * n + cols).to(device), persistent=False)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        start = 0
        for n in self.config.table_sizes:  # each table's rows as the reference initializes its own table
            bound = math.sqrt(1.0 / n)
            self.embeddings.weight[start : start + n].uniform_(-bound, bound)
            start += n
        for layer in [*self.bottom_mlp, *self.top_mlp]:
            if isinstance(layer, nn.Linear):
                fan_out, fan_in = layer.weight.shape
                layer.weight.normal_(0.0, math.sqrt(2.0 / (fan_in + fan_out)))
                layer.bias.normal_(0.0, math.sqrt(1.0 / fan_out))

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        """``dense`` (B, 13) float, ``sparse`` (B, 26) int64 table rows -> (B,) logits."""
        x = self.bottom_mlp(dense)
        t = torch.cat([x.unsqueeze(1), self.embeddings(sparse + self._offsets)], dim=1)  # (B, 27, d)
        z = torch.bmm(t, t.transpose(1, 2)).flatten(1).index_select(1, self._pairs)  # (B, 351)
        return self.top_mlp(torch.cat([x, z], dim=1)).squeeze(1)


def layer_names(model: DLRM) -> dict[str, str]:
    """Our parameter name -> MLPerf's tensor name (closed_dlrm.yaml): ``embeddings``, ``bottom_mlp_dense1``..."""
    names = {}
    for name, _ in model.named_parameters():
        part = name.split(".")
        if part[0] == "embeddings":  # the 26 tables, one tensor in the reference's list
            names[name] = "embeddings"
        else:
            linear = [i for i, m in enumerate(getattr(model, part[0])) if isinstance(m, nn.Linear)]
            names[name] = f"{part[0]}_dense{linear.index(int(part[1])) + 1}"
    return names
