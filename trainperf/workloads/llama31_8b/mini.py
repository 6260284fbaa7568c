"""The mini llama31_8b data: English prose from Debian's text packages, tokenized by a byte-level BPE trained on it,
written as Megatron indexed files (the reference's on-disk format, :mod:`trainperf.workloads.common.llm.indexed`).

``trainperf data prepare llama31_8b`` reads the documents of bert's mini corpus (Debian ``dict-gcide``,
``wordnet-base``, ``python3-doc``; :mod:`trainperf.workloads.bert.corpus`) and splits them as bert's mini does (about
one document in 25, chosen by a hash of its source and index, goes to validation; a validation document sharing any
sentence with a training document is dropped, so no validation text is trained on). It then trains a byte-level BPE
of ``VOCAB_SIZE`` tokens on the training documents with Hugging Face's ``tokenizers`` (deterministic: the same text
gives the same merges; the file's SHA-256 is in the manifest and checked against the one the target was calibrated
on), appends the end-of-text token to every document (as the reference's preprocessing appends the end of document)
and writes under ``<data-dir>/llama31_8b/mini``:

- ``tokenizer.json``: the tokenizer (Hugging Face's format, which the reference scale reads too),
- ``mini-train_text_document.{bin,idx}`` and ``mini-validation_text_document.{bin,idx}``,
- ``manifest.json``: every file's size and SHA-256, the settings, and the non-learner's baseline: the log-perplexity
  of the unigram model (training-set token frequencies, add-one smoothed) on the validation sequences the mini
  evaluates.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from trainperf.data import verified
from trainperf.errors import DataError
from trainperf.fileio import atomic_write_text
from trainperf.workloads.bert import corpus
from trainperf.workloads.bert.mini import split_documents
from trainperf.workloads.common.llm import indexed

GENERATOR = "trainperf.workloads.llama31_8b.mini v1"
VOCAB_SIZE = 4096
SEQ_LEN = 128  # tokens a training and validation sequence holds (the reference: 8,192)
EVAL_SEQUENCES = 512  # the first 512 validation sequences (the reference: its first 1,024)
EOS = "<|endoftext|>"
TOKENIZER, TRAIN_PREFIX, VALID_PREFIX, MANIFEST = (
    "tokenizer.json",
    "mini-train_text_document",
    "mini-validation_text_document",
    "manifest.json",
)
FILES = (TOKENIZER, *(f"{p}.{e}" for p in (TRAIN_PREFIX, VALID_PREFIX) for e in ("bin", "idx")))
# The tokenizer the mini target was calibrated with (README.md); another one (a different tokenizers release that
# merges differently) makes other data, and prepare says so.
CALIBRATED_TOKENIZER_SHA256 = "912b2c055b7e069ca02b2bf219a6089457d19d9914bbf3ebc63ccc00d44618a8"
FIX = "run `trainperf data prepare llama31_8b` (it rebuilds the mini data)"


def mini_dir(data_dir: Path) -> Path:
    return Path(data_dir) / "llama31_8b" / "mini"


def _header() -> dict:
    return {"generator": GENERATOR, "vocab_size": VOCAB_SIZE, "seq_len": SEQ_LEN, "eval_sequences": EVAL_SEQUENCES}


def read_manifest(data_dir: Path) -> dict:
    return verified.read_manifest(mini_dir(data_dir) / MANIFEST, FIX)


def verify_mini(data_dir: Path, *, trust_cache: bool = False) -> list[str]:
    """Problems with the prepared files (none: ready)."""
    return verified.check_manifest(mini_dir(data_dir) / MANIFEST, FIX, _header(), FILES, trust_cache=trust_cache)


def train_tokenizer(texts: list[str]):
    """A byte-level BPE of VOCAB_SIZE tokens (the end-of-text token first) trained on ``texts``."""
    from tokenizers import ByteLevelBPETokenizer

    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(texts, vocab_size=VOCAB_SIZE, min_frequency=2, special_tokens=[EOS], show_progress=False)
    return tok


def _texts(docs: list[corpus.Document]) -> list[str]:
    return [" ".join(d) for d in docs]


def _encode(tok, texts: list[str]) -> list[list[int]]:
    eos = tok.token_to_id(EOS)
    return [[*e.ids, eos] for e in tok.encode_batch(texts)]


def unigram_log_perplexity(train: indexed.IndexedDataset, valid: indexed.IndexedDataset) -> float:
    """The log-perplexity that a model knowing only the training tokens' frequencies gets on the evaluated
    validation sequences (each sequence's next tokens, as the evaluation scores them)."""
    counts = np.bincount(np.asarray(train.tokens, dtype=np.int64), minlength=VOCAB_SIZE) + 1.0
    logp = np.log(counts / counts.sum())
    flat = np.concatenate([valid[i] for i in range(len(valid))]).astype(np.int64)
    n = min(len(flat), EVAL_SEQUENCES * SEQ_LEN + 1)
    return float(-logp[flat[1:n]].mean())


def prepare_mini(data_dir: Path) -> list[Path]:
    """Build the tokenizer and the indexed files (idempotent: nothing is rewritten when they verify)."""
    root = mini_dir(data_dir)
    if not verify_mini(data_dir):
        return []
    corpus.require_sources("llama31_8b mini data")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DataError(f"cannot create data folder {root} ({e.strerror}): choose another with --data-dir") from None
    train_docs, valid_docs, sources = split_documents(corpus.all_documents())
    tok = train_tokenizer(_texts(train_docs))
    atomic_write_text(root / TOKENIZER, tok.to_str() + "\n")
    indexed.write(root / TRAIN_PREFIX, _encode(tok, _texts(train_docs)), vocab_size=VOCAB_SIZE)
    indexed.write(root / VALID_PREFIX, _encode(tok, _texts(valid_docs)), vocab_size=VOCAB_SIZE)
    train = indexed.IndexedDataset(root / TRAIN_PREFIX, vocab_size=VOCAB_SIZE)
    valid = indexed.IndexedDataset(root / VALID_PREFIX, vocab_size=VOCAB_SIZE)
    if valid.total_tokens < EVAL_SEQUENCES * SEQ_LEN + 1:
        raise DataError(f"llama31_8b mini data: {valid.total_tokens} validation tokens, too few for the evaluation")
    baseline = unigram_log_perplexity(train, valid)
    files = {n: {"bytes": (root / n).stat().st_size, "sha256": verified.sha256(root / n)} for n in FILES}
    manifest = {
        **_header(),
        "documents": {"training": len(train), "validation": len(valid)},
        "tokens": {"training": train.total_tokens, "validation": valid.total_tokens},
        "sources": sources,
        "unigram_log_perplexity": round(baseline, 4),
        "uniform_log_perplexity": round(math.log(VOCAB_SIZE), 4),
        "files": files,
    }
    atomic_write_text(root / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    print(
        f"llama31_8b mini: {train.total_tokens:,} training and {valid.total_tokens:,} validation tokens in "
        f"{len(train):,} and {len(valid):,} documents; log-perplexity of the unigram model {baseline:.3f}, of the "
        f"uniform guess {math.log(VOCAB_SIZE):.3f}"
    )
    if files[TOKENIZER]["sha256"] != CALIBRATED_TOKENIZER_SHA256:
        print(
            "llama31_8b mini: note: this tokenizer differs from the one the mini target was calibrated with "
            "(another tokenizers release?): the data differs, and the calibration in the README does not apply as is"
        )
    return [root / n for n in (*FILES, MANIFEST)]


def tokenizer_sha256(data_dir: Path) -> str:
    return read_manifest(data_dir)["files"][TOKENIZER]["sha256"]
