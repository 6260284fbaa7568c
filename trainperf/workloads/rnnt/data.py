"""rnnt data: LibriSpeech in its own layout, the reference's features, SpecAugment and speed perturbation.

A corpus is a folder of subsets in LibriSpeech's layout, ``<subset>/<speaker>/<chapter>/`` holding
``<speaker>-<chapter>-<utterance>.flac`` files and one ``<speaker>-<chapter>.trans.txt`` whose lines are
``<speaker>-<chapter>-<utterance> TRANSCRIPT``. :func:`scan_subset` checks the layout before the clock
(every transcript line has its FLAC and every FLAC its line; every FLAC's header decodes, holds one
channel at 16 kHz) and :func:`read_audio` decodes a file with soundfile (torchaudio's own I/O needs
torchcodec). The mini corpus (``generator.py``) is written in this same layout and read by this same code.

Features, as the MLPerf v2.0 reference computes them (mlcommons/training ``rnn_speech_recognition``,
``configs/baseline_v3-1023sp.yaml``): dither 1e-5, pre-emphasis 0.97, a 512-point STFT of 20 ms Hann
windows every 10 ms, 80 Slaney mel filters (torchaudio's ``MelSpectrogram``), log, each mel channel
normalized over the utterance (after leading and trailing silence is
trimmed, 60 dB below the peak), then 3 frames stacked and subsampled by 3 (240 features every 30 ms).
Training adds the reference's speed perturbation (a resample to a rate drawn from [0.85, 1.15] x 16 kHz, read as
16 kHz: each utterance 0.85 to 1.15 times as long) and
SpecAugment (2 frequency masks of 0-20 channels, 10 time masks of 0-3 % of the utterance).
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from trainperf.errors import DataError

SAMPLE_RATE = 16_000  # LibriSpeech and the reference
WINDOW_SIZE, WINDOW_STRIDE, N_FFT, N_MELS = 0.02, 0.01, 512, 80
DITHER, PREEMPH = 1e-5, 0.97
TRIM_DB = 60.0  # the reference's trim_silence: leading and trailing audio 60 dB below the peak is cut
FRAME_STACKING = FRAME_SUBSAMPLING = 3
FEATURES = N_MELS * FRAME_STACKING  # 240: the encoder's input
SPEC_AUGMENT = {"freq_n": 2, "freq_min": 0, "freq_max": 20, "time_n": 10, "time_min": 0, "time_max": 0.03}
SPEED_PERTURBATION = (0.85, 1.15)
_UTT_ID = re.compile(r"^(\d+)-(\d+)-(\d+)$")
# LibriSpeech's transcripts use capitals, spaces and apostrophes; the reference lower-cases them.
_ALLOWED = re.compile(r"^[a-z' ]+$")


@dataclass(frozen=True)
class Utterance:
    path: Path
    transcript: str  # normalized: lower case, single spaces
    seconds: float


def normalize(text: str) -> str:
    return " ".join(text.lower().split())


def scan_subset(root: Path) -> list[Utterance]:
    """Every utterance of one subset folder (``<root>/<speaker>/<chapter>/``), checked before the clock.

    A transcript line without its FLAC, a FLAC without its line, a header that does not decode, a sample rate
    other than 16 kHz or more than one channel is a :class:`DataError` naming the file (and line).
    """
    import soundfile as sf

    if not root.is_dir():
        raise DataError(f"LibriSpeech subset {root} not found: the layout is <subset>/<speaker>/<chapter>/*.flac")
    out: list[Utterance] = []
    for chapter in sorted(p for p in root.glob("*/*") if p.is_dir()):
        speaker_id, chapter_id = chapter.parent.name, chapter.name
        trans = chapter / f"{speaker_id}-{chapter_id}.trans.txt"
        flacs = {p.stem: p for p in chapter.glob("*.flac")}
        if not trans.is_file():
            if flacs:
                first = sorted(flacs.values())[0]
                raise DataError(
                    f"{first}: no transcript {trans.name} in {chapter}; every chapter folder needs "
                    "<speaker>-<chapter>.trans.txt with one line per utterance"
                )
            continue
        lines: dict[str, str] = {}
        try:
            text = trans.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise DataError(f"{trans}: cannot be read as UTF-8 text ({e}); restore the file") from None
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            utt, _, words = line.partition(" ")
            words = normalize(words)
            if not _UTT_ID.match(utt) or not utt.startswith(f"{speaker_id}-{chapter_id}-"):
                raise DataError(
                    f"{trans} line {lineno}: utterance id {utt!r} is not {speaker_id}-{chapter_id}-<number>; "
                    "each line is '<speaker>-<chapter>-<utterance> TRANSCRIPT'"
                )
            if not words or not _ALLOWED.match(words):
                raise DataError(
                    f"{trans} line {lineno}: transcript {words!r} must be letters, spaces and apostrophes only"
                )
            if utt in lines:
                raise DataError(f"{trans} line {lineno}: utterance {utt} is listed twice")
            if utt not in flacs:
                raise DataError(
                    f"{trans} line {lineno}: utterance {utt} has no audio file {chapter / (utt + '.flac')}; "
                    "restore the FLAC or remove the line"
                )
            lines[utt] = words
        for stem, path in sorted(flacs.items()):
            if stem not in lines:
                raise DataError(f"{path}: no line for {stem} in {trans}; add its transcript or remove the file")
            out.append(Utterance(path, lines[stem], _seconds(path, sf)))
    if not out:
        raise DataError(f"LibriSpeech subset {root} holds no utterances (<speaker>/<chapter>/*.flac with *.trans.txt)")
    return out


def subset_transcripts(root: Path) -> list[str]:
    """The normalized transcripts of one subset folder, read from its ``*.trans.txt`` files alone (no audio
    header): the text a vocabulary is trained on. Unreadable files and malformed lines are left to
    :func:`scan_subset`, which reads them again with the audio."""
    out = []
    for trans in sorted(root.glob("*/*/*.trans.txt")):
        try:
            text = trans.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise DataError(f"{trans}: cannot be read as UTF-8 text ({e}); restore the file") from None
        out += [normalize(line.partition(" ")[2]) for line in text.splitlines() if line.strip()]
    return [t for t in out if t]


def _seconds(path: Path, sf) -> float:
    try:
        info = sf.info(str(path))
    except Exception as e:  # soundfile raises its own LibsndfileError (a RuntimeError) or others on garbage
        raise DataError(f"{path}: audio cannot be decoded ({e}); replace the file with a valid FLAC") from None
    if info.samplerate != SAMPLE_RATE:
        raise DataError(
            f"{path}: sample rate {info.samplerate} Hz, the reference's is {SAMPLE_RATE} Hz; resample it "
            "(e.g. `sox in.flac -r 16000 out.flac`)"
        )
    if info.channels != 1:
        raise DataError(f"{path}: {info.channels} channels, LibriSpeech is mono; mix it down to one channel")
    if info.frames <= 0:
        raise DataError(f"{path}: the audio is empty; replace the file")
    return info.frames / info.samplerate


def read_audio(path: Path) -> np.ndarray:
    """One utterance as int16 samples at 16 kHz (decoded by soundfile; errors name the file)."""
    import soundfile as sf

    try:
        audio, rate = sf.read(str(path), dtype="int16", always_2d=False)
    except Exception as e:
        raise DataError(f"{path}: audio cannot be decoded ({e}); replace the file with a valid FLAC") from None
    if rate != SAMPLE_RATE or audio.ndim != 1 or len(audio) == 0:
        raise DataError(f"{path}: expected mono 16 kHz audio, found {rate} Hz, shape {audio.shape}")
    return audio


# --- the vocabulary ------------------------------------------------------------------------------------
def train_sentencepiece(
    transcripts: Iterable[str], vocab_size: int, dest: Path, *, hard_limit: bool = True, model_type: str = "unigram"
) -> Path:
    """A sentencepiece model trained the reference's way (``spm_train --model_type=unigram
    --character_coverage=1.0 --bos_id=-1 --eos_id=-1``), written atomically to ``dest``. ``hard_limit=False``
    allows fewer pieces than ``vocab_size`` (a text too small for that many); ``model_type`` another of
    sentencepiece's models (the mini corpus: whole words)."""
    import sentencepiece as spm

    from trainperf.fileio import atomic_write_bytes

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(list(transcripts)),
        model_writer=buf,
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=1.0,
        bos_id=-1,
        eos_id=-1,
        hard_vocab_limit=hard_limit,
        num_threads=1,
        minloglevel=2,
    )
    atomic_write_bytes(dest, buf.getvalue())
    return dest


def load_sentencepiece(path: Path, max_pieces: int):
    import sentencepiece as spm

    try:
        sp = spm.SentencePieceProcessor(model_file=str(path))
    except (OSError, RuntimeError) as e:
        raise DataError(f"{path}: not a sentencepiece model ({e}); remove it to have trainperf train one") from None
    if sp.get_piece_size() > max_pieces:
        raise DataError(
            f"{path}: {sp.get_piece_size()} pieces, the model is built for at most {max_pieces}; "
            "use a vocabulary of that size or remove the file to have trainperf train one"
        )
    return sp


# --- features ------------------------------------------------------------------------------------------
class Featurizer:
    """Waveforms (int16) to the encoder's input: (batch, frames, 240) float32 and the frame counts."""

    def __init__(self, *, dither: float = DITHER, population_std: bool = False) -> None:
        import torchaudio

        self.dither = dither
        self.population_std = population_std
        self.mel = torchaudio.transforms.MelSpectrogram(
            sample_rate=SAMPLE_RATE,
            n_fft=N_FFT,
            win_length=round(WINDOW_SIZE * SAMPLE_RATE),
            hop_length=round(WINDOW_STRIDE * SAMPLE_RATE),
            n_mels=N_MELS,
            window_fn=torch.hann_window,
            power=2.0,
            norm="slaney",  # librosa's filters, as the reference's
            mel_scale="slaney",
        )

    def log_mel(self, audio: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """(80, frames) normalized log-mel features of one waveform (float samples in [-1, 1])."""
        x = audio
        if self.dither > 0:
            x = x + self.dither * torch.randn(x.shape, generator=generator)
        x = torch.cat([x[:1], x[1:] - PREEMPH * x[:-1]])
        spec = torch.log(self.mel(x) + 1e-20)
        return normalize_channels(spec, population_std=self.population_std)

    def __call__(
        self,
        waves: Sequence[np.ndarray],
        *,
        speed: Sequence[float] | None = None,
        spec_augment: bool = False,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        specs = []
        for i, wave in enumerate(waves):
            audio = torch.from_numpy(trim_silence(wave).astype(np.float32) / 32768.0)
            if speed is not None and speed[i] != 1.0:
                audio = perturb_speed(audio, speed[i])
            specs.append(self.log_mel(audio, generator))
        if spec_augment:  # on the batch padded to its longest utterance, as the reference's SpecAugment sees it
            padded = max(s.shape[1] for s in specs)
            specs = [augment(s, generator, padded_frames=padded) for s in specs]
        feats = [stack_frames(s).T for s in specs]
        lengths = torch.tensor([f.shape[0] for f in feats], dtype=torch.int32)
        return torch.nn.utils.rnn.pad_sequence(feats, batch_first=True), lengths


def trim_silence(wave: np.ndarray) -> np.ndarray:
    """The waveform without its leading and trailing audio quieter than ``TRIM_DB`` below its peak (the
    reference's ``trim_silence``, which its DALI pipeline does on the power of 2,048-sample windows,
    ``NonsilentRegion``; here sample by sample)."""
    level = np.abs(wave.astype(np.int32))
    loud = np.flatnonzero(level > level.max() * 10 ** (-TRIM_DB / 20))
    if len(loud) == 0:
        return wave
    return wave[loud[0] : loud[-1] + 1]


def perturb_speed(audio: torch.Tensor, factor: float) -> torch.Tensor:
    """The reference's speed perturbation: the waveform resampled to ``factor`` x 16 kHz and read as 16 kHz audio,
    so that it lasts ``factor`` times as long (its DALI pipeline decodes at ``Uniform(min, max) * sample_rate``,
    ``common/data/dali/pipeline.py:182-186``). The new rate is rounded to 100 Hz (at most 50 Hz, 0.37 % at 13.6 kHz,
    from the drawn factor) so that torchaudio's polyphase resampler works with small ratios."""
    import torchaudio

    new_rate = max(100, round(SAMPLE_RATE * factor / 100) * 100)
    if new_rate == SAMPLE_RATE:
        return audio
    return torchaudio.functional.resample(audio, SAMPLE_RATE, new_rate)


def normalize_channels(spec: torch.Tensor, *, population_std: bool) -> torch.Tensor:
    """Each mel channel of (80, frames) log-mel features less its mean over the utterance, over its spread.

    ``population_std``: as the reference's DALI ``Normalize(axes=[1])`` (``common/data/dali/pipeline.py:115``,
    ``:207``; its defaults ``ddof=0``, ``epsilon=0``): the population standard deviation and nothing added (a
    channel without variance is 0 here). Otherwise the mini scale's calibrated form: the sample standard
    deviation (N - 1) plus 1e-5 (``normalize_batch`` in ``common/data/features.py:120-130``, which the
    reference's DALI path does not call)."""
    centred = spec - spec.mean(dim=1, keepdim=True)
    if population_std:
        std = spec.std(dim=1, keepdim=True, correction=0)
        return torch.where(std > 0, centred / std, torch.zeros_like(centred))
    std = spec.std(dim=1, keepdim=True) if spec.shape[1] > 1 else torch.zeros_like(centred[:, :1])
    return centred / (std + 1e-5)


def augment(
    spec: torch.Tensor, generator: torch.Generator | None = None, *, padded_frames: int | None = None
) -> torch.Tensor:
    """SpecAugment with the reference's masks on (80, frames) features, drawn from ``generator``, as its
    ``SpecAugment`` draws them (``common/data/features.py:84-103``): a time mask is at most
    ``round(0.03 * frames)`` wide (Python's rounding) and starts anywhere in the batch's padded frames
    (``padded_frames``, this utterance's own when not given), so that part of a short utterance's masks fall on
    padding."""
    spec = spec.clone()
    n_mels, frames = spec.shape
    padded = frames if padded_frames is None else padded_frames
    a = SPEC_AUGMENT
    for _ in range(a["freq_n"]):
        width = int(torch.randint(a["freq_min"], a["freq_max"] + 1, (1,), generator=generator))
        start = int(torch.randint(0, max(1, n_mels - width + 1), (1,), generator=generator))
        spec[start : start + width, :] = 0
    max_time = int(round(a["time_max"] * frames))
    for _ in range(a["time_n"]):
        width = int(torch.randint(a["time_min"], max_time + 1, (1,), generator=generator))
        start = int(torch.randint(0, max(1, padded - width + 1), (1,), generator=generator))
        spec[:, start : start + width] = 0
    return spec


def stack_frames(spec: torch.Tensor) -> torch.Tensor:
    """(80, T) -> (240, ceil(T / 3)): 3 consecutive frames stacked, every third kept (the reference's
    frame splicing; the last frames are padded with zeros)."""
    n, t = spec.shape
    pad = (-t) % FRAME_SUBSAMPLING
    x = torch.nn.functional.pad(spec, (0, pad + FRAME_STACKING - 1))
    stacked = torch.cat([x[:, k : k + t + pad] for k in range(FRAME_STACKING)], dim=0)
    return stacked[:, ::FRAME_SUBSAMPLING]


def bucket_batches(seconds: Sequence[float], batch: int, buckets: int, rng: np.random.Generator) -> list[np.ndarray]:
    """The reference's bucketing sampler: utterances sorted by duration into ``buckets`` equal parts, each
    part shuffled, the parts joined and cut into batches of ``batch`` (the last partial one dropped), and the
    batches shuffled, so that a batch holds utterances of similar length."""
    order = np.argsort(np.asarray(seconds), kind="stable")
    joined = np.concatenate([rng.permutation(part) for part in np.array_split(order, max(1, buckets))])
    out = [joined[i : i + batch] for i in range(0, len(joined) - batch + 1, batch)]
    return [out[i] for i in rng.permutation(len(out))]


def bucket_groups(seconds: Sequence[float], group: int, buckets: int, rng: np.random.Generator) -> list[np.ndarray]:
    """One epoch of the reference's ``BucketingSampler`` (``common/data/dali/sampler.py:65-105``): utterances
    sorted by duration into ``buckets`` equal parts, each part shuffled and the parts joined; the remainder
    modulo ``group`` dropped at random positions of the joined order (``:80-87``); the rest cut into groups of
    ``group`` (the reference's micro-batch x world size, ``:72``) and the groups shuffled (``:92-94``). An
    optimizer step then takes gradient-accumulation-steps consecutive groups, and rank ``r`` of ``w`` the
    utterances ``r, r + w, ...`` of each group (``:96-100``, the file list read in shards)."""
    order = np.argsort(np.asarray(seconds), kind="stable")
    joined = np.concatenate([rng.permutation(part) for part in np.array_split(order, max(1, buckets))])
    drop = len(joined) % group
    if drop:
        keep = np.ones(len(joined), dtype=bool)
        keep[rng.choice(len(joined), drop, replace=False)] = False
        joined = joined[keep]
    groups = joined.reshape(-1, group)
    return [groups[i] for i in rng.permutation(len(groups))]
