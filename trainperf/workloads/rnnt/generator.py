"""The mini rnnt corpus: spoken commands synthesized offline with Debian's espeak-ng and flite, written in
LibriSpeech's layout as 16 kHz FLAC, with a small sentencepiece vocabulary and a manifest of checksums.

Sentences come from a fixed grammar (``<verb> the <colour> <object> <preposition> the <place>``, 36 words,
15,360 sentences), drawn with ``numpy.random.default_rng(GENERATOR_SEED)``. A *speaker* is one voice: an
engine, its voice, a voice variant, a speaking rate and a pitch. Training and evaluation speakers are split
by voice: the evaluation set is spoken only by voice variants (espeak-ng) and a voice (flite) that no
training speaker uses, so the model must recognize voices it never heard.

    train-synth/<speaker>/<chapter>/<speaker>-<chapter>-<utterance>.flac  (+ <speaker>-<chapter>.trans.txt)
    dev-synth/...                                                          (unseen voices)
    sentencepiece.model                                                    (word pieces, trained on train-synth)
    manifest.json                                                          (sha256 and size of every file)
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainperf.data import verified
from trainperf.errors import DataError
from trainperf.fileio import atomic_write_text
from trainperf.workloads.rnnt import data

MINI_SUBDIR = Path("rnnt") / "mini"
TRAIN_SUBSET, EVAL_SUBSET = "train-synth", "dev-synth"
TOKENIZER, MANIFEST = "sentencepiece.model", "manifest.json"
GENERATOR_SEED = 2022
GENERATOR_VERSION = 2
# The mini vocabulary: sentencepiece's word model, one piece per word of the grammar and <unk> (+ the blank:
# 38 classes). A unigram model of this text stops at 58 pieces, fragments of words ("▁b", "lac", "k"), which
# made utterances 3x longer in symbols and the transducer loss 3x dearer (README.md).
VOCAB_SIZE = 37
VOCAB_MODEL = "word"
FIX = "run `trainperf data prepare rnnt` (it synthesizes the mini corpus again with espeak-ng and flite)"
DEBIAN_PACKAGES = ("espeak-ng", "flite")

GRAMMAR = (
    ("put", "move", "place", "take", "bring", "push"),
    ("the",),
    ("red", "green", "blue", "white", "black", "yellow", "brown", "orange"),
    ("box", "ball", "cup", "book", "lamp", "chair", "spoon", "key"),
    ("on", "under", "near", "behind", "into"),
    ("the",),
    ("table", "shelf", "floor", "desk", "bed", "sofa", "window", "door"),
)
ESPEAK_BASES = ("en-us", "en-gb", "en-gb-scotland", "en-gb-x-rp", "en-029", "en-us-nyc", "en-gb-x-gbclan")
ESPEAK_TRAIN_VARIANTS = ("m1", "m2", "m3", "m4", "m6", "f1", "f2", "f4", "klatt", "klatt3", "croak", "whisper")
ESPEAK_EVAL_VARIANTS = ("m7", "f3", "f5", "klatt2")
FLITE_TRAIN_VOICES = ("kal", "kal16", "awb", "slt")
FLITE_EVAL_VOICES = ("rms",)
TRAIN_SPEAKERS, EVAL_SPEAKERS = 72, 16
TRAIN_UTTERANCES, EVAL_UTTERANCES = 40, 25  # per speaker
CHAPTER_UTTERANCES = 20  # utterances per chapter folder


@dataclass(frozen=True)
class Voice:
    engine: str  # "espeak-ng" or "flite"
    name: str  # espeak-ng: "<base>+<variant>"; flite: the voice
    rate: int  # espeak-ng words per minute; flite: 100 x the duration stretch
    pitch: int  # espeak-ng 0-99; flite: unused (0)

    def command(self, text: str) -> list[str]:
        if self.engine == "espeak-ng":
            return ["espeak-ng", "-v", self.name, "-s", str(self.rate), "-p", str(self.pitch), "--stdout", text]
        stretch = f"{self.rate / 100:.2f}"
        return ["flite", "-voice", self.name, "--setf", f"duration_stretch={stretch}", "-t", text, "-o", "/dev/stdout"]


def mini_dir(data_dir: Path) -> Path:
    return data_dir / MINI_SUBDIR


def voices(rng: np.random.Generator) -> tuple[list[Voice], list[Voice]]:
    """(training speakers, evaluation speakers); no voice variant or flite voice is in both."""

    def draw(n: int, variants: tuple[str, ...], flite: tuple[str, ...]) -> list[Voice]:
        out = []
        for i in range(n):
            if i % 4 == 3:  # a quarter of the speakers are flite voices
                out.append(Voice("flite", flite[(i // 4) % len(flite)], int(rng.integers(85, 116)), 0))
            else:
                base = ESPEAK_BASES[int(rng.integers(len(ESPEAK_BASES)))]
                variant = variants[i % len(variants)]
                out.append(
                    Voice("espeak-ng", f"{base}+{variant}", int(rng.integers(130, 191)), int(rng.integers(25, 76)))
                )
        return out

    return draw(TRAIN_SPEAKERS, ESPEAK_TRAIN_VARIANTS, FLITE_TRAIN_VOICES), draw(
        EVAL_SPEAKERS, ESPEAK_EVAL_VARIANTS, FLITE_EVAL_VOICES
    )


def sentence(rng: np.random.Generator) -> str:
    return " ".join(words[int(rng.integers(len(words)))] for words in GRAMMAR)


def synthesize(voice: Voice, text: str) -> np.ndarray:
    """One utterance as int16 samples at 16 kHz."""
    import soundfile as sf
    from scipy.signal import resample_poly

    try:
        raw = subprocess.run(voice.command(text), capture_output=True, check=True, timeout=60).stdout
    except FileNotFoundError:
        raise DataError(
            f"{voice.engine} not found: install Debian's {' and '.join(DEBIAN_PACKAGES)} "
            f"(`sudo apt-get install {' '.join(DEBIAN_PACKAGES)}`, or `make setup`)"
        ) from None
    except subprocess.CalledProcessError as e:
        raise DataError(
            f"{voice.engine} failed on voice {voice.name}: {e.stderr.decode(errors='replace')[:200]}"
        ) from None
    audio, rate = sf.read(io.BytesIO(raw), dtype="float32", always_2d=False)
    if rate != data.SAMPLE_RATE:  # espeak-ng speaks at 22,050 Hz, flite's kal at 8,000 Hz
        g = np.gcd(rate, data.SAMPLE_RATE)
        audio = resample_poly(audio, data.SAMPLE_RATE // g, rate // g)
    return np.clip(np.round(audio * 32767), -32768, 32767).astype(np.int16)


def _header() -> dict:
    return {"generator": "trainperf rnnt mini", "version": GENERATOR_VERSION, "seed": GENERATOR_SEED}


def verify_mini(data_dir: Path, *, trust_cache: bool = False) -> list[str]:
    """Problems with the prepared corpus ([] when whole): the manifest, then every file's size and sha256."""
    root = mini_dir(data_dir)
    path = root / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        return [f"{path} is missing"]
    except (OSError, ValueError) as e:
        return [f"{path} cannot be read ({e})"]
    if not isinstance(manifest, dict) or {k: manifest.get(k) for k in _header()} != _header():
        return [f"{path} was written by another generator version or settings"]
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        return [f"{path} lists no files"]
    expected = {name: verified.Expected(sha256=e["sha256"], size=e["bytes"]) for name, e in files.items()}
    return verified.check_files(root, expected, trust_cache=trust_cache)


def prepare_mini(data_dir: Path, *, progress: bool = True) -> list[Path]:
    """Synthesize the mini corpus (idempotent: nothing is rewritten when it verifies). About a minute."""
    import soundfile as sf
    from rich.progress import Progress

    root = mini_dir(data_dir)
    if not verify_mini(data_dir):
        return []
    for tool in DEBIAN_PACKAGES:
        if shutil.which(tool) is None:
            raise DataError(
                f"{tool} not found: install Debian's {' and '.join(DEBIAN_PACKAGES)} "
                f"(`sudo apt-get install {' '.join(DEBIAN_PACKAGES)}`, or `make setup`)"
            )
    partial = root.parent / f".mini.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    rng = np.random.default_rng(GENERATOR_SEED)
    train_voices, eval_voices = voices(rng)
    jobs = [(TRAIN_SUBSET, i, v, TRAIN_UTTERANCES) for i, v in enumerate(train_voices)]
    jobs += [(EVAL_SUBSET, TRAIN_SPEAKERS + i, v, EVAL_UTTERANCES) for i, v in enumerate(eval_voices)]
    # Every sentence is drawn first (one seeded order), then the utterances are synthesized two at a time.
    utterances = []  # (folder, utterance id, voice, sentence)
    for subset, index, voice, n in jobs:
        speaker = 1000 + index
        for u in range(n):
            chapter = 100 + u // CHAPTER_UTTERANCES
            folder = partial / subset / str(speaker) / str(chapter)
            utterances.append((folder, f"{speaker}-{chapter}-{u:04d}", voice, sentence(rng)))
    train_text = [text for folder, _, _, text in utterances if folder.parts[-3] == TRAIN_SUBSET]

    def write(item: tuple[Path, str, Voice, str]) -> None:
        folder, utt, voice, text = item
        sf.write(folder / f"{utt}.flac", synthesize(voice, text), data.SAMPLE_RATE, format="FLAC")

    try:
        transcripts: dict[Path, list[str]] = {}
        for folder, utt, _, text in utterances:
            transcripts.setdefault(folder, []).append(f"{utt} {text.upper()}")
        for folder, lines in transcripts.items():
            folder.mkdir(parents=True)
            speaker, chapter = folder.parts[-2:]
            (folder / f"{speaker}-{chapter}.trans.txt").write_text("\n".join(lines) + "\n")
        with Progress(transient=True, disable=not progress) as bar, ThreadPoolExecutor(2) as pool:
            task = bar.add_task("rnnt mini corpus: synthesizing", total=len(utterances))
            for _ in pool.map(write, utterances):
                bar.advance(task)
        data.train_sentencepiece(train_text, VOCAB_SIZE, partial / TOKENIZER, model_type=VOCAB_MODEL)
        (partial / "voices.json").write_text(
            json.dumps(
                {"train": [v.__dict__ for v in train_voices], "eval": [v.__dict__ for v in eval_voices]}, indent=1
            )
            + "\n"
        )
        files = {
            str(p.relative_to(partial)): {"sha256": verified.sha256(p), "bytes": p.stat().st_size}
            for p in sorted(partial.rglob("*"))
            if p.is_file()
        }
        atomic_write_text(partial / MANIFEST, json.dumps({**_header(), "files": files}, indent=1) + "\n")
        shutil.rmtree(root, ignore_errors=True)
        os.replace(partial, root)
    except OSError as e:
        raise DataError(
            f"cannot write the rnnt mini corpus under {root.parent} ({e}); free space or use --data-dir"
        ) from None
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return [root / name for name in files] + [root / MANIFEST]
