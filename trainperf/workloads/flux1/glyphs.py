"""The mini flux1's captioned images: letters and digits drawn in the DejaVu fonts that matplotlib ships, each image
captioned with what it shows ("red bold serif capital letter R"), and the small fixed text encoder that stands for
the reference's T5 and CLIP.

Why these images: the mini needs captioned pictures made offline and the same on every machine, whose captions say
what the picture shows, so that a model which reads the text does measurably better than one that ignores it. A
glyph's character, font family, weight, slant and colour are each visible and each named by the caption; its size and
place are drawn at random and not named (what the text cannot tell). matplotlib's wheel carries the DejaVu fonts
(Sans, Serif, Sans Mono, each regular, bold, oblique and bold oblique) and Pillow (pinned in constraints.txt) draws
them with its own FreeType, so the pixels do not depend on the machine's fonts.

The text encoder (:class:`TextEncoder`): each caption word has a fixed random vector (drawn from :data:`ENCODER_SEED`
at prepare, saved as safetensors beside the data), a caption is its words' vectors plus a position vector each,
padded to :data:`TEXT_TOKENS` with the padding word's vector (the reference's T5 sequence), and their mean is the
pooled vector (the reference's pooled CLIP output). It learns nothing: as in the reference, the text encoders are
fixed and the transformer learns to read them.
"""

from __future__ import annotations

import hashlib
import itertools
import string
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SIZE = 32  # pixels a side
TEXT_TOKENS, TEXT_DIM = 8, 64  # a caption's encoded length and width (the reference's T5: 256 x 4,096)
ENCODER_SEED = 20260601
PAD = "<pad>"
COLOURS = {
    "red": (230, 40, 40), "green": (40, 200, 60), "blue": (50, 90, 240), "yellow": (240, 220, 40),
    "cyan": (40, 220, 230), "magenta": (220, 50, 210), "orange": (245, 140, 20), "white": (245, 245, 245),
}  # fmt: skip
FAMILIES = {"sans": "DejaVuSans", "serif": "DejaVuSerif", "mono": "DejaVuSansMono"}
STYLES = {  # caption words -> the font file's suffix in each family (sans and mono: Oblique; serif: Italic)
    "regular": {"sans": "", "serif": "", "mono": ""},
    "bold": {"sans": "-Bold", "serif": "-Bold", "mono": "-Bold"},
    "italic": {"sans": "-Oblique", "serif": "-Italic", "mono": "-Oblique"},
    "bold italic": {"sans": "-BoldOblique", "serif": "-BoldItalic", "mono": "-BoldOblique"},
}
KINDS = (("capital letter", string.ascii_uppercase), ("small letter", string.ascii_lowercase), ("digit", string.digits))
FONT_PX, JITTER = 24, 1  # a glyph's font size; it is centred, then moved by up to JITTER pixels each way at random


@dataclass(frozen=True)
class Glyph:
    char: str
    kind: str
    family: str
    style: str
    colour: str

    @property
    def caption(self) -> str:
        return f"{self.colour} {self.style} {self.family} {self.kind} {self.char}"


def all_glyphs() -> list[Glyph]:
    """Every (character, family, style, colour): 62 x 3 x 4 x 8 = 5,952, in a fixed order."""
    out = []
    for (kind, chars), family, style, colour in itertools.product(KINDS, FAMILIES, STYLES, COLOURS):
        out.extend(Glyph(c, kind, family, style, colour) for c in chars)
    return out


def vocabulary() -> list[str]:
    """Every word a caption can hold, the padding word first."""
    words = {*COLOURS, *FAMILIES, *string.ascii_letters, *string.digits}
    for phrase in (*STYLES, *(k for k, _ in KINDS)):
        words.update(phrase.split())
    return [PAD, *sorted(words)]


def font_dir() -> Path:
    import matplotlib

    return Path(matplotlib.get_data_path()) / "fonts" / "ttf"


def font_path(g: Glyph) -> Path:
    return font_dir() / f"{FAMILIES[g.family]}{STYLES[g.style][g.family]}.ttf"


def key_rng(key: str) -> np.random.Generator:
    """A generator seeded by ``key`` alone: a sample's size and place are the same on every machine."""
    return np.random.default_rng(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))


def render(g: Glyph, key: str) -> np.ndarray:
    """The glyph drawn on black, SIZE x SIZE x 3 uint8, centred, then moved a little at random (drawn from ``key``)."""
    from PIL import Image, ImageDraw, ImageFont

    rng = key_rng(key)
    font = ImageFont.truetype(str(font_path(g)), size=FONT_PX)
    left, top, right, bottom = font.getbbox(g.char)
    x = (SIZE - (right - left)) // 2 - left + int(rng.integers(-JITTER, JITTER + 1))
    y = (SIZE - (bottom - top)) // 2 - top + int(rng.integers(-JITTER, JITTER + 1))
    img = Image.new("RGB", (SIZE, SIZE))
    ImageDraw.Draw(img).text((x, y), g.char, font=font, fill=COLOURS[g.colour])
    return np.asarray(img, dtype=np.uint8)


class TextEncoder:
    """The mini's fixed text encoder: a word table and position table (see the module's docstring)."""

    def __init__(self, words: list[str], table: np.ndarray, positions: np.ndarray) -> None:
        if table.shape != (len(words), TEXT_DIM) or positions.shape != (TEXT_TOKENS, TEXT_DIM):
            raise ValueError(f"text encoder: tables {table.shape}, {positions.shape} for {len(words)} words")
        self.words, self.table, self.positions = words, table, positions
        self.index = {w: i for i, w in enumerate(words)}

    @classmethod
    def draw(cls) -> TextEncoder:
        """The encoder every machine makes: unit-variance vectors from :data:`ENCODER_SEED`; positions at 0.5."""
        rng = np.random.default_rng(ENCODER_SEED)
        words = vocabulary()
        table = rng.standard_normal((len(words), TEXT_DIM)).astype(np.float32)
        positions = (0.5 * rng.standard_normal((TEXT_TOKENS, TEXT_DIM))).astype(np.float32)
        return cls(words, table, positions)

    def tokens(self, caption: str) -> list[int]:
        words = caption.split()
        unknown = [w for w in words if w not in self.index]
        if unknown or len(words) > TEXT_TOKENS:
            raise ValueError(
                f"caption {caption!r}: words {unknown} not in the mini's vocabulary, or over {TEXT_TOKENS}"
            )
        return [self.index[w] for w in words] + [0] * (TEXT_TOKENS - len(words))

    def encode(self, caption: str) -> tuple[np.ndarray, np.ndarray]:
        """(sequence TEXT_TOKENS x TEXT_DIM, pooled TEXT_DIM) float32; the empty caption is all padding."""
        seq = self.table[self.tokens(caption)] + self.positions
        return seq, seq.mean(0)

    def save(self, path: Path) -> None:
        from safetensors.numpy import save_file

        save_file(
            {"words": self.table, "positions": self.positions}, str(path), metadata={"vocabulary": " ".join(self.words)}
        )

    @classmethod
    def load(cls, path: Path) -> TextEncoder:
        from safetensors import safe_open

        with safe_open(str(path), framework="numpy") as f:
            words = (f.metadata() or {}).get("vocabulary", "").split(" ")
            return cls(words, f.get_tensor("words"), f.get_tensor("positions"))
