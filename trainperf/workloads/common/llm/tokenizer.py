"""A tokenizer the user provides, in Hugging Face's ``tokenizer.json`` format, read with ``tokenizers`` (a JSON file:
nothing in it is executed)."""

from __future__ import annotations

from pathlib import Path

from trainperf.errors import DataError

MAX_TOKENIZER_BYTES = 64 * 2**20  # Llama 3.1's is 9 MB


def load(path: Path):
    """The ``tokenizers.Tokenizer`` in ``path``; a clear error naming the file when it is not one."""
    from tokenizers import Tokenizer

    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no tokenizer file; give the model's tokenizer.json (Hugging Face's format)")
    if path.stat().st_size > MAX_TOKENIZER_BYTES:
        raise DataError(f"{path}: over {MAX_TOKENIZER_BYTES // 2**20} MiB, larger than any tokenizer.json")
    try:
        return Tokenizer.from_str(path.read_text(encoding="utf-8"))
    except Exception as e:  # a decoding error, or tokenizers' own Exception subclass for a file it cannot parse
        raise DataError(f"{path}: not a tokenizer.json that Hugging Face's tokenizers can read ({e})") from None
