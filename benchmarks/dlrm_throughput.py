"""Training throughput (samples/s) of the mini dlrm: trainperf's step against a plain PyTorch DLRM loop.

    python benchmarks/dlrm_throughput.py [--steps 200] [--repeats 5]

Both rows train on the same real mini batches (the first ``steps`` global batches of the prepared data, held
in memory, so no loading is timed) with the mini recipe's Adagrad learning rates:

- ``trainperf``: the dlrm workload's model (the 26 tables as row ranges of one sparse ``nn.Embedding``, one
  lookup a step) through the harness's ``Stepper`` (loss, backward, optimizer, LR policy, the run's
  bookkeeping).
- ``plain loop``: the reference repository's model layout, written out here as its ``dlrm_s_pytorch.py``
  builds it: 26 ``nn.EmbeddingBag(mode="sum", sparse=True)``, one call per table with offsets of bags of
  one id, the same MLPs and dot interaction, and a bare ``zero_grad / loss / backward / step`` loop.

Repetitions alternate between the two rows; the script prints each row's median and the ratio of medians
(trainperf / plain): the machine is shared and noisy, so only the ratio in one session means much.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from trainperf import registry
from trainperf.cli import default_data_dir
from trainperf.dist import DistContext
from trainperf.harness.runner import RunObserver, seed_everything
from trainperf.harness.schedule import Schedule
from trainperf.harness.steps import Stepper
from trainperf.spec import RunConfig


class PlainDLRM(nn.Module):
    """The reference repository's DLRM layout: one EmbeddingBag per table, looked up table by table."""

    def __init__(self, sizes: tuple[int, ...], dim: int, bottom: tuple[int, ...], top: tuple[int, ...]) -> None:
        super().__init__()
        self.tables = nn.ModuleList(nn.EmbeddingBag(n, dim, mode="sum", sparse=True) for n in sizes)
        self.bottom = nn.Sequential(
            *itertools.chain.from_iterable(
                (nn.Linear(m, n), nn.ReLU()) for m, n in zip((13, *bottom[:-1]), bottom, strict=True)
            )
        )
        k = len(sizes) + 1
        width = k * (k - 1) // 2 + dim
        layers: list[nn.Module] = []
        for i, (m, n) in enumerate(zip((width, *top[:-1]), top, strict=True)):
            layers += [nn.Linear(m, n)] + ([nn.ReLU()] if i < len(top) - 1 else [])
        self.top = nn.Sequential(*layers)
        self.li, self.lj = torch.tril_indices(k, k, offset=-1)

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        x = self.bottom(dense)
        offsets = torch.arange(sparse.shape[0])
        ly = [t(sparse[:, f].contiguous(), offsets) for f, t in enumerate(self.tables)]
        t = torch.stack([x, *ly], dim=1)
        z = torch.bmm(t, t.transpose(1, 2))[:, self.li, self.lj]
        return self.top(torch.cat([x, z], dim=1)).squeeze(1)


def optimizer(model: nn.Module, tables: list[nn.Parameter], recipe) -> torch.optim.Optimizer:
    dense = [p for p in model.parameters() if all(p is not t for t in tables)]
    groups = [{"params": tables}, {"params": dense, "lr": recipe.dense_learning_rate}]
    return torch.optim.Adagrad(groups, lr=recipe.opt_base_learning_rate)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=200, help="timed steps per repetition (default 200)")
    p.add_argument("--repeats", type=int, default=5, help="alternating repetitions per row (default 5)")
    a = p.parse_args()
    torch.set_num_threads(2)
    seed_everything(0)
    spec, recipe = registry.get_spec("dlrm", "mini"), registry.default_recipe("dlrm", "mini")
    w = registry.workload_class("dlrm")(
        spec, recipe, RunConfig(seed=100001), data_dir=default_data_dir(), dist=DistContext()
    )
    w.prepare()
    w.load_data()
    batches = list(itertools.islice(w.train_batches(), a.steps))

    model = w.parallelize(w.build_model())
    opt, sched = w.build_optimizer(model)
    stepper = Stepper(model, w, opt, sched, RunObserver(), Schedule.for_run(spec, w, dry_run_steps=1))

    c = w.model_config
    plain = PlainDLRM(c.table_sizes, c.embedding_dim, c.bottom_mlp, c.top_mlp)
    plain_opt = optimizer(plain, [t.weight for t in plain.tables], recipe)

    def ours() -> None:
        for b in batches:
            stepper.step([b])

    def reference_loop() -> None:
        for dense, sparse, labels in batches:
            plain_opt.zero_grad()
            F.binary_cross_entropy_with_logits(plain(dense, sparse), labels).backward()
            plain_opt.step()

    rows = {
        "trainperf (one sparse Embedding, harness Stepper)": ours,
        "plain loop (26 EmbeddingBag, reference layout)": reference_loop,
    }
    rates: dict[str, list[float]] = {name: [] for name in rows}
    for fn in rows.values():  # warm-up
        fn()
    for _ in range(a.repeats):
        for name, fn in rows.items():
            t = time.perf_counter()
            fn()
            rates[name].append(len(batches) * w.global_batch_size / (time.perf_counter() - t))
    med = {name: statistics.median(r) for name, r in rates.items()}
    print(f"dlrm mini, batch {w.global_batch_size}, {len(batches)} steps x {a.repeats} repetitions (median samples/s)")
    for name, r in rates.items():
        print(f"  {name:52s} {med[name]:10.0f}   ({', '.join(f'{x:.0f}' for x in r)})")
    ours_name, plain_name = rows
    print(f"  ratio trainperf / plain: {med[ours_name] / med[plain_name]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
