"""The mini llama2_70b_lora data: Linux manual pages made into the reference's summarization task, in the reference's
own file format (GovReport's parquet files of ``input_ids`` and ``labels``, :mod:`.reference`), and the base model it
fine-tunes (:mod:`.base`).

``trainperf data prepare llama2_70b_lora`` reads the man-pages project's pages that Debian's ``manpages`` and
``manpages-dev`` install (:mod:`.manpages`: each page's DESCRIPTION is a document, its NAME line the summary), puts
a page in validation when the first 8 bytes of the SHA-256 of its file name are 0 modulo 10 (about one page in ten,
the same pages on every machine) and drops a validation page whose summary or description a training page has (so
no evaluated text is trained on). Each page becomes one sequence of at most ``SEQ_LEN`` tokens of llama31_8b's mini
byte-level BPE, laid out as the reference's preprocessing lays out a GovReport example::

    ### Summarize the following text:\\n {description}\\n ### Summary:\\n {summary}<|endoftext|>

the description cut to the tokens that leave room for the summary (a page whose summary takes more than
``MAX_SUMMARY_TOKENS`` is dropped). The labels are -100 on the prompt and the description, the token itself on the
summary and (training only, as the reference's evaluation labels mask it) the end-of-text token: the loss is the
summary's, in training too (the reference's preprocessing trains on the whole text: README.md). Under
``<data-dir>/llama2_70b_lora/mini``: ``manpages/train-00000-of-00001.parquet``,
``manpages/validation-00000-of-00001.parquet``, ``manifest.json`` (every file's size and SHA-256, the pages' project
version, the tokenizer's SHA-256, and what a model that learns nothing gets: the unigram model of the training
summaries' tokens scored on the validation summaries) and ``base/`` (the base checkpoint).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from trainperf.data import verified
from trainperf.errors import DataError
from trainperf.fileio import atomic_write_text
from trainperf.workloads.llama2_70b_lora import manpages
from trainperf.workloads.llama2_70b_lora.reference import IGNORE, TRAIN, VALIDATION
from trainperf.workloads.llama31_8b import mini as llama_mini

GENERATOR = "trainperf.workloads.llama2_70b_lora.mini v1"
SEQ_LEN = 128  # tokens a sequence holds at most (the reference: 8,192)
MAX_SUMMARY_TOKENS = 40  # longer NAME lines (CPU_SET(3) names 21 macros) are dropped
MIN_DOCUMENT_TOKENS = 16  # a description shorter than this says too little to summarize
VALIDATION_EVERY = 10  # a page goes to validation when its name's hash is 0 modulo this
# The reference's text around a document and its summary (scripts/utils.py:44), each of which follows a space.
PROMPT, MARKER = "### Summarize the following text:\n", "\n ### Summary:\n"
FOLDERS = tuple(f"man{i}" for i in range(1, 9))  # the project's pages: manpages (1, 4-8) and manpages-dev (2, 3)
DATASET, MANIFEST = "manpages", "manifest.json"
FILES = (f"{DATASET}/{TRAIN}", f"{DATASET}/{VALIDATION}")
FIX = "run `trainperf data prepare llama2_70b_lora` (it builds the mini data and trains its base model)"


def mini_dir(data_dir: Path) -> Path:
    return Path(data_dir) / "llama2_70b_lora" / "mini"


def _header() -> dict:
    return {"generator": GENERATOR, "seq_len": SEQ_LEN, "max_summary_tokens": MAX_SUMMARY_TOKENS}


def read_manifest(data_dir: Path) -> dict:
    return verified.read_manifest(mini_dir(data_dir) / MANIFEST, FIX)


def verify_data(data_dir: Path, *, trust_cache: bool = False) -> list[str]:
    """Problems with the prepared parquet files (none: ready)."""
    root = mini_dir(data_dir)
    try:
        manifest = read_manifest(data_dir)
    except DataError as e:
        return [str(e).split(": run")[0]]
    if {k: manifest.get(k) for k in _header()} != _header():
        return [f"{root / MANIFEST} was written by another generator version or settings"]
    try:
        tokens = llama_mini.tokenizer_sha256(data_dir)
    except DataError as e:
        return [str(e).split(": run")[0]]
    if manifest.get("tokenizer_sha256") != tokens:
        return [f"{root / MANIFEST}: tokenized with another tokenizer than {llama_mini.mini_dir(data_dir)}'s"]
    files = manifest.get("files")
    if not isinstance(files, dict) or set(files) != set(FILES):
        return [f"{root / MANIFEST} does not list the mini files"]
    expected = {n: verified.Expected(sha256=e.get("sha256", ""), size=e.get("bytes")) for n, e in files.items()}
    return verified.check_files(root, expected, trust_cache=trust_cache)


def is_validation(name: str) -> bool:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") % VALIDATION_EVERY == 0


def split(pages: list[manpages.Page]) -> tuple[list[manpages.Page], list[manpages.Page]]:
    """(training, validation) pages: by the hash of each page's name; a validation page whose summary or description
    a training page has is dropped."""
    train = [p for p in pages if not is_validation(p.name)]
    seen = {p.summary for p in train} | {p.description for p in train}
    valid = [p for p in pages if is_validation(p.name) and p.summary not in seen and p.description not in seen]
    return train, valid


def encode(tok, pages: Iterable[manpages.Page], *, score_end: bool) -> dict[str, list[list[int]]]:
    """The pages' rows (``input_ids``, ``attention_mask``, ``labels``) as the reference's parquet files hold them."""
    end = tok.token_to_id(llama_mini.EOS)
    prompt, marker = tok.encode(PROMPT).ids, tok.encode(MARKER).ids
    rows: dict[str, list[list[int]]] = {"input_ids": [], "attention_mask": [], "labels": []}
    for p in pages:
        summary = tok.encode(" " + p.summary).ids
        room = SEQ_LEN - len(prompt) - len(marker) - len(summary) - 1
        if len(summary) > MAX_SUMMARY_TOKENS or room < MIN_DOCUMENT_TOKENS:
            continue
        document = tok.encode(" " + p.description).ids[:room]
        if len(document) < MIN_DOCUMENT_TOKENS:
            continue
        scored = len(prompt) + len(document) + len(marker)
        ids = [*prompt, *document, *marker, *summary, end]
        rows["input_ids"].append(ids)
        rows["attention_mask"].append([1] * len(ids))
        rows["labels"].append([IGNORE] * scored + summary + [end if score_end else IGNORE])
    return rows


def unigram_loss(train: dict, valid: dict, vocab_size: int) -> float:
    """The loss of a model that knows only the training summaries' token frequencies (add-one smoothed), on the
    validation summaries' scored tokens: the mean over sequences of each sequence's mean, as the evaluation takes."""
    counts = np.ones(vocab_size)
    for labels in train["labels"]:
        np.add.at(counts, [t for t in labels if t != IGNORE], 1.0)
    logp = np.log(counts / counts.sum())
    losses = [-np.mean([logp[t] for t in labels if t != IGNORE]) for labels in valid["labels"]]
    return float(np.mean(losses))


def prepare_data(data_dir: Path) -> list[Path]:
    """The parquet files and their manifest (idempotent: nothing is rewritten when they verify)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from trainperf.workloads.common.llm import tokenizer

    root = mini_dir(data_dir)
    if not verify_data(data_dir):
        return []
    pages = manpages.read_pages(folders=FOLDERS)
    train_pages, valid_pages = split(pages)
    tok = tokenizer.load(llama_mini.mini_dir(data_dir) / llama_mini.TOKENIZER)
    train, valid = encode(tok, train_pages, score_end=True), encode(tok, valid_pages, score_end=False)
    if len(valid["input_ids"]) < 50 or len(train["input_ids"]) < 500:
        raise DataError(
            f"{manpages.MAN_ROOT}: {len(train['input_ids'])} training and {len(valid['input_ids'])} validation pages; "
            "the mini needs the man-pages project's pages from Debian's manpages and manpages-dev (scripts/setup.sh)"
        )
    try:
        (root / DATASET).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DataError(f"cannot create data folder {root} ({e.strerror}): choose another with --data-dir") from None
    for name, rows in zip(FILES, (train, valid), strict=True):
        pq.write_table(pa.table(rows), root / f"{name}.partial")
        (root / f"{name}.partial").replace(root / name)
    vocab = tok.get_vocab_size()
    baseline = unigram_loss(train, valid, vocab)
    manifest = {
        **_header(),
        "pages": {"read": len(pages), "training": len(train["input_ids"]), "validation": len(valid["input_ids"])},
        "projects": sorted({p.project for p in pages}),
        "tokenizer_sha256": llama_mini.tokenizer_sha256(data_dir),
        "unigram_summary_loss": round(baseline, 4),
        "uniform_loss": round(math.log(vocab), 4),
        "files": {n: {"bytes": (root / n).stat().st_size, "sha256": verified.sha256(root / n)} for n in FILES},
    }
    atomic_write_text(root / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    print(
        f"llama2_70b_lora mini: {len(train['input_ids'])} training and {len(valid['input_ids'])} validation pages "
        f"({manifest['projects'][0]}); the summaries' unigram loss {baseline:.3f}, the uniform guess's "
        f"{math.log(vocab):.3f}"
    )
    return [root / n for n in (*FILES, MANIFEST)]
