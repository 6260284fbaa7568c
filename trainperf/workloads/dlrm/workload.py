"""dlrm's workload: click logs, DLRM, SGD with the reference's LR policy, exact AUC over the whole eval set."""

from __future__ import annotations

import dataclasses
import importlib
import shlex
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from trainperf import seeds
from trainperf.contract.workload import Workload
from trainperf.errors import DataError, UsageError
from trainperf.workloads.dlrm import data, generator, preprocess
from trainperf.workloads.dlrm.model import DLRM, DLRMConfig, layer_names

REFERENCE_TABLE_SIZES = data.REFERENCE_TABLE_SIZES
# A reference dry or smoke run (and the contract's one step) trains the reference architecture on a CPU: its
# tables are capped at this many rows (the full ones hold 96 GB; a smoke fixture's dictionaries hold fewer
# values); the MLPs and the interaction are full size.
DRY_RUN_TABLE_ROWS = 10_000


@dataclass(frozen=True, kw_only=True)
class Flavour:
    """What a scale fixes beyond the recipe: the network, its data and how a check run shrinks it."""

    model: DLRMConfig
    # True: the Criteo 1TB files of the reference (its binary form, or the TSV days preprocessed as it does),
    # read batch by batch from disk; False: the mini generator's TSV files, verified and held in memory with
    # its own rows (value % table size).
    criteo_files: bool
    # The rows a dry or smoke run caps each table at (None: the tables are small enough as they are); full
    # tables are built on the meta device in a distributed run, each owner initializing its own.
    check_table_rows: int | None
    reference_names: bool  # weights_initialization names the reference's tensors


FLAVOURS = {
    "reference": Flavour(
        model=DLRMConfig(
            table_sizes=REFERENCE_TABLE_SIZES,
            embedding_dim=128,
            bottom_mlp=(512, 256, 128),
            top_mlp=(1024, 1024, 512, 256, 1),
        ),
        criteo_files=True,
        check_table_rows=DRY_RUN_TABLE_ROWS,
        reference_names=True,
    ),
    "mini": Flavour(
        model=DLRMConfig(
            table_sizes=generator.MINI_TABLE_SIZES, embedding_dim=16, bottom_mlp=(64, 16), top_mlp=(128, 64, 1)
        ),
        criteo_files=False,
        check_table_rows=None,
        reference_names=False,
    ),
}
REFERENCE_DAYS = preprocess.DAYS  # day_0 ... day_23
BINARY_FILES = ("terabyte_processed_train.bin", "terabyte_processed_test.bin")
EVAL_BATCH = 16384  # the reference's --test-mini-batch-size


class DLRMWorkload(Workload):
    DRY_RUN_LOCAL_BATCH = 64
    SWITCHES_NOT_APPLICABLE = {
        "ddp_bucket_mb": "dlrm's MLPs are replicated by its table-wise sharding (sharding.TableWiseDLRM), with DDP's "
        "default buckets"
    }
    _sizes: tuple[int, int] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.flavour = FLAVOURS[self.spec.scale]
        config, cap = self.flavour.model, self.flavour.check_table_rows
        self.full_tables = cap is None or not (self.dry_run or self.smoke)
        if not self.full_tables:
            config = dataclasses.replace(config, table_sizes=tuple(min(n, cap) for n in config.table_sizes))
        self.model_config = config
        self.root = self.data_dir / "dlrm" / self.spec.scale
        self.format = "tsv"
        self.binary_dir = self.root  # where the binary files are read: the user's, or the TSV days' preprocessed form
        self.train: data.ClickLog | None = None
        self.eval: data.ClickLog | None = None

    # --- files ---------------------------------------------------------------------------------------
    def prepare(self) -> None:
        # The evaluation's library, imported before the clock as the reference imports everything at start:
        # imported in the first evaluation it cost about 1.4 s of a 14 s mini run (README, Profile).
        importlib.import_module("sklearn.metrics")
        if not self.flavour.criteo_files:
            problems = generator.verify_mini(self.data_dir)
            if problems:
                raise DataError(f"dlrm mini data: {problems[0]}; {generator.FIX}")
            return
        binary = [self.root / name for name in BINARY_FILES]
        days = [self.root / f"day_{k}" for k in range(REFERENCE_DAYS)]
        if all(p.is_file() for p in binary):
            self.format = "binary"
            for p in binary:
                data.check_binary(p)  # a truncated file is refused before the clock
        elif all(p.is_file() for p in days):
            # The reference's preprocessing (dictionaries, the shuffle across days), kept in root/preprocessed.
            self.format = "tsv"
            made = preprocess.fresh(self.root, days)
            if made is None and self.dist.distributed:  # every rank would write it
                command = f"python -m trainperf.workloads.dlrm.preprocess {shlex.quote(str(self.root))}"
                raise DataError(
                    f"dlrm: the TSV days in {self.root} are not preprocessed yet (or changed since): a distributed run "
                    f"does not preprocess them; run `{command}` first"
                )
            made = made or preprocess.prepare_days(self.root, days)
            self.binary_dir = self.root / preprocess.FOLDER
            over = [j for j, (n, rows) in enumerate(zip(made["counts"], self.model_config.table_sizes, strict=True))
                    if n > rows]  # fmt: skip
            if over:
                j = over[0]
                raise DataError(
                    f"dlrm: categorical feature {j + 1} of {self.root}/day_0 ... day_{REFERENCE_DAYS - 1} has "
                    f"{made['counts'][j]:,} distinct values (after % {preprocess.MAX_IND_RANGE:,}), more than its "
                    f"table of {self.model_config.table_sizes[j]:,} rows: these are not the Criteo 1TB days"
                )
        else:
            raise DataError(
                f"dlrm reference data not found in {self.root}: put the reference's preprocessed "
                f"{' and '.join(BINARY_FILES)} there, or the Criteo 1TB TSV files day_0 ... day_23"
            )

    def load_data(self) -> None:
        sizes = self.model_config.table_sizes
        if not self.flavour.criteo_files:  # the mini scale's own rows, value % table size (generator.py's hashing)
            self.train = data.read_tsv(self.root / generator.TRAIN_FILE, sizes)
            self.eval = data.read_tsv(self.root / generator.EVAL_FILE, sizes)
            self._sizes = (len(self.train), len(self.eval))
        else:  # the reference's binary form, the user's or made from the TSV days in prepare()
            self.train_records = data.open_binary(self.binary_dir / BINARY_FILES[0])
            self.eval_records = data.open_binary(self.binary_dir / BINARY_FILES[1])
            self._sizes = (len(self.train_records), len(self.eval_records))
        if min(self._sizes) == 0:
            raise DataError(f"dlrm: no samples found in {self.root} ({self._sizes[0]} train, {self._sizes[1]} eval)")

    @property
    def train_samples(self) -> int:
        return (self._sizes or (self.spec.train_samples, self.spec.eval_samples))[0]

    @property
    def eval_samples(self) -> int:
        return (self._sizes or (self.spec.train_samples, self.spec.eval_samples))[1]

    # --- model and optimizer ---------------------------------------------------------------------------
    def build_model(self) -> torch.nn.Module:
        # A distributed reference run never holds every table on one rank: they are built on the meta device
        # and each owner initializes its own in ``parallelize``.
        big = self.full_tables and self.flavour.check_table_rows is not None  # tables too big for one rank
        tables = "meta" if big and self.dist.distributed else None
        return DLRM(self.model_config, table_device=tables)

    def parallelize(self, model: torch.nn.Module) -> torch.nn.Module:
        """One process: the model on the device. Several: the reference's layout, whole tables on their owner
        ranks (model-parallel, ``sharding.TableWiseDLRM``) and the MLPs replicated under DDP."""
        if not self.dist.distributed:
            return model.to(self.device)
        from trainperf.workloads.dlrm.sharding import TableWiseDLRM

        model.bottom_mlp.to(self.device)
        model.top_mlp.to(self.device)
        model._pairs = model._pairs.to(self.device)
        ids = [self.dist.local_rank] if self.device.type == "cuda" else None
        return TableWiseDLRM(model, device=self.device, device_ids=ids)

    def reference_tensor_names(self, model: torch.nn.Module) -> list[str]:
        if not self.flavour.reference_names:
            return []
        return sorted(set(layer_names(model).values()))

    def build_optimizer(self, model: torch.nn.Module) -> tuple[Any, Any]:
        r = self.recipe
        groups: list[dict[str, Any]] = [{"params": list(model.parameters())}]
        if r.dense_learning_rate is not None:  # the tables at the base rate, the MLPs at their own
            tables = [p for n, p in model.named_parameters() if n.split(".")[-2] == "embeddings"]
            dense = [p for n, p in model.named_parameters() if n.split(".")[-2] != "embeddings"]
            groups = [{"params": tables}, {"params": dense, "lr": r.dense_learning_rate}]
        # Sparse gradients: torch warns on each step that it skips its (slow) sparse-tensor invariant checks.
        warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly disabled")
        if r.opt_name == "sgd":
            opt = torch.optim.SGD(groups, lr=r.opt_base_learning_rate)
        elif r.opt_name == "adagrad":  # the mini recipe: sparse-gradient Adagrad (README.md: why)
            opt = torch.optim.Adagrad(groups, lr=r.opt_base_learning_rate)
        else:
            raise UsageError(f"dlrm: optimizer {r.opt_name!r} is not supported: sgd (the reference's) or adagrad")
        return opt, torch.optim.lr_scheduler.LambdaLR(opt, lr_policy(r))

    def hparams(self) -> dict[str, Any]:
        out = super().hparams()
        out["sgd_opt_base_learning_rate"] = self.recipe.opt_base_learning_rate
        return out

    # --- training data -------------------------------------------------------------------------------------
    def synthetic_batch(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        g = seeds.torch_generator(self.config.seed, seeds.STREAM_DATA, self.dist.rank)
        n = self.local_batch_size
        dense = torch.log1p(torch.randint(0, 100, (n, data.NUM_DENSE), generator=g).float())
        sizes = torch.tensor(self.model_config.table_sizes)
        sparse = (torch.rand(n, data.NUM_SPARSE, generator=g) * sizes).long()
        return dense, sparse, torch.randint(0, 2, (n,), generator=g).float()

    def train_batches(self) -> Iterator[Any]:
        if self.flavour.criteo_files:
            return self._binary_batches()
        return self._in_memory_batches()

    def _rank_slice(self) -> slice:
        n = self.local_batch_size
        return slice(self.dist.rank * n, (self.dist.rank + 1) * n)

    def _in_memory_batches(self) -> Iterator[Any]:
        """Each epoch a seeded permutation (the same on every rank); each rank takes its slice of every global batch."""
        assert self.train is not None
        log, gb, mine = self.train, self.global_batch_size, self._rank_slice()
        epoch = 0
        while True:
            order = seeds.numpy_rng(self.config.seed, seeds.STREAM_SHUFFLE, epoch).permutation(len(log))
            for b in range(len(log) // gb):
                idx = np.sort(order[b * gb : (b + 1) * gb][mine])
                yield _tensors(data.ClickLog(log.labels[idx], log.dense[idx], log.sparse[idx]))
            epoch += 1

    def _binary_batches(self) -> Iterator[Any]:
        """The reference's --mlperf-bin-shuffle: the order of whole batches is shuffled each epoch."""
        gb, mine, path = self.global_batch_size, self._rank_slice(), self.binary_dir / BINARY_FILES[0]
        batches = len(self.train_records) // gb
        epoch = 0
        while True:
            for b in seeds.numpy_rng(self.config.seed, seeds.STREAM_SHUFFLE, epoch).permutation(batches):
                start = int(b) * gb
                rows = slice(start + mine.start, start + mine.stop)
                yield _tensors(data.binary_records(self.train_records, rows, path, self.model_config.table_sizes))
            epoch += 1

    def loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        dense, sparse, labels = (t.to(self.device, non_blocking=True) for t in batch)
        return F.binary_cross_entropy_with_logits(model(dense, sparse), labels)

    # --- evaluation -----------------------------------------------------------------------------------
    def evaluate(self, model: torch.nn.Module) -> Mapping[str, float]:
        """Exact AUC over the whole evaluation set: each rank scores its shard once, the scores are gathered
        in rank order, and scikit-learn's roc_auc_score computes the AUC of all of them."""
        from sklearn.metrics import roc_auc_score

        scores, labels = self.scores_and_labels(model)
        if labels.min() == labels.max():
            raise DataError("dlrm: the evaluation set holds one class only; its AUC is undefined")
        return {"auc": float(roc_auc_score(labels, scores))}

    @torch.no_grad()
    def scores_and_labels(self, model: torch.nn.Module) -> tuple[np.ndarray, np.ndarray]:
        """Every evaluation sample's logit and label, gathered from all ranks (each sample exactly once)."""
        model.eval()
        scores, labels = [], []
        for dense, sparse, y in self._eval_batches():
            scores.append(model(dense.to(self.device), sparse.to(self.device)).float())
            labels.append(y.to(self.device))
        model.train()
        local_scores = torch.cat(scores) if scores else torch.zeros(0, device=self.device)
        local_labels = torch.cat(labels) if labels else torch.zeros(0, device=self.device)
        all_scores = self.dist.all_gather(local_scores).cpu().double().numpy()
        all_labels = self.dist.all_gather(local_labels).cpu().numpy()
        if len(all_scores) != self.eval_samples:
            raise RuntimeError(f"dlrm: evaluated {len(all_scores)} of {self.eval_samples} samples")
        return all_scores, all_labels

    def _eval_batches(self) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        shard = self.dist.shard(self.eval_samples)  # this rank's samples, each evaluated exactly once
        for i in range(shard.start, shard.stop, EVAL_BATCH):
            rows = slice(i, min(i + EVAL_BATCH, shard.stop))
            if self.eval is not None:
                yield _tensors(data.ClickLog(self.eval.labels[rows], self.eval.dense[rows], self.eval.sparse[rows]))
            else:
                path = self.binary_dir / BINARY_FILES[1]
                yield _tensors(data.binary_records(self.eval_records, rows, path, self.model_config.table_sizes))


def _tensors(log: data.ClickLog) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.from_numpy(log.dense), torch.from_numpy(log.sparse), torch.from_numpy(log.labels)


def lr_policy(r: Any):
    """The reference's LRPolicyScheduler (dlrm_s_pytorch.py:99-133) as a LambdaLR factor of the optimizer step.

    Its scheduler counts steps from 1 (torch's ``_step_count`` after the constructor's own step), so step ``k``
    here (0 at the first optimizer step) is its ``s = k + 1``: a linear warm-up ``s / w`` while ``s < w``; a
    polynomial decay ``((n - (s - d)) / n) ** power`` for ``d <= s < d + n``, never below its 1e-7; otherwise,
    with a decay, the last rate it set is held: the warm-up's last, ``(w - 1) / w``, between warm-up and decay,
    and the decay's last, ``(1 / n) ** power``, after it; without a decay, the base rate. Where the reference
    has no last rate to hold (a decay starting after step 1 with no warm-up: it raises AttributeError), the
    base rate, the rules' "learning rate after warm up and before decay"."""
    warmup, start, steps, power = (
        r.opt_learning_rate_warmup_steps,
        r.lr_decay_start_steps,
        r.sgd_opt_learning_rate_decay_steps,
        r.sgd_opt_learning_rate_decay_poly_power,
    )
    floor = 1e-7 / r.opt_base_learning_rate if r.opt_base_learning_rate > 0 else 0.0

    def factor(step: int) -> float:
        s = step + 1
        if s < warmup:
            return s / warmup
        if steps > 0 and start <= s < start + steps:
            return max(floor, ((steps - (s - start)) / steps) ** power)
        if steps == 0:
            return 1.0
        if s >= start + steps:
            return max(floor, (1 / steps) ** power)
        return (warmup - 1) / warmup if warmup > 1 else 1.0

    return factor
