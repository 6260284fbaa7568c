"""resnet's reference training input: the fast CPU path and the device path's CPU twin give the plain path's
numbers, bit for bit, from the same draws (so the crop boxes, flips and outputs are distributed as the plain
path's, which tests/unit/test_resnet_crop.py checks against the reference's rule)."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image

from trainperf.workloads.resnet import data, gpu_decode


def _photo(height: int, width: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[:height, :width]
    smooth = np.stack([np.sin(x / (7 + 5 * c) + y / (11 + 3 * c)) for c in range(3)], -1) * 80 + 128
    return np.clip(smooth + rng.normal(0, 12, (height, width, 3)), 0, 255).astype(np.uint8)


@pytest.mark.parametrize(
    "height,width", [(375, 500), (333, 500), (90, 60), (600, 450)]
)  # ImageNet's common sizes, one whose crops are all smaller than the output (upsampled), one with crops over 448 tall
@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "torch"])
def test_fast_transform_gives_the_plain_transforms_numbers_and_draws(height, width, compiled, monkeypatch):
    if not compiled:  # the path where _window.c did not build
        monkeypatch.setattr(data, "_window", None)
    image = Image.fromarray(_photo(height, width, height), "RGB")
    plain, fast = data.PlainReferenceTrainTransform(), data.ReferenceTrainTransform()
    for seed in range(25):
        torch.manual_seed(seed)
        expected = plain(image)
        after_plain = torch.rand(())  # the same number of draws from the generator
        torch.manual_seed(seed)
        got = fast(np.asarray(image))
        assert torch.rand(()) == after_plain
        assert got.shape == (3, 224, 224) and got.dtype == torch.float32
        assert torch.equal(got, expected), seed


def test_cpu_batches_are_the_default_collations_values_in_channels_last_memory(tmp_path):
    from torch.utils.data import default_collate

    data.write_smoke_fixture(tmp_path)
    train, _ = data.imagenet_datasets(tmp_path, classes=None)
    samples = [train[i] for i in range(6)]
    images, labels = data.collate_channels_last(samples)
    expected_images, expected_labels = default_collate(samples)
    assert images.shape == (6, 3, 224, 224) and images.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(images, expected_images) and torch.equal(labels, expected_labels)


def _jpeg(pixels: np.ndarray, mode: str = "RGB", **options) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(pixels, "RGB").convert(mode).save(buf, "JPEG", quality=90, **options)
    return buf.getvalue()


@pytest.mark.parametrize(
    "mode,options",
    [("RGB", {"subsampling": 2}), ("RGB", {"subsampling": 1}), ("RGB", {"subsampling": 0}), ("L", {}), ("CMYK", {})],
)
def test_read_rgb_gives_the_pixels_of_imagefolders_pil_loader(tmp_path, mode, options):
    from torchvision.datasets.folder import default_loader

    path = tmp_path / "x.JPEG"
    path.write_bytes(_jpeg(_photo(75, 100, 1), mode, **options))
    got = data.read_rgb(path)
    assert got.shape == (75, 100, 3) and got.dtype == np.uint8
    assert np.array_equal(got, np.asarray(default_loader(path)))


def test_read_rgb_reads_a_png_named_jpeg_as_imagefolder_does(tmp_path):
    path = tmp_path / "n02105855_2933.JPEG"  # ImageNet's one PNG under a .JPEG name
    Image.fromarray(_photo(40, 30, 2), "RGB").save(path, "PNG")
    assert np.array_equal(data.read_rgb(path), _photo(40, 30, 2))


def test_the_device_paths_cpu_twin_gives_the_cpu_paths_batches(tmp_path):
    data.write_smoke_fixture(tmp_path)  # RGB, greyscale and CMYK JPEGs of several sizes
    train, _ = data.imagenet_datasets(tmp_path, classes=None)
    encoded = gpu_decode.imagenet_train_set(tmp_path)
    assert encoded.samples == train.samples
    for seed in range(2):
        torch.manual_seed(seed)
        expected = [train[i] for i in range(len(train))]
        torch.manual_seed(seed)
        batch, labels = gpu_decode.collate([encoded[i] for i in range(len(encoded))])
        assert any(im.ndim == 3 for im in batch.images) and any(im.ndim == 1 for im in batch.images)
        images = gpu_decode.decode_and_augment(batch, "cpu")
        assert torch.equal(images, torch.stack([x for x, _ in expected]))
        assert labels.tolist() == [y for _, y in expected]


def test_header_reader_tells_three_channel_jpegs_from_the_rest():
    rgb = _jpeg(_photo(37, 53, 3))
    assert gpu_decode._is_rgb_jpeg(rgb) == (37, 53)
    assert gpu_decode._is_rgb_jpeg(_jpeg(_photo(37, 53, 3), progressive=True)) == (37, 53)
    assert gpu_decode._is_rgb_jpeg(_jpeg(_photo(37, 53, 3), "L")) is None
    assert gpu_decode._is_rgb_jpeg(_jpeg(_photo(37, 53, 3), "CMYK")) is None
    assert gpu_decode._is_rgb_jpeg(b"\x89PNG\r\n\x1a\n" + rgb) is None
    assert gpu_decode._is_rgb_jpeg(rgb[:20]) is None


def test_a_file_the_devices_decoder_refuses_is_decoded_alone_on_the_cpu(tmp_path, monkeypatch):
    import torchvision.io

    data.write_smoke_fixture(tmp_path)
    encoded = gpu_decode.imagenet_train_set(tmp_path)
    torch.manual_seed(0)
    batch, _ = gpu_decode.collate([encoded[i] for i in range(4)])
    expected = gpu_decode.decode_and_augment(batch, "cpu")
    real, refused = torchvision.io.decode_jpeg, next(im for im in batch.images if im.ndim == 1)

    def device_decoder(images, *args, device=None, **kwargs):  # stands for nvJPEG refusing one file of the batch
        if isinstance(images, list) or (device is not None and images is refused):
            raise RuntimeError("nvjpeg: unsupported file")
        return real(images, *args, **kwargs) if device is None else real(images, *args, device=device, **kwargs)

    monkeypatch.setattr(torchvision.io, "decode_jpeg", device_decoder)
    assert torch.equal(gpu_decode.decode_and_augment(batch, "cpu"), expected)


def test_a_jpeg_no_decoder_reads_is_a_data_error_naming_the_file(tmp_path):
    from trainperf.errors import DataError

    data.write_smoke_fixture(tmp_path)
    path = next((tmp_path / "train").rglob("*.JPEG"))
    whole = _jpeg(_photo(64, 64, 4))
    path.write_bytes(whole[:200] + bytes(len(whole) - 202) + whole[-2:])  # the header kept, the scan zeroed
    encoded = gpu_decode.imagenet_train_set(tmp_path)
    batch, _ = gpu_decode.collate([encoded[[p for p, _ in encoded.samples].index(str(path))]])
    with pytest.raises(DataError, match=rf"{path.name} is not a decodable JPEG"):
        gpu_decode.decode_and_augment(batch, "cpu")


# --- the compiled window decoder and resize (_window.c) ---------------------------------------------------------
def test_the_compiled_window_module_is_built():
    # scripts/setup.sh installs libjpeg's headers and the editable install builds it; without it the reference
    # path is the slower whole-image one, so a checkout that lost the build must fail here, not run slower
    assert data._window is not None, "trainperf/workloads/resnet/_window.c did not build: run `make setup`"


@pytest.mark.parametrize(
    "height,width,options",
    [
        (375, 500, {"subsampling": 2}),  # 4:2:0, ImageNet's usual
        (333, 500, {"subsampling": 1}),  # 4:2:2
        (101, 67, {"subsampling": 0}),  # 4:4:4, sizes no block divides
        (240, 320, {"subsampling": 2, "progressive": True}),
        (97, 131, {"subsampling": 2, "restart_marker_rows": 1}),
    ],
)
def test_window_decode_gives_the_whole_images_pixels(height, width, options):
    import simplejpeg

    raw = _jpeg(_photo(height, width, width), **options)
    whole = simplejpeg.decode_jpeg(raw, "RGB")
    assert np.array_equal(whole, data.decode_rgb(raw, "x.JPEG"))
    rng = np.random.default_rng(height)
    windows = [(0, 0, height, width), (height - 1, width - 1, 1, 1), (0, width - 17, height, 17)]
    for _ in range(60):
        top, left = int(rng.integers(height)), int(rng.integers(width))
        windows.append((top, left, int(rng.integers(1, height - top + 1)), int(rng.integers(1, width - left + 1))))
    for top, left, h, w in windows:
        out = np.empty((h, w, 3), np.uint8)
        data._window.decode_window(raw, top, left, h, w, out)
        assert np.array_equal(out, whole[top : top + h, left : left + w]), (top, left, h, w)


def test_training_set_decodes_only_the_window_and_gives_the_plain_paths_numbers(tmp_path):
    from torchvision.datasets.folder import default_loader

    data.write_smoke_fixture(tmp_path)  # RGB, greyscale and CMYK JPEGs of several sizes
    train, _ = data.imagenet_datasets(tmp_path, classes=None)
    loaded = [train.loader(p) for p, _ in train.samples]
    assert any(isinstance(x, data.EncodedJpeg) for x in loaded) and any(isinstance(x, np.ndarray) for x in loaded)
    plain = data.PlainReferenceTrainTransform()
    for seed in range(3):
        for i, (path, _) in enumerate(train.samples):
            torch.manual_seed(seed * 100 + i)
            expected = plain(default_loader(path))
            torch.manual_seed(seed * 100 + i)
            assert torch.equal(train[i][0], expected), (seed, path)


def test_a_jpeg_the_window_decoder_refuses_is_decoded_whole_with_the_same_draws(tmp_path):
    whole = _jpeg(_photo(120, 160, 5))
    path = tmp_path / "cut.JPEG"
    path.write_bytes(whole[: len(whole) * 2 // 3] + b"\xff\xd9")  # the scan cut short: libjpeg warns at the cut
    image = data.read_train_image(path)
    assert isinstance(image, data.EncodedJpeg) and (image.height, image.width) == (120, 160)
    with pytest.raises(ValueError, match="JPEG window decode: Corrupt JPEG data"):
        data._window.decode_window(image.raw, 0, 0, 120, 160, np.empty((120, 160, 3), np.uint8))
    transform = data.ReferenceTrainTransform()
    for seed in range(20):  # windows above the cut decoded alone, the others whole
        torch.manual_seed(seed)
        expected = transform(data.read_rgb(path))  # torchvision's decoder, which keeps what it could decode
        torch.manual_seed(seed)
        assert torch.equal(transform(image), expected), seed


def test_a_jpeg_no_decoder_reads_whole_is_a_data_error_naming_the_file(tmp_path):
    from trainperf.errors import DataError

    whole = _jpeg(_photo(120, 160, 5))
    path = tmp_path / "cut.JPEG"
    path.write_bytes(whole[: len(whole) // 4])  # the header and the scan's first quarter, no end marker
    with pytest.raises(DataError, match="cut.JPEG: not an image PIL or libjpeg can read"):
        data.read_rgb(path)
    image = data.read_train_image(path)
    torch.manual_seed(0)
    with pytest.raises(DataError, match="cut.JPEG"):
        for _ in range(20):  # some window needs rows past the cut
            data.ReferenceTrainTransform()(image)


def _resize(module, size, window, out_shape):
    pixels, out = np.zeros((40, 30, 3), np.uint8), np.empty(out_shape, np.float32)
    module.resize_window(pixels, *size, *window, False, out, (0.0, 0.0, 0.0))


@pytest.mark.parametrize(
    "call",
    [
        lambda w, raw: w.decode_window(raw, 0, 0, 41, 30, np.empty((41, 30, 3), np.uint8)),  # taller than the image
        lambda w, raw: w.decode_window(raw, 0, 30, 1, 1, np.empty((1, 1, 3), np.uint8)),  # right of it
        lambda w, raw: w.decode_window(raw, -1, 0, 1, 1, np.empty((1, 1, 3), np.uint8)),
        lambda w, raw: w.decode_window(raw, 0, 0, 4, 4, np.empty((4, 4, 2), np.uint8)),  # buffer too small
        lambda w, raw: w.decode_window(b"\xff\xd8 not a JPEG", 0, 0, 1, 1, np.empty((1, 1, 3), np.uint8)),
        lambda w, raw: w.decode_window(_jpeg(_photo(40, 30, 6), "L"), 0, 0, 1, 1, np.empty((1, 1, 3), np.uint8)),
        lambda w, raw: _resize(w, (40, 30), (0, 1, 40, 30), (224, 224, 3)),  # the window past the edge
        lambda w, raw: _resize(w, (41, 30), (0, 0, 40, 30), (224, 224, 3)),  # a size the buffer does not have
        lambda w, raw: _resize(w, (40, 30), (0, 0, 40, 30), (224, 224, 2)),  # an output buffer too small
    ],
)
def test_the_compiled_module_refuses_windows_and_buffers_that_do_not_fit(call):
    with pytest.raises(ValueError):
        call(data._window, _jpeg(_photo(40, 30, 6)))


def test_a_jpeg_whose_header_claims_a_huge_image_is_refused_before_any_memory_is_taken(tmp_path):
    from trainperf.errors import DataError

    raw = bytearray(_jpeg(_photo(40, 30, 7)))
    sof = raw.index(b"\xff\xc0")
    raw[sof + 5 : sof + 9] = (60000).to_bytes(2, "big") * 2  # height and width
    path = tmp_path / "bomb.JPEG"
    path.write_bytes(bytes(raw))
    with pytest.raises(DataError, match="bomb.JPEG: its JPEG header says 60000x60000 pixels"):
        data.read_train_image(path)
