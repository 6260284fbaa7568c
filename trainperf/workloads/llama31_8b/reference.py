"""The reference data set's files: C4 en 3.0.1 in Megatron indexed files and the Llama 3.1 tokenizer, as the
reference's README lays them out, and a tiny fixture in that layout for a smoke run.

``<data-dir>/llama31_8b/reference/``::

    c4-train.en_<k>_text_document.{bin,idx}              the training shards (the reference uses the last 256 of 1,024)
    c4-validation-91205-samples.en_text_document.{bin,idx}   the validation file (its first 1,024 sequences are scored)
    tokenizer/tokenizer.json                            the Llama 3.1 tokenizer (Hugging Face's format)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from trainperf.errors import DataError

TRAIN_PATTERN = re.compile(r"^c4-train\.en_(\d+)_text_document\.idx$")
VALIDATION = "c4-validation-91205-samples.en_text_document"
TOKENIZER = Path("tokenizer") / "tokenizer.json"
WHERE = "(mlcommons/training small_llm_pretraining/nemo README: the preprocessed C4 files and the Llama 3.1 tokenizer)"


@dataclass(frozen=True)
class Files:
    train: tuple[Path, ...]  # prefixes, in shard order
    validation: Path  # prefix
    tokenizer: Path


def reference_dir(data_dir: Path, key: str = "llama31_8b") -> Path:
    return Path(data_dir) / key / "reference"


def find(data_dir: Path, key: str = "llama31_8b") -> Files:
    """The reference's files under ``data_dir`` (in ``<key>/reference``: gpt_oss_20b reads the same files), checked
    to exist in pairs (no token is read)."""
    root = reference_dir(data_dir, key)
    if not root.is_dir():
        raise DataError(f"{root}: no {key} reference data; download and place it as the reference does {WHERE}")
    shards = sorted(
        ((int(m[1]), root / p.name.removesuffix(".idx")) for p in root.iterdir() if (m := TRAIN_PATTERN.match(p.name))),
    )
    if not shards:
        raise DataError(f"{root}: no c4-train.en_<k>_text_document.idx training shard {WHERE}")
    for _, prefix in shards:
        if not Path(f"{prefix}.bin").is_file():
            raise DataError(f"{prefix}.idx has no {prefix.name}.bin beside it; copy the shard again")
    validation = root / VALIDATION
    for ext in ("bin", "idx"):
        if not Path(f"{validation}.{ext}").is_file():
            raise DataError(f"{validation}.{ext}: missing; the validation file is part of the reference data {WHERE}")
    tokenizer = root / TOKENIZER
    if not tokenizer.is_file():
        raise DataError(f"{tokenizer}: missing; place the Llama 3.1 tokenizer.json there {WHERE}")
    return Files(train=tuple(p for _, p in shards), validation=validation, tokenizer=tokenizer)


# --- the smoke fixture ------------------------------------------------------------------------------------------
_WORDS = (
    "the model reads a sequence of tokens and learns to predict the next one from those before it while the "
    "benchmark measures how long a system takes to reach the target quality on held out text"
).split()


def write_smoke_fixture(root: Path) -> str:
    """A tiny reference data set in ``root``: a byte-level BPE tokenizer.json trained on generated sentences, two
    training shards and a validation file in Megatron's indexed format (no end-of-document token appended, as the
    reference's preprocessing appends none)."""
    import numpy as np
    from tokenizers import ByteLevelBPETokenizer

    from trainperf.workloads.common.llm import indexed
    from trainperf.workloads.llama31_8b.mini import EOS

    rng = np.random.default_rng(8)
    out = Path(root)  # the folder the run reads as <data-dir>/llama31_8b/reference
    (out / TOKENIZER).parent.mkdir(parents=True, exist_ok=True)

    def document() -> str:
        return " ".join(" ".join(rng.choice(_WORDS, int(rng.integers(6, 14)))) + "." for _ in range(6))

    texts = [document() for _ in range(200)]
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(texts, vocab_size=320, min_frequency=2, special_tokens=[EOS], show_progress=False)
    (out / TOKENIZER).write_text(tok.to_str(), encoding="utf-8")
    vocab = tok.get_vocab_size()

    def encode(part: list[str]) -> list[list[int]]:
        return [e.ids for e in tok.encode_batch(part)]

    indexed.write(out / "c4-train.en_6_text_document", encode(texts[:80]), vocab_size=vocab)
    indexed.write(out / "c4-train.en_7_text_document", encode(texts[80:160]), vocab_size=vocab)
    indexed.write(out / VALIDATION, encode(texts[160:]), vocab_size=vocab)
    return f"2 C4-layout training shards and a validation file (indexed, {vocab}-token byte-level BPE)"
