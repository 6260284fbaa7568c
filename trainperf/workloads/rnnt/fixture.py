"""The reference smoke run's fixture: a tiny LibriSpeech in its own layout (a few short FLAC utterances).

Every subset the reference reads (``train-clean-100``, ``train-clean-360``, ``train-other-500``, ``dev-clean``)
holds one or two ``<speaker>/<chapter>/`` folders of 16 kHz mono FLAC files (voiced, tone-like sounds of
0.6-1.4 s) and their ``<speaker>-<chapter>.trans.txt`` in LibriSpeech's capitals. No sentencepiece model is
shipped: the smoke run trains one from the fixture's transcripts, as a reference run without the reference's
file does. Deterministic.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainperf.workloads.rnnt import data

SENTENCES = (
    "HE HOPED THERE WOULD BE STEW FOR DINNER",
    "STUFF IT INTO YOU HIS BELLY COUNSELLED HIM",
    "AFTER EARLY NIGHTFALL THE YELLOW LAMPS WOULD LIGHT UP",
    "HELLO BERTIE ANY GOOD IN YOUR MIND",
    "THE COUNTRY'S NEW RAILWAY WAS OPENED YESTERDAY",
    "SHE SAID SHE WOULD COME BACK IN THE MORNING",
    "NUMBER TEN FRESH NELLY IS WAITING ON YOU",
    "WE WENT DOWN TO THE RIVER AT NOON",
)
# (subset, speaker, chapter, utterances)
LAYOUT = (
    ("train-clean-100", 19, 198, 3),
    ("train-clean-100", 26, 495, 2),
    ("train-clean-360", 100, 121669, 2),
    ("train-other-500", 20, 205, 3),
    ("dev-clean", 84, 121123, 2),
    ("dev-clean", 174, 50561, 2),
)


def utterance_audio(rng: np.random.Generator) -> np.ndarray:
    """A voiced, speech-like signal: a gliding fundamental with harmonics, syllable-rate loudness, noise."""
    n = int(rng.uniform(0.6, 1.4) * data.SAMPLE_RATE)
    t = np.arange(n) / data.SAMPLE_RATE
    f0 = rng.uniform(90, 220) * (1 + 0.2 * np.sin(2 * np.pi * rng.uniform(0.5, 2) * t))
    phase = 2 * np.pi * np.cumsum(f0) / data.SAMPLE_RATE
    voiced = sum(np.sin(k * phase) / k for k in range(1, 8))
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * rng.uniform(3, 6) * t) ** 2
    x = 0.2 * voiced * envelope + 0.01 * rng.standard_normal(n)
    return np.clip(x / np.abs(x).max() * 0.5 * 32767, -32768, 32767).astype(np.int16)


def write_smoke_fixture(root: Path) -> str:
    import soundfile as sf

    rng = np.random.default_rng(0)
    count = 0
    for subset, speaker, chapter, n in LAYOUT:
        folder = root / "LibriSpeech" / subset / str(speaker) / str(chapter)
        folder.mkdir(parents=True, exist_ok=True)
        lines = []
        for u in range(n):
            utt = f"{speaker}-{chapter}-{u:04d}"
            sf.write(folder / f"{utt}.flac", utterance_audio(rng), data.SAMPLE_RATE, format="FLAC")
            lines.append(f"{utt} {SENTENCES[count % len(SENTENCES)]}")
            count += 1
        (folder / f"{speaker}-{chapter}.trans.txt").write_text("\n".join(lines) + "\n")
    return f"LibriSpeech layout: {count} FLAC utterances at 16 kHz in the four subsets the reference reads"
