"""The mini bert data: pretraining examples from an offline English corpus, in the reference's HDF5 layout.

``trainperf data prepare bert`` reads the corpus (:mod:`trainperf.workloads.bert.corpus`), splits its
documents into training and evaluation (about 1 document in 25, by a hash of its source and index; an
evaluation document sharing any sentence with a training document is dropped, so no evaluation text is
trained on), tokenizes them with trainperf's lower-case WordPiece vocabulary (``mini_vocab.txt`` beside this file,
trained on the training text with Hugging Face's ``tokenizers``: ``python -m trainperf.workloads.bert.mini
--train-vocabulary`` trains it again), and writes under ``<data-dir>/bert/mini``:

- ``vocab.txt``: the vocabulary (``[PAD]`` 0, ``[UNK]`` 1, ``[CLS]`` 2, ``[SEP]`` 3, ``[MASK]`` 4, then WordPieces),
- ``training/part-00000.hdf5`` and ``eval/eval.hdf5``: examples in the reference's packed HDF5 layout
  (:mod:`trainperf.workloads.bert.data`: 15% masking with the 80/10/10 rule, 50% random next segments),
- ``manifest.json``: every file's size and SHA-256, the generator's settings, and the baselines below.

Baselines recorded in the manifest and printed: the unigram-frequency guesser (always the training set's most
frequent masked token) and the share of masked slots whose input token was kept (the 10% rule's copies).
"""

from __future__ import annotations

import json
import zlib
from collections import Counter
from pathlib import Path

import numpy as np

from trainperf.data import verified
from trainperf.errors import DataError
from trainperf.fileio import atomic_write_text
from trainperf.workloads.bert import MINI, corpus
from trainperf.workloads.bert.data import MASK, SPECIAL_TOKENS, Examples, Masking, make_examples, write_examples

GENERATOR = "trainperf.workloads.bert.mini v2"  # v2: the shipped vocabulary, numbered in a fixed order
# The vocabulary ships with trainperf rather than being trained at every preparation: tokenizers' trainer
# breaks ties between equally frequent merges by hash-map order, which changes from process to process, so
# two trainings on the same text can end with different tokens, and the prepared files (checksummed, and the
# data the calibration ran on) would differ between machines.
SHIPPED_VOCAB = Path(__file__).with_name("mini_vocab.txt")
SEED = 20220629  # MLPerf Training v2.0 results day; any fixed number would do
VOCAB_SIZE = 8192
MASKING = Masking(max_seq_length=64, max_predictions=10)  # 15% of 64 tokens, rounded up
EVAL_EVERY = 25  # about one document in 25 goes to evaluation
EVAL_EXAMPLES = MINI.eval_samples  # 2,000: the mini spec states it (__init__.py)
TRAIN_FILE, EVAL_FILE, VOCAB_FILE, MANIFEST = "training/part-00000.hdf5", "eval/eval.hdf5", "vocab.txt", "manifest.json"
FIX = "run `trainperf data prepare bert` (it rebuilds the mini corpus)"


def mini_dir(data_dir: Path) -> Path:
    return Path(data_dir) / "bert" / "mini"


def _header() -> dict:
    return {
        "generator": GENERATOR,
        "seed": SEED,
        "vocab_size": VOCAB_SIZE,
        "max_seq_length": MASKING.max_seq_length,
        "max_predictions": MASKING.max_predictions,
        "eval_examples": EVAL_EXAMPLES,
    }


def read_manifest(data_dir: Path) -> dict:
    return verified.read_manifest(mini_dir(data_dir) / MANIFEST, FIX)


def verify_mini(data_dir: Path, *, trust_cache: bool = False) -> list[str]:
    """Problems with the prepared files (none: ready). ``trust_cache``: a file unchanged since it was last
    found intact is not hashed again (what a run does before its clock starts)."""
    root = mini_dir(data_dir)
    try:
        manifest = read_manifest(data_dir)
    except DataError as e:
        return [str(e).split(": run")[0]]
    if {k: manifest.get(k) for k in _header()} != _header():
        return [f"{root / MANIFEST} was written by another generator version or settings"]
    expected = {
        name: verified.Expected(sha256=entry.get("sha256", ""), size=entry.get("bytes"))
        for name, entry in manifest["files"].items()
    }
    if set(expected) != {TRAIN_FILE, EVAL_FILE, VOCAB_FILE}:
        return [f"{root / MANIFEST} does not list the mini files"]
    return verified.check_files(root, expected, trust_cache=trust_cache)


def prepare_mini(data_dir: Path) -> list[Path]:
    """Build the mini corpus, vocabulary and examples (idempotent: nothing is rewritten when they verify)."""
    root = mini_dir(data_dir)
    if not verify_mini(data_dir):
        return []
    corpus.require_sources("bert mini data")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DataError(f"cannot create data folder {root} ({e.strerror}): choose another with --data-dir") from None
    train_docs, eval_docs, sources = split_documents(corpus.all_documents())
    tokenizer = load_vocabulary(SHIPPED_VOCAB)
    (root / VOCAB_FILE).parent.mkdir(parents=True, exist_ok=True)
    vocab = vocabulary_tokens(tokenizer)
    atomic_write_text(root / VOCAB_FILE, "\n".join(vocab) + "\n")
    special = {tok: tokenizer.token_to_id(tok) for tok in SPECIAL_TOKENS}
    rng = np.random.default_rng(SEED)
    train = make_examples(
        _tokenize(tokenizer, train_docs), masking=MASKING, special=special, vocab_size=len(vocab), rng=rng
    )
    evaluation = make_examples(
        _tokenize(tokenizer, eval_docs), masking=MASKING, special=special, vocab_size=len(vocab), rng=rng
    )
    if len(evaluation) < EVAL_EXAMPLES:
        raise DataError(f"bert mini data: only {len(evaluation)} evaluation examples were made, {EVAL_EXAMPLES} needed")
    evaluation = evaluation.take(np.sort(rng.choice(len(evaluation), EVAL_EXAMPLES, replace=False)))
    write_examples(root / TRAIN_FILE, train)
    write_examples(root / EVAL_FILE, evaluation)
    baselines = unigram_baselines(train, evaluation, special[MASK])
    files = {
        name: {"bytes": (root / name).stat().st_size, "sha256": verified.sha256(root / name)}
        for name in (TRAIN_FILE, EVAL_FILE, VOCAB_FILE)
    }
    manifest = {
        **_header(),
        "examples": {"training": len(train), "eval": len(evaluation)},
        "documents": {"training": len(train_docs), "eval": len(eval_docs)},
        "sources": sources,
        **baselines,
        "files": files,
    }
    atomic_write_text(root / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    print(
        f"bert mini: {len(train):,} training and {len(evaluation):,} evaluation examples; masked-LM accuracy of the "
        f"unigram guesser {baselines['unigram_accuracy']:.4f}, "
        f"of copying the input token {baselines['copy_accuracy']:.4f}"
    )
    return [root / name for name in (*files, MANIFEST)]


def split_documents(docs: dict[str, list[corpus.Document]]) -> tuple[list, list, dict]:
    """(training documents, evaluation documents, per-source counts). An evaluation document is one whose
    hash of (source, index) falls in 1 of ``EVAL_EVERY`` buckets and shares no sentence with training."""
    train, held = [], []
    sources = {}
    for source, items in docs.items():
        n_eval = 0
        for i, doc in enumerate(items):
            if zlib.crc32(f"{source}:{i}".encode()) % EVAL_EVERY == 0:
                held.append(doc)
                n_eval += 1
            else:
                train.append(doc)
        sources[source] = {"documents": len(items), "characters": sum(len(s) for d in items for s in d)}
    seen = {s.lower() for d in train for s in d}
    evaluation = [d for d in held if not any(s.lower() in seen for s in d)]
    return train, evaluation, sources


def train_vocabulary(train_docs: list[corpus.Document]):
    """A lower-case WordPiece vocabulary of ``VOCAB_SIZE`` tokens trained on the training text only, numbered
    in a fixed order: the special tokens first (the layout's padding is id 0), then the rest sorted
    (tokenizers numbers them in a per-process order)."""
    from tokenizers import BertWordPieceTokenizer

    trainer = BertWordPieceTokenizer(lowercase=True, strip_accents=True, clean_text=True)
    trainer.train_from_iterator(
        (s for d in train_docs for s in d),
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        show_progress=False,
    )
    learned = set(trainer.get_vocab()) - set(SPECIAL_TOKENS)
    return _wordpiece({tok: i for i, tok in enumerate([*SPECIAL_TOKENS, *sorted(learned)])})


def load_vocabulary(path: Path):
    """The WordPiece tokenizer of a ``vocab.txt`` (one token per line, its line number its id)."""
    try:
        tokens = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise DataError(f"bert mini vocabulary {path}: {e.strerror}: reinstall trainperf") from None
    if tokens[: len(SPECIAL_TOKENS)] != list(SPECIAL_TOKENS) or len(set(tokens)) != len(tokens):
        raise DataError(
            f"bert mini vocabulary {path}: does not start with {' '.join(SPECIAL_TOKENS)} or repeats a token"
        )
    return _wordpiece({tok: i for i, tok in enumerate(tokens)})


def vocabulary_tokens(tokenizer) -> list[str]:
    return [tok for tok, _ in sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])]


def _wordpiece(vocab: dict[str, int]):
    from tokenizers import BertWordPieceTokenizer

    return BertWordPieceTokenizer(vocab, lowercase=True, strip_accents=True, clean_text=True)


def _tokenize(tokenizer, docs: list[corpus.Document]) -> list[list[list[int]]]:
    flat = [s for d in docs for s in d]
    encoded = tokenizer.encode_batch(flat, add_special_tokens=False)
    out, k = [], 0
    for d in docs:
        sents = [encoded[k + j].ids for j in range(len(d))]
        k += len(d)
        sents = [s for s in sents if s]
        if sents:
            out.append(sents)
    return out


def unigram_baselines(train: Examples, evaluation: Examples, mask_id: int) -> dict:
    """Masked-LM accuracy of two guessers on the evaluation set: the training set's most frequent masked token,
    and the input token itself (right only where the 10% rule kept it)."""
    valid_train = train.masked_lm_positions != 0
    counts = Counter(train.masked_lm_ids[valid_train].tolist())
    top = counts.most_common(1)[0][0]
    valid = evaluation.masked_lm_positions != 0
    truth = evaluation.masked_lm_ids[valid]
    rows = np.nonzero(valid)[0]
    shown = evaluation.input_ids[rows, evaluation.masked_lm_positions[valid]]
    return {
        "unigram_token": int(top),
        "unigram_accuracy": float((truth == top).mean()),
        "copy_accuracy": float((shown == truth).mean()),
        "eval_masked_tokens": int(valid.sum()),
    }


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(
        prog="python -m trainperf.workloads.bert.mini",
        description="Maintenance of the mini bert data: train the shipped WordPiece vocabulary again.",
    )
    p.add_argument(
        "--train-vocabulary", action="store_true", help=f"train on the training documents and write {SHIPPED_VOCAB}"
    )
    a = p.parse_args(argv)
    if not a.train_vocabulary:
        p.print_help()
        return 2
    train_docs, _, _ = split_documents(corpus.all_documents())
    tokens = vocabulary_tokens(train_vocabulary(train_docs))
    atomic_write_text(SHIPPED_VOCAB, "\n".join(tokens) + "\n")
    print(f"wrote {len(tokens)} tokens to {SHIPPED_VOCAB}; bump GENERATOR so prepared data is rebuilt")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
