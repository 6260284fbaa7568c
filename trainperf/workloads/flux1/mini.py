"""The mini flux1 data: the captioned glyph images of :mod:`.glyphs`, stored in the reference's own preprocessed
layout (:mod:`.reference`), so that the mini's run reads them with the reference's reader.

``trainperf data prepare flux1`` writes ``<data-dir>/flux1/mini/``::

    glyphs_train/         state.json, dataset_info.json, data-0000K-of-00004.arrow (the reference: cc12m_preprocessed)
    glyphs_validation/    the same layout, with each sample's timestep 0..7 (the reference: coco_preprocessed)
    empty_encodings/      t5_empty.npy (1 x 8 x 64) and clip_empty.npy (1 x 64), float16: the empty caption's
    text_encoder.safetensors   the fixed text encoder (word and position tables, the vocabulary)
    manifest.json          every file's size and SHA-256, the counts, and what a model that learns nothing gets

A row is what the reference's preprocessing stores for an image: ``t5_encodings`` (the caption's sequence, 8 x 64),
``clip_encodings`` (its pooled vector, 64), and the image's "autoencoder posterior" ``mean`` and ``logvar``. The mini's
autoencoder is exact and needs no training: the 32 x 32 x 3 image in [0, 1], each 2 x 2 block of pixels stacked into
channels (``space_to_depth``: a 12 x 16 x 16 latent), and ``logvar`` the variance of the 8-bit rounding (a pixel
stands for any value within half a level of it: (1/255)^2 / 12). A glyph whose caption's SHA-256 is 0 modulo
``VALIDATION_EVERY`` goes to validation (its caption, a combination of words the training captions use, is never
trained on), its timestep index the next of 0..7 in turn.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from trainperf.data import verified
from trainperf.errors import DataError
from trainperf.fileio import atomic_write_text
from trainperf.workloads.flux1 import fixture, glyphs, reference

GENERATOR = "trainperf.workloads.flux1.mini v1"
TRAIN, VALIDATION = "glyphs_train", "glyphs_validation"
ENCODER, MANIFEST = "text_encoder.safetensors", "manifest.json"
SHARDS = 4
VALIDATION_EVERY = 12  # about one glyph in twelve: 512 validation images
BLOCK = 2  # the mini autoencoder's 2 x 2 pixel blocks
LATENT_CHANNELS = 3 * BLOCK * BLOCK
LOGVAR = math.log((1 / 255) ** 2 / 12)  # the 8-bit rounding's variance
SHIFT, SCALE = 0.5, 2.0  # pixels in [0, 1] to [-1, 1] (the reference's autoencoder: 0.1159, 0.3611)
FIX = "run `trainperf data prepare flux1`"


def mini_dir(data_dir: Path) -> Path:
    return Path(data_dir) / "flux1" / "mini"


def files(data_dir: Path) -> reference.Files:
    """The mini's folders as the reference's, after the manifest is checked (a changed file names the fix)."""
    problems = verify_data(data_dir, trust_cache=True)
    if problems:
        raise DataError(f"flux1 mini data: {problems[0]}; {FIX}")
    root = mini_dir(data_dir)
    return reference.Files(root / TRAIN, root / VALIDATION, root / reference.EMPTY)


def read_manifest(data_dir: Path) -> dict:
    return verified.read_manifest(mini_dir(data_dir) / MANIFEST, FIX)


def _header() -> dict:
    return {"generator": GENERATOR, "size": glyphs.SIZE, "text": [glyphs.TEXT_TOKENS, glyphs.TEXT_DIM]}


def verify_data(data_dir: Path, *, trust_cache: bool = False) -> list[str]:
    """Problems with the prepared files (none: ready)."""
    return verified.check_manifest(mini_dir(data_dir) / MANIFEST, FIX, _header(), trust_cache=trust_cache)


def space_to_depth(images: np.ndarray) -> np.ndarray:
    """(N, H, W, 3) uint8 images -> (N, 12, H/2, W/2) float32 latents in [0, 1], channels (colour, row, column)."""
    n, h, w, c = images.shape
    x = images.astype(np.float32).reshape(n, h // BLOCK, BLOCK, w // BLOCK, BLOCK, c) / 255.0
    return x.transpose(0, 5, 2, 4, 1, 3).reshape(n, c * BLOCK * BLOCK, h // BLOCK, w // BLOCK)


def depth_to_space(latents: np.ndarray) -> np.ndarray:
    """The inverse of :func:`space_to_depth`: (N, 12, h, w) in [0, 1] -> (N, 2h, 2w, 3) uint8."""
    n, _, h, w = latents.shape
    x = latents.reshape(n, 3, BLOCK, BLOCK, h, w).transpose(0, 4, 2, 5, 3, 1).reshape(n, h * BLOCK, w * BLOCK, 3)
    return np.clip(np.rint(x * 255.0), 0, 255).astype(np.uint8)


def is_validation(caption: str) -> bool:
    return glyphs.key_rng(caption).integers(VALIDATION_EVERY) == 0


def _rows(items: list[glyphs.Glyph], encoder: glyphs.TextEncoder, *, timesteps: bool) -> dict[str, list]:
    images = np.stack([glyphs.render(g, g.caption) for g in items])
    latents = space_to_depth(images)
    logvar = np.full(latents.shape[1:], LOGVAR, dtype=np.float32)
    logvar_bytes = fixture.to_npy_bytes(logvar)
    rows: dict[str, list] = {"__key__": [], "t5_encodings": [], "clip_encodings": [], "mean": [], "logvar": []}
    for g, latent in zip(items, latents, strict=True):
        seq, pooled = encoder.encode(g.caption)
        rows["__key__"].append(g.caption)
        rows["t5_encodings"].append(fixture.to_npy_bytes(seq))
        rows["clip_encodings"].append(fixture.to_npy_bytes(pooled))
        rows["mean"].append(fixture.to_npy_bytes(latent))
        rows["logvar"].append(logvar_bytes)
    if timesteps:
        rows["timestep"] = [i % 8 for i in range(len(items))]
    return rows


def baselines(valid: list[glyphs.Glyph]) -> dict[str, float]:
    """What a model that learns nothing gets on the validation images: the untrained transformer (its output layer
    starts at zero) scores E[(noise - x_0)^2] = 1 + E[x_0^2], the noise and x_0 being independent."""
    x0 = (space_to_depth(np.stack([glyphs.render(g, g.caption) for g in valid])) - SHIFT) * SCALE
    return {"untrained_loss": round(1.0 + float((x0**2).mean()), 4)}


def prepare_data(data_dir: Path) -> list[Path]:
    """The glyph images, their encodings and the manifest (idempotent: nothing is rewritten when they verify)."""
    root = mini_dir(data_dir)
    if not verify_data(data_dir):
        return []
    for f in glyphs.FAMILIES.values():
        if not (glyphs.font_dir() / f"{f}.ttf").is_file():
            raise DataError(f"{glyphs.font_dir()}: no {f}.ttf; the mini draws matplotlib's DejaVu fonts (reinstall it)")
    encoder = glyphs.TextEncoder.draw()
    every = glyphs.all_glyphs()
    train = [g for g in every if not is_validation(g.caption)]
    valid = [g for g in every if is_validation(g.caption)]
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DataError(f"cannot create data folder {root} ({e.strerror}): choose another with --data-dir") from None
    fixture.write_split(root / TRAIN, _rows(train, encoder, timesteps=False), shards=SHARDS)
    fixture.write_split(root / VALIDATION, _rows(valid, encoder, timesteps=True), shards=1)
    seq, pooled = encoder.encode("")
    (root / reference.EMPTY).mkdir(exist_ok=True)
    np.save(root / reference.EMPTY / reference.T5_EMPTY, seq[None].astype(np.float16))
    np.save(root / reference.EMPTY / reference.CLIP_EMPTY, pooled[None].astype(np.float16))
    encoder.save(root / ENCODER)
    names = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))
    names = [n for n in names if n != MANIFEST]
    manifest = {
        **_header(),
        "images": {"training": len(train), "validation": len(valid)},
        **baselines(valid),
        "files": {n: {"bytes": (root / n).stat().st_size, "sha256": verified.sha256(root / n)} for n in names},
    }
    atomic_write_text(root / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    print(
        f"flux1 mini: {len(train)} training and {len(valid)} validation glyph images; an untrained model's validation "
        f"loss {manifest['untrained_loss']:.3f}"
    )
    return [root / n for n in (*names, MANIFEST)]


def prepare_mini(data_dir: Path) -> list[Path]:
    return prepare_data(data_dir)


def verify_mini(data_dir: Path, *, trust_cache: bool = False) -> list[str]:
    return verify_data(data_dir, trust_cache=trust_cache)
