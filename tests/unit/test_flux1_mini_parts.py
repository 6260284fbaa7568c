"""flux1's mini pieces, each on its own: the glyph images and captions, the fixed text encoder, the exact pixel
autoencoder, the prepared files' manifest, the pictures a run draws and the report's reading of them."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from trainperf.report import pictures as report_pictures
from trainperf.workloads.flux1 import flow, glyphs, mini, pictures
from trainperf.workloads.flux1 import model as flux_model


def test_every_caption_names_what_its_image_shows_and_the_images_differ_by_it():
    every = glyphs.all_glyphs()
    assert len(every) == 62 * 3 * 4 * 8 == len({g.caption for g in every})
    red_a = glyphs.Glyph("A", "capital letter", "serif", "bold", "red")
    img = glyphs.render(red_a, red_a.caption)
    assert img.shape == (glyphs.SIZE, glyphs.SIZE, 3) and img.dtype == np.uint8
    lit = img.reshape(-1, 3)[img.reshape(-1, 3).max(1) > 0]
    assert len(lit) > 30 and (lit[:, 0] >= lit[:, 1]).all()  # a red glyph: red dominates every lit pixel
    # the same caption draws the same image; another character or font draws another
    assert np.array_equal(img, glyphs.render(red_a, red_a.caption))
    for other in (glyphs.Glyph("B", "capital letter", "serif", "bold", "red"),
                  glyphs.Glyph("A", "capital letter", "sans", "regular", "red")):  # fmt: skip
        assert not np.array_equal(img, glyphs.render(other, red_a.caption))


def test_the_text_encoder_is_fixed_and_survives_its_file(tmp_path):
    enc = glyphs.TextEncoder.draw()
    again = glyphs.TextEncoder.draw()
    seq, pooled = enc.encode("blue italic mono digit 7")
    assert seq.shape == (glyphs.TEXT_TOKENS, glyphs.TEXT_DIM) and pooled.shape == (glyphs.TEXT_DIM,)
    assert np.array_equal(seq, again.encode("blue italic mono digit 7")[0])
    assert not np.allclose(seq, enc.encode("blue italic mono digit 8")[0])
    enc.save(tmp_path / "e.safetensors")
    loaded = glyphs.TextEncoder.load(tmp_path / "e.safetensors")
    assert loaded.words == enc.words and np.array_equal(loaded.encode("red bold serif capital letter A")[0],
                                                        enc.encode("red bold serif capital letter A")[0])  # fmt: skip
    with pytest.raises(ValueError, match="purple"):
        enc.encode("purple bold serif capital letter A")


def test_the_pixel_autoencoder_is_exact():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (3, 32, 32, 3), dtype=np.uint8)
    latents = mini.space_to_depth(images)
    assert latents.shape == (3, mini.LATENT_CHANNELS, 16, 16) and 0 <= latents.min() and latents.max() <= 1
    assert np.array_equal(mini.depth_to_space(latents), images)
    # channel (colour c, row r, column k) of latent pixel (i, j) is image pixel (2i + r, 2j + k)'s colour c
    assert latents[1, 2 * 4 + 1 * 2 + 0, 5, 7] == pytest.approx(images[1, 11, 14, 2] / 255.0)


def test_a_changed_prepared_file_is_found_before_the_clock(tmp_path):
    root = mini.mini_dir(tmp_path)
    (root / "glyphs_train").mkdir(parents=True)
    (root / "glyphs_train" / "a.arrow").write_bytes(b"x" * 10)
    from trainperf.data import verified
    from trainperf.fileio import atomic_write_text

    manifest = {**mini._header(), "files": {"glyphs_train/a.arrow": {"bytes": 10, "sha256": verified.sha256(
        root / "glyphs_train" / "a.arrow")}}}  # fmt: skip
    import json

    atomic_write_text(root / mini.MANIFEST, json.dumps(manifest))
    assert mini.verify_data(tmp_path) == []
    (root / "glyphs_train" / "a.arrow").write_bytes(b"y" * 10)
    problems = mini.verify_data(tmp_path)
    assert problems and "a.arrow" in problems[0]
    from trainperf.errors import DataError

    with pytest.raises(DataError, match="trainperf data prepare flux1"):
        mini.files(tmp_path)


def test_the_sampler_integrates_the_velocity_from_noise_to_an_image():
    """A model whose velocity is noise - x_0 for a known x_0 (the exact flow) is brought from the noise to x_0."""
    x0 = torch.rand(2, mini.LATENT_CHANNELS, 16, 16) * 2 - 1
    noise = torch.randn_like(x0)

    class Exact(torch.nn.Module):
        def forward(self, hidden_states, timestep, **_):
            return flow.pack(noise - x0)[:, :, :] + 0 * hidden_states, None

    class Wrapped(torch.nn.Module):
        def forward(self, **kw):
            return Exact()(kw["hidden_states"], kw["timestep"])

    out = pictures.generate(Wrapped(), torch.zeros(2, 8, 64), torch.zeros(2, 64), noise)
    assert torch.allclose(out, x0, atol=1e-5)


def test_the_grid_has_a_row_per_evaluation_and_a_column_per_caption():
    import io

    from PIL import Image

    args = flux_model.FLAVOURS["mini"]
    model = flux_model.build(args)
    state = pictures.weights(model)
    png = pictures.grid(args, [(3200.0, state), (6400.0, state)], glyphs.TextEncoder.draw(), 100001)
    img = Image.open(io.BytesIO(png))
    cell = glyphs.SIZE * pictures.ZOOM
    assert img.size == (pictures.LABEL_W + cell * len(pictures.CAPTIONS), pictures.HEADER_H + 2 * cell)


def test_the_report_reads_only_a_png_inside_the_results(tmp_path):
    folder = tmp_path / "pictures" / "sys" / "flux1"
    folder.mkdir(parents=True)
    good = folder / "result_0.png"
    good.write_bytes(report_pictures.PNG + b"rest")
    (folder / "result_1.png").write_bytes(b"<script>")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.png"
    outside.write_bytes(report_pictures.PNG)
    os.symlink(outside, folder / "result_2.png")
    assert [p.name for p in report_pictures.found(tmp_path, "sys", "flux1")] == [
        "result_0.png", "result_1.png", "result_2.png"]  # fmt: skip
    assert report_pictures.read(good, tmp_path).startswith(report_pictures.PNG)
    with pytest.raises(ValueError, match="not a PNG"):
        report_pictures.read(folder / "result_1.png", tmp_path)
    with pytest.raises(ValueError, match="regular file"):
        report_pictures.read(folder / "result_2.png", tmp_path)
    html = report_pictures.section([("sys", "flux1", tmp_path, "sys")])
    assert "data:image/png;base64," in html and "3 run(s) drew one" in html
