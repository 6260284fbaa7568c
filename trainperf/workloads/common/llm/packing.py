"""Sequences packed from an indexed data set's documents, as Megatron's GPT data set builds them.

The documents (each ending in the end-of-text token the preprocessing appended) are laid end to end in a given
order; sample ``i`` is the ``seq_len + 1`` tokens from ``i * seq_len`` on, so a sample may span documents and two
neighbouring samples share one token: the model reads a sample's first ``seq_len`` tokens and is scored on predicting
its last ``seq_len``. The training order shuffles the documents, then the samples, with the run's seeded streams;
validation keeps the documents in their order and takes the first sequences.
"""

from __future__ import annotations

import numpy as np

from trainperf.workloads.common.llm.indexed import IndexedDataset


class PackedSequences:
    """The samples of ``seq_len + 1`` tokens of ``data``'s documents laid out in ``order``."""

    def __init__(self, data: IndexedDataset, seq_len: int, order: np.ndarray | None = None) -> None:
        self.data, self.seq_len = data, seq_len
        self.order = np.arange(len(data)) if order is None else np.asarray(order)
        self.ends = np.cumsum(data.lengths[self.order].astype(np.int64))  # where each laid-out document ends
        total = int(self.ends[-1]) if len(self.ends) else 0
        self.count = max(0, (total - 1) // seq_len)

    def __len__(self) -> int:
        return self.count

    def sample(self, i: int) -> np.ndarray:
        """The ``seq_len + 1`` tokens of sample ``i`` (int64)."""
        if not 0 <= i < self.count:
            raise IndexError(f"sample {i} of {self.count}")
        start, stop = i * self.seq_len, i * self.seq_len + self.seq_len + 1
        d = int(np.searchsorted(self.ends, start, side="right"))
        pieces, pos = [], start
        while pos < stop:
            doc_start = int(self.ends[d - 1]) if d else 0
            tokens = self.data[int(self.order[d])]
            take = tokens[pos - doc_start : min(stop, int(self.ends[d])) - doc_start]
            pieces.append(take)
            pos += len(take)
            d += 1
        return np.concatenate(pieces).astype(np.int64)

    def batch(self, indices: np.ndarray) -> np.ndarray:
        """Samples ``indices`` stacked: (len(indices), seq_len + 1) int64."""
        if len(indices) == 0:
            return np.zeros((0, self.seq_len + 1), dtype=np.int64)
        return np.stack([self.sample(int(i)) for i in indices])
