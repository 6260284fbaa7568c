"""flux1's raw route: the user's encoders checked against the transformer's widths before anything loads, a missing
or pickled-only file named with its fix, the autoencoder's posterior split as diffusers' own distribution splits it,
captions tokenized to the reference's lengths, images brought to 256 x 256 RGB, and broken COCO shards refused by
file and sample."""

from __future__ import annotations

import io
import json
import shutil
import tarfile

import numpy as np
import pytest
import torch

from trainperf.errors import DataError
from trainperf.workloads.flux1 import encoders, flow, raw, raw_fixture


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("encoders")
    raw_fixture.write_encoders(root)
    return root


def _copy(encoder_dir, tmp_path):
    target = tmp_path / "encoders"
    shutil.copytree(encoder_dir, target)
    return target


def _edit_config(folder, **values):
    path = folder / "config.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | values))


WIDTHS = {"t5_dim": 4096, "clip_dim": 768, "latent_channels": 16, "image_size": 256}  # the debug flavour's inputs


def test_a_missing_or_pickled_only_file_is_named_with_its_fix(encoder_dir, tmp_path):
    root = _copy(encoder_dir, tmp_path)
    encoders.folders(root)  # complete
    (root / "clip" / "model.safetensors").rename(root / "clip" / "pytorch_model.bin")
    with pytest.raises(DataError, match=r"clip/model\.safetensors: missing; .*text_encoder/.*safetensors"):
        encoders.folders(root)
    (root / "clip" / "pytorch_model.bin").rename(root / "clip" / "model.safetensors")
    (root / "t5" / "tokenizer.json").unlink()
    with pytest.raises(DataError, match=r"t5/tokenizer\.json or spiece\.model: missing"):
        encoders.folders(root)
    with pytest.raises(DataError, match=r"cc12m_disk/state\.json: missing; .*clean_cc12m\.py"):
        raw.find(tmp_path / "nothing")


@pytest.mark.parametrize(
    ("folder", "change", "message"),
    [
        ("t5", {"d_model": 64}, "d_model 64, the transformer's flavour needs 4096"),
        ("clip", {"hidden_size": 512}, "hidden_size 512, the transformer's flavour needs 768"),
        ("autoencoder", {"latent_channels": 4}, "latent_channels 4, the transformer's flavour needs 16"),
        ("autoencoder", {"block_out_channels": [8] * 9}, "an even side"),
        ("autoencoder", {"scaling_factor": 0.18215}, "scaling_factor 0.18215; FLUX.1's autoencoder has 0.3611"),
    ],
)
def test_encoder_widths_are_checked_against_the_transformer(encoder_dir, tmp_path, folder, change, message):
    root = _copy(encoder_dir, tmp_path)
    found = encoders.folders(root)
    encoders.check(found, **WIDTHS)
    _edit_config(root / folder, **change)
    with pytest.raises(DataError, match=message):
        encoders.check(found, **WIDTHS)


def test_the_encoders_give_the_preprocessed_routes_shapes_and_diffusers_posterior(encoder_dir):
    from diffusers import AutoencoderKL

    enc = encoders.Encoders(encoders.folders(encoder_dir), torch.device("cpu"), torch.float32)
    t5_ids, clip_ids = enc.tokens(["a red cat on the mat", "a " * 400])
    assert t5_ids.shape == (2, 256) and clip_ids.shape == (2, 77)  # padded to the length, the long one truncated
    # six words, then </s>, then padding (the fixture's tokenizer has each word)
    assert t5_ids[0, 6] == enc.t5_tokenizer.eos_token_id and t5_ids[0, 7:].eq(enc.t5_tokenizer.pad_token_id).all()
    assert not t5_ids[0, :6].eq(enc.t5_tokenizer.unk_token_id).any()
    images = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (2, 3, 256, 256), dtype=np.uint8))
    out = enc.encode({"image": images, "t5_ids": t5_ids, "clip_ids": clip_ids, "timestep": torch.tensor([3, 5])})
    assert {k: tuple(v.shape) for k, v in out.items()} == {
        "t5": (2, 256, 4096), "clip": (2, 768), "mean": (2, 16, 32, 32), "logvar": (2, 16, 32, 32), "timestep": (2,)
    }  # fmt: skip
    assert all(out[k].dtype == torch.bfloat16 for k in ("t5", "clip", "mean", "logvar"))
    ae = AutoencoderKL.from_pretrained(str(encoder_dir / "autoencoder"), local_files_only=True, use_safetensors=True)
    dist = ae.encode(images.float() / 255 * 2 - 1).latent_dist  # diffusers' own split of the encoder's moments
    assert torch.allclose(out["mean"].float(), dist.mean, atol=0.02) and torch.allclose(
        out["logvar"].float(), dist.logvar, atol=0.02
    )
    t5_empty, clip_empty = enc.empty()
    assert t5_empty.shape == (256, 4096) and clip_empty.shape == (768,)
    x0 = flow.latent(out["mean"].float(), out["logvar"].float(), torch.zeros(2, 16, 32, 32))
    assert torch.allclose(x0, (dist.mean - flow.AE_SHIFT) * flow.AE_SCALE, atol=0.01)  # the preprocessed route's draw


def _png(width, height, mode="RGB"):
    from PIL import Image

    buf = io.BytesIO()
    Image.new(mode, (width, height), 128).save(buf, format="PNG")
    return buf.getvalue()


def test_images_become_256_square_rgb():
    assert raw.pixels(_png(320, 256), "x").shape == (3, 256, 256)  # the longer side cropped
    assert raw.pixels(_png(64, 100), "x").shape == (3, 256, 256)  # a small one enlarged, as COCO's processor does
    grey = raw.pixels(_png(256, 256, "L"), "x")
    assert grey.dtype == np.uint8 and (grey == 128).all()  # converted to three equal channels
    with pytest.raises(DataError, match="row 3: not an image"):
        raw.pixels(b"not a png", "row 3")


def _shard(path, samples):
    with tarfile.open(path, "w") as tar:
        for name, data in samples:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_coco_shards_are_read_in_place_and_broken_samples_named(tmp_path):
    folder = tmp_path / "coco"
    folder.mkdir()
    meta = json.dumps({"id": "7", "timestep": 5}).encode()
    _shard(folder / "shard_00000.tar", [("000000000007.png", _png(256, 256)), ("000000000007.txt", b"a cat"),
                                        ("000000000007.json", meta)])  # fmt: skip
    split = raw.load_shards(folder)
    assert len(split) == 1 and split.timesteps.tolist() == [5]
    images, captions = raw.batch(split, np.array([0]))
    assert images.shape == (1, 3, 256, 256) and captions == ["a cat"]
    _shard(folder / "shard_00001.tar", [("000000000008.png", _png(256, 256)), ("000000000008.txt", b"a dog")])
    with pytest.raises(DataError, match=r"shard_00001\.tar: sample '000000000008': no \.json"):
        raw.load_shards(folder)
    _shard(folder / "shard_00001.tar", [("000000000008.png", _png(256, 256)), ("000000000008.txt", b"a dog"),
                                        ("000000000008.json", json.dumps({"timestep": 9}).encode())])  # fmt: skip
    with pytest.raises(DataError, match="timestep 9; a validation sample's timestep index is 0..7"):
        raw.load_shards(folder)
