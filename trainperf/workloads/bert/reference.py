"""bert's reference data: where the packed HDF5 files and the reference checkpoint live, and the smoke fixture.

Layout under ``<data-dir>/bert/reference`` (the reference's own file names fit):

- ``training/*.hdf5`` (or ``*.h5``): the training shards (Wikipedia 2020-01-01, 512 tokens, 76 predictions),
- ``eval/*.hdf5``: the 10,000-example evaluation set,
- ``checkpoint/model.ckpt-28252.pt``: the reference checkpoint as a PyTorch state dict, its keys either the
  reference TensorFlow names (``bert/encoder/layer_0/attention/self/query/kernel``, kernels stored [in, out]
  as TensorFlow stores them) or Hugging Face ``BertForPreTraining`` names; optionally inside ``{"model": ...}``.
  TensorFlow's own checkpoint files are not read here (no reader of them without TensorFlow is kept up); convert
  them once where TensorFlow is installed (README.md beside this file says how).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainperf.errors import DataError
from trainperf.workloads.bert import data

CHECKPOINT = "checkpoint/model.ckpt-28252.pt"
SMOKE_SHAPE = (64, 10)  # the fixture's sequence and predictions (the reference's: 512 and 76)
SMOKE_EXAMPLES = (16, 8)  # training, evaluation


@dataclass
class Shards:
    train_files: list[Path]
    train_counts: list[int]
    eval_files: list[Path]
    checkpoint: Path
    vocab_size: int

    @property
    def train_examples(self) -> int:
        return sum(self.train_counts)

    def read_in_order(self, rng: np.random.Generator) -> Iterator[data.Examples]:
        """Every training shard once, in a seeded order, each checked as it is read."""
        for k in rng.permutation(len(self.train_files)):
            yield data.read_examples(self.train_files[int(k)], vocab_size=self.vocab_size)


def _hdf5_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*") if p.suffix in (".hdf5", ".h5") and p.is_file())


def find(data_dir: Path, *, vocab_size: int) -> Shards:
    """The reference files, with every shard's fields and shapes checked (no example is read; untimed)."""
    root = Path(data_dir) / "bert" / "reference"
    train, evaluation = _hdf5_files(root / "training"), _hdf5_files(root / "eval")
    if not train or not evaluation:
        raise DataError(
            f"bert reference data not found in {root}: put the packed HDF5 training shards in {root / 'training'} "
            f"and the evaluation set in {root / 'eval'} (README.md beside bert/workload.py)"
        )
    checkpoint = root / CHECKPOINT
    if not checkpoint.is_file():
        raise DataError(
            f"bert reference checkpoint not found: {checkpoint}; convert the reference's model.ckpt-28252 to a "
            "PyTorch state dict there (README.md beside bert/workload.py)"
        )
    counts = [data.check_file(p, vocab_size=vocab_size) for p in train]
    for p in evaluation:
        data.read_examples(p, vocab_size=vocab_size)  # small: every value is checked before the clock
    return Shards(train, counts, evaluation, checkpoint, vocab_size)


def load_checkpoint(model, path: Path) -> None:
    """Load a reference checkpoint (TensorFlow or Hugging Face names) into ``model``; every tensor must be there."""
    import torch

    from trainperf.workloads.bert.model import tf_is_transposed, tf_name

    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as e:  # torch raises several kinds for a file that is not a checkpoint
        raise DataError(
            f"{path}: not a readable PyTorch checkpoint ({type(e).__name__}: {e}); convert it again"
        ) from None
    if isinstance(state, dict) and isinstance(state.get("model"), dict):
        state = state["model"]
    if not isinstance(state, dict):
        raise DataError(f"{path}: holds a {type(state).__name__}, not a state dict of tensors")
    own = dict(model.named_parameters())
    loaded = {}
    for name, param in own.items():
        hf_keys = [name] + (["cls.predictions.decoder.bias"] if name == "cls.predictions.bias" else [])
        tensor, transposed = None, False
        for key in hf_keys:
            if key in state:
                tensor = state[key]
                break
        if tensor is None and tf_name(name) in state:
            tensor, transposed = state[tf_name(name)], tf_is_transposed(name)
        if tensor is None:
            raise DataError(f"{path}: tensor {tf_name(name)!r} ({name}) is missing; the checkpoint is not BERT-large's")
        tensor = torch.as_tensor(tensor)
        if transposed:
            tensor = tensor.t()
        if tuple(tensor.shape) != tuple(param.shape):
            raise DataError(
                f"{path}: tensor {tf_name(name)!r} has shape {tuple(tensor.shape)}, the model's is {tuple(param.shape)}"
            )
        if not torch.isfinite(tensor).all():
            raise DataError(f"{path}: tensor {tf_name(name)!r} holds NaN or infinite values")
        loaded[name] = tensor.to(param.dtype)
    with torch.no_grad():
        for name, param in own.items():
            param.copy_(loaded[name])


def write_smoke_fixture(root: Path) -> str:
    """A tiny reference data set: two training shards and an evaluation file in the packed HDF5 layout (random
    token ids of BERT's 30,522-token vocabulary, 64 tokens per example), and a reference checkpoint with
    TensorFlow names, stored in half precision to keep it small (random BERT-large weights)."""
    import torch

    from trainperf.workloads.bert.data import SPECIAL_TOKENS, Masking, make_examples, write_examples
    from trainperf.workloads.bert.model import BERT_LARGE, BertForPreTraining, tf_is_transposed, tf_name

    rng = np.random.default_rng(7)
    seq, npred = SMOKE_SHAPE
    special = {"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103}  # the uncased vocabulary's
    assert set(special) == set(SPECIAL_TOKENS)
    masking = Masking(max_seq_length=seq, max_predictions=npred)

    def documents(n: int) -> list[list[list[int]]]:
        return [
            [list(rng.integers(1000, BERT_LARGE.vocab_size, int(rng.integers(8, 20)))) for _ in range(4)]
            for _ in range(n)
        ]

    n_train, n_eval = SMOKE_EXAMPLES
    train = make_examples(
        documents(n_train), masking=masking, special=special, vocab_size=BERT_LARGE.vocab_size, rng=rng
    )
    evaluation = make_examples(
        documents(n_eval), masking=masking, special=special, vocab_size=BERT_LARGE.vocab_size, rng=rng
    )
    half = len(train) // 2
    write_examples(root / "training" / "part-00000-of-00002.hdf5", train.take(slice(0, half)))
    write_examples(root / "training" / "part-00001-of-00002.hdf5", train.take(slice(half, None)))
    write_examples(root / "eval" / "eval_10k.hdf5", evaluation)
    torch.manual_seed(7)
    model = BertForPreTraining(BERT_LARGE)
    state = {
        tf_name(n): (p.detach().t() if tf_is_transposed(n) else p.detach()).half().contiguous()
        for n, p in model.named_parameters()
    }
    (root / "checkpoint").mkdir(parents=True, exist_ok=True)
    torch.save(state, root / CHECKPOINT)
    return (
        f"{len(train)} training examples in 2 shards and {len(evaluation)} evaluation examples of {seq} tokens "
        "(packed HDF5), a BERT-large checkpoint with the reference's TensorFlow names"
    )
