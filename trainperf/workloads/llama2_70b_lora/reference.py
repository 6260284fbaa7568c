"""The reference's files: GovReport as its preprocessing left it (two parquet files of token ids and labels) and the
base model's checkpoint, laid out as the reference's run_and_time.sh reads them, and a tiny fixture in that layout.

``<data-dir>/llama2_70b_lora/reference/``::

    scrolls_gov_report_8k/train-00000-of-00001.parquet        3,901 sequences   (scripts/train.py: load_dataset
    scrolls_gov_report_8k/validation-00000-of-00001.parquet   173 sequences      "parquet", data_files=...)
    Llama2-70b-fused-qkv-mlperf/                              config.json, *.safetensors, model.safetensors.index.json

Each parquet row holds ``input_ids`` (Llama 2 token ids: "### Summarize the following text:\\n {document}\\n ###
Summary:\\n {summary}</s>", at most 8,192 of them), ``labels`` (the same ids, -100 where no loss is taken: the
reference's preprocessing masks the prompt, the document and the final </s> in the evaluation's labels,
scripts/utils.py:58-66) and optionally
``attention_mask`` (ones, then zeros for right padding). The model predicts each position's next token, scored where
the next position's label is not -100, as Hugging Face's causal-LM loss does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainperf.errors import DataError

DATASET, MODEL = "scrolls_gov_report_8k", "Llama2-70b-fused-qkv-mlperf"
TRAIN, VALIDATION = "train-00000-of-00001.parquet", "validation-00000-of-00001.parquet"
IGNORE = -100  # labels that take no loss (Hugging Face's ignore_index)
WHERE = "(mlcommons/training llama2_70b_lora README: the preprocessed GovReport and the fused-qkv Llama 2 70B)"


@dataclass(frozen=True)
class Files:
    train: Path
    validation: Path
    checkpoint: Path  # the model folder


def reference_dir(data_dir: Path) -> Path:
    return Path(data_dir) / "llama2_70b_lora" / "reference"


def find(data_dir: Path) -> Files:
    root = reference_dir(data_dir)
    if not root.is_dir():
        raise DataError(f"{root}: no llama2_70b_lora reference data; place it as the reference downloads it {WHERE}")
    files = Files(root / DATASET / TRAIN, root / DATASET / VALIDATION, root / MODEL)
    for path in (files.train, files.validation):
        if not path.is_file():
            raise DataError(f"{path}: missing; the GovReport parquet files are part of the reference data {WHERE}")
    return files


@dataclass(frozen=True)
class Sequences:
    """One split: each sequence's token ids and labels (int64), in file order."""

    path: Path
    ids: list[np.ndarray]
    labels: list[np.ndarray]

    def __len__(self) -> int:
        return len(self.ids)


def count_rows(path: Path) -> int:
    """The rows of a parquet file, from its footer (no row is read); a clear error when it is not parquet."""
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(path)
    except Exception as e:  # pyarrow's ArrowInvalid for a file that is not parquet
        raise DataError(f"{path}: not a parquet file ({e}); copy the reference's GovReport files again") from None
    names = set(meta.schema_arrow.names)
    if not {"input_ids", "labels"} <= names:
        raise DataError(f"{path}: columns {sorted(names)}; the reference's GovReport files hold input_ids and labels")
    return meta.metadata.num_rows


def _lists(table, column: str, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, flat values) of a list column (no Python object per token)."""
    import pyarrow as pa

    col = table.column(column).combine_chunks()
    if not (pa.types.is_list(col.type) or pa.types.is_large_list(col.type)) or not pa.types.is_integer(
        col.type.value_type
    ):
        raise DataError(f"{path}: column {column} is {col.type}, not lists of integers")
    if col.null_count:
        raise DataError(f"{path}: column {column} has empty (null) rows")
    offsets = col.offsets.to_numpy().astype(np.int64)
    return offsets, col.values.to_numpy(zero_copy_only=False).astype(np.int64)[offsets[0] : offsets[-1]]


def read(path: Path, *, vocab_size: int, max_len: int) -> Sequences:
    """The split's sequences, every one checked: ids within the vocabulary, labels -100 or the id itself, right
    padding only, at most ``max_len`` tokens, at least one scored next token."""
    import pyarrow.parquet as pq

    count_rows(path)
    table = pq.read_table(path, columns=None)
    offsets, ids = _lists(table, "input_ids", path)
    lab_offsets, labels = _lists(table, "labels", path)
    if not np.array_equal(offsets - offsets[0], lab_offsets - lab_offsets[0]):
        raise DataError(f"{path}: a row's labels are not as long as its input_ids")
    lengths = np.diff(offsets)
    if "attention_mask" in table.column_names:
        m_offsets, mask = _lists(table, "attention_mask", path)
        if not np.array_equal(offsets - offsets[0], m_offsets - m_offsets[0]) or not np.isin(mask, (0, 1)).all():
            raise DataError(f"{path}: attention_mask is not a row of ones and zeros as long as input_ids")
        starts = offsets[:-1] - offsets[0]
        lengths = np.add.reduceat(mask, starts) if len(mask) else lengths
        for r in range(len(starts)):  # padding on the right only: ones, then zeros
            if mask[starts[r] : starts[r] + lengths[r]].min(initial=1) == 0:
                raise DataError(f"{path}: row {r}'s attention_mask has a zero before a one (left or inner padding)")
    if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
        bad = int(ids.max() if ids.max() >= vocab_size else ids.min())
        raise DataError(
            f"{path}: token id {bad} lies outside the model's vocabulary of {vocab_size}; the file was tokenized "
            "with another tokenizer than Llama 2's"
        )
    if not ((labels == IGNORE) | (labels == ids)).all():
        raise DataError(f"{path}: a label is neither -100 nor its position's token id (labels are not shifted)")
    seq_ids, seq_labels = [], []
    for r, n in enumerate(lengths):
        a = int(offsets[r] - offsets[0])
        if not 2 <= n <= max_len:
            raise DataError(f"{path}: row {r} holds {n} tokens; the reference's sequences hold 2 to {max_len}")
        if not (labels[a + 1 : a + n] != IGNORE).any():
            raise DataError(f"{path}: row {r} has no scored token (every label after the first is -100)")
        seq_ids.append(ids[a : a + n])
        seq_labels.append(labels[a : a + n])
    return Sequences(path, seq_ids, seq_labels)


# --- the smoke fixture ------------------------------------------------------------------------------------------
def _records(rng: np.random.Generator, n: int, *, mask_all_prompts: bool) -> dict[str, list[list[int]]]:
    """GovReport-shaped rows: <s>, the prompt's tokens, a document, the summary marker, a summary (the document's
    opening words), </s>; labels mask the prompt and document (validation also the final </s>, as the reference's
    evaluation labels do)."""
    bos, eos = 1, 2
    prompt, marker = [835, 6991, 3034, 675, 278, 1494, 1426, 29901, 13], [13, 835, 6991, 29901, 13]  # fixed ids
    words = np.arange(1000, 1400)
    rows: dict[str, list[list[int]]] = {"input_ids": [], "attention_mask": [], "labels": []}
    for _ in range(n):
        doc = rng.choice(words, int(rng.integers(80, 160))).tolist()
        summary = doc[: int(rng.integers(12, 24))]
        ids = [bos, *prompt, *doc, *marker, *summary, eos]
        scored = len(ids) - len(summary) - 1
        labels = [IGNORE] * scored + ids[scored:]
        if mask_all_prompts:
            labels[-1] = IGNORE
        rows["input_ids"].append(ids)
        rows["attention_mask"].append([1] * len(ids))
        rows["labels"].append(labels)
    return rows


def write_smoke_fixture(root: Path) -> str:
    """A tiny reference data set in ``root``: GovReport-format parquet files (24 training and 8 validation rows)
    and a checkpoint of the ``debug`` flavour in the reference's layout (two safetensors shards and their index)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import torch

    from trainperf.workloads.common.llm.model import Decoder
    from trainperf.workloads.llama2_70b_lora.checkpoint import config_of, to_reference, write
    from trainperf.workloads.llama2_70b_lora.model import FLAVOURS

    out = Path(root)  # the folder the run reads as <data-dir>/llama2_70b_lora/reference
    (out / DATASET).mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(70)
    for name, n, masked in ((TRAIN, 24, False), (VALIDATION, 8, True)):
        pq.write_table(pa.table(_records(rng, n, mask_all_prompts=masked)), out / DATASET / name)
    args = FLAVOURS["debug"]
    torch.manual_seed(70)
    model = Decoder(args)
    state = {n: p.detach() for n, p in model.named_parameters()}
    tensors = {n: t.to(torch.bfloat16) for n, t in to_reference(state).items()}
    config = config_of(args)
    write(out / MODEL, tensors, config)
    return f"GovReport-format parquet (24 + 8 rows) and a {args.n_layers}-layer fused-qkv checkpoint in safetensors"
