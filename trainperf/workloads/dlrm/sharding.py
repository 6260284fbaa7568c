"""Model-parallel tables, data-parallel MLPs: the layout of the MLPerf reference's distributed DLRM.

TorchRec shards tables this way (``EmbeddingBagCollection`` with a table-wise plan) but does not run here: its
``fbgemm_gpu`` needs an NVIDIA driver even to import (README.md), so the sharding is written out with
``torch.distributed`` alone, as the reference's ``dlrm_s_pytorch.py --dist-backend`` does it:

- each rank owns whole tables (assigned greedily, largest first, to the rank with the fewest rows), stored
  as row ranges of one sparse ``nn.Embedding`` as in :class:`~trainperf.workloads.dlrm.model.DLRM`;
- a step, every rank sends its batch's ids to every rank (``all_gather``), each owner looks up its tables
  for the whole global batch, and a differentiable ``all_to_all`` (``torch.distributed.nn``) returns each
  rank's rows to it; backward sends the rows' gradients the same way back to their owners;
- the bottom and top MLPs are replicated and wrapped in DDP, which averages their gradients.

Each rank's loss is the mean over its own samples, so an owner receives the sum of W ranks' gradients for
its rows; they are divided by W, which makes a step the same as one process stepping on the global batch
(``tests/distributed/test_dlrm_sharding.py`` checks it). gloo's ``all_to_all`` backward needs tensors of one
shape from every rank, so each owner pads its looked-up rows to the largest table count of any rank.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_nn
import torch.nn.functional as F
from torch import nn

from trainperf.workloads.dlrm.model import DLRM


def assign_tables(sizes: tuple[int, ...], world_size: int) -> list[list[int]]:
    """Table indices per rank: largest table first, each to the rank holding the fewest rows so far."""
    owned: list[list[int]] = [[] for _ in range(world_size)]
    rows = [0] * world_size
    for f in sorted(range(len(sizes)), key=lambda f: (-sizes[f], f)):
        r = min(range(world_size), key=lambda r: (rows[r], len(owned[r]), r))
        owned[r].append(f)
        rows[r] += sizes[f]
    return [sorted(t) for t in owned]


class TableWiseDLRM(nn.Module):
    """A :class:`DLRM` whose tables are spread over the ranks of the default process group."""

    def __init__(self, model: DLRM, *, device: torch.device, device_ids: list[int] | None = None) -> None:
        super().__init__()
        self.config = c = model.config
        self.world, self.rank = dist.get_world_size(), dist.get_rank()
        self.owned = assign_tables(c.table_sizes, self.world)
        mine = self.owned[self.rank]
        self.width = max(len(t) for t in self.owned)  # every rank's rows are padded to this many tables
        sizes = torch.tensor([c.table_sizes[f] for f in mine], dtype=torch.int64)
        self.embeddings = nn.Embedding(
            max(1, int(sizes.sum())), c.embedding_dim, sparse=c.sparse_gradients, device=device
        )
        with torch.no_grad():
            full = model.embeddings.weight
            starts = [0, *torch.tensor(c.table_sizes).cumsum(0).tolist()]
            at = 0
            for f in mine:
                n = c.table_sizes[f]
                if full.is_meta:  # the full tables were never built (a real reference run): the reference's init
                    self.embeddings.weight[at : at + n].uniform_(-math.sqrt(1.0 / n), math.sqrt(1.0 / n))
                else:
                    self.embeddings.weight[at : at + n].copy_(full[starts[f] : starts[f] + n].to(device))
                at += n
        self.register_buffer("_mine", torch.tensor(mine, dtype=torch.int64, device=device), persistent=False)
        self.register_buffer("_offsets", (sizes.cumsum(0) - sizes).to(device), persistent=False)
        # received rows arrive grouped by owner; this puts them back in table order
        order = [f for t in self.owned for f in t]
        self.register_buffer("_to_table_order", torch.tensor(order).argsort().to(device), persistent=False)
        self.register_buffer("_pairs", model._pairs.to(device), persistent=False)
        self.bottom_mlp = nn.parallel.DistributedDataParallel(model.bottom_mlp, device_ids=device_ids)
        self.top_mlp = nn.parallel.DistributedDataParallel(model.top_mlp, device_ids=device_ids)

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        """This rank's ``dense`` (B, 13) and ``sparse`` (B, 26) -> its (B,) logits; every rank must call it
        together (batches may differ in size between ranks: each is padded to the largest)."""
        b = sparse.shape[0]
        counts = [torch.zeros(1, dtype=torch.int64, device=sparse.device) for _ in range(self.world)]
        dist.all_gather(counts, torch.tensor([b], device=sparse.device))
        m = int(max(c.item() for c in counts))
        padded = F.pad(sparse, (0, 0, 0, m - b))  # padding rows look up row 0 and are dropped below
        ids = [torch.empty_like(padded) for _ in range(self.world)]
        dist.all_gather(ids, padded)
        rows = self.embeddings(torch.cat(ids).index_select(1, self._mine) + self._offsets)  # (W*m, k, d)
        if rows.requires_grad and self.world > 1:
            rows.register_hook(lambda g: g / self.world)  # W ranks' mean losses -> the global mean's gradient
        rows = F.pad(rows, (0, 0, 0, self.width - rows.shape[1]))
        out = [torch.empty_like(rows[:m]) for _ in range(self.world)]
        got = dist_nn.all_to_all(out, list(rows.split(m)))
        emb = torch.cat([g[:, : len(t)] for g, t in zip(got, self.owned, strict=True)], dim=1)
        emb = emb[:b].index_select(1, self._to_table_order)  # (B, 26, d)
        x = self.bottom_mlp(dense)
        t = torch.cat([x.unsqueeze(1), emb], dim=1)
        z = torch.bmm(t, t.transpose(1, 2)).flatten(1).index_select(1, self._pairs)
        return self.top_mlp(torch.cat([x, z], dim=1)).squeeze(1)
