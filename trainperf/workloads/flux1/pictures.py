"""What the mini flux1 model draws: images generated from fixed captions with the weights of each evaluation, as one
PNG grid (a row an evaluation, a column a caption), made after ``run_stop`` so that drawing costs the timed run
nothing. The reference scale draws nothing: its preprocessed route has no image decoder.

Generation integrates the learnt velocity from pure noise (t = 1) to an image (t = 0) with :data:`STEPS` Euler steps
(x_{t - dt} = x_t - dt v(x_t, t)), the same noise for every row, so that the rows differ only by training.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import torch

from trainperf import seeds
from trainperf.workloads.flux1 import flow, glyphs, mini
from trainperf.workloads.flux1 import model as flux_model

G = glyphs.Glyph
SHOWN = (  # (character, kind, family, style, colour): one of each kind, family, style and colour
    G("A", "capital letter", "serif", "bold", "red"),
    G("g", "small letter", "sans", "regular", "green"),
    G("7", "digit", "mono", "italic", "blue"),
    G("R", "capital letter", "sans", "bold italic", "yellow"),
    G("e", "small letter", "serif", "regular", "white"),
    G("Q", "capital letter", "mono", "bold", "magenta"),
    G("3", "digit", "serif", "italic", "cyan"),
    G("k", "small letter", "sans", "regular", "orange"),
)
CAPTIONS = tuple(g.caption for g in SHOWN)
STEPS = 16
ZOOM, LABEL_W, HEADER_H = 3, 110, 38  # each image drawn 3x; the row labels' width, the captions' height
PICTURE_NOISE = 9  # the key of the grid's noise stream: (seed, STREAM_DATA, PICTURE_NOISE)


@torch.no_grad()
def generate(model: torch.nn.Module, t5: torch.Tensor, clip: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """Latents x_0 from ``noise`` (x_1) by Euler steps of the model's velocity."""
    x, ts = noise, torch.linspace(1.0, 0.0, STEPS + 1)
    for a, b in zip(ts[:-1], ts[1:], strict=True):
        v = flow.predict(model, x, a.expand(len(x)), t5, clip)
        x = x - (a - b) * v
    return x


def _font(size: int):
    from PIL import ImageFont

    return ImageFont.truetype(str(glyphs.font_dir() / "DejaVuSans.ttf"), size=size)


def grid(args: flux_model.FluxArgs, snapshots: list[tuple[float, Any]], encoder: glyphs.TextEncoder, seed: int):
    """The PNG bytes of the grid: each snapshot's images of :data:`CAPTIONS`, labelled by the samples trained."""
    from PIL import Image, ImageDraw

    model = flux_model.build(args).eval()
    encoded = [encoder.encode(c) for c in CAPTIONS]
    t5 = torch.from_numpy(np.stack([e[0] for e in encoded]))
    clip = torch.from_numpy(np.stack([e[1] for e in encoded]))
    side = glyphs.SIZE // mini.BLOCK
    g = seeds.torch_generator(seed, seeds.STREAM_DATA, PICTURE_NOISE)
    noise = torch.randn(len(CAPTIONS), mini.LATENT_CHANNELS, side, side, generator=g)
    cell = glyphs.SIZE * ZOOM
    sheet = Image.new("RGB", (LABEL_W + cell * len(CAPTIONS), HEADER_H + cell * len(snapshots)), (255, 255, 255))
    draw, small = ImageDraw.Draw(sheet), _font(10)
    for j, shown in enumerate(SHOWN):
        for k, line in enumerate((f"{shown.colour} {shown.style}", shown.family, f"{shown.kind} {shown.char}")):
            draw.text((LABEL_W + j * cell + 2, 2 + 11 * k), line, fill=(0, 0, 0), font=small)
    for i, (progress, state) in enumerate(snapshots):
        model.load_state_dict(state)
        x0 = generate(model, t5, clip, noise)
        images = mini.depth_to_space((x0 / mini.SCALE + mini.SHIFT).clamp(0, 1).numpy())
        top = HEADER_H + i * cell
        draw.text((4, top + cell // 2 - 6), f"{progress:,.0f} samples", fill=(0, 0, 0), font=small)
        for j, image in enumerate(images):
            tile = Image.fromarray(image).resize((cell, cell), Image.NEAREST)
            sheet.paste(tile, (LABEL_W + j * cell, top))
    buf = io.BytesIO()
    sheet.save(buf, format="PNG")
    return buf.getvalue()


def weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A copy of the model's weights on the CPU, whole (FSDP's shards gathered: every rank takes part)."""
    out = {}
    for name, v in model.state_dict().items():
        full = v.full_tensor() if hasattr(v, "full_tensor") else v
        out[name] = full.detach().to("cpu", torch.float32, copy=True)
    return out
