"""resnet's reference datasets (the mini scale's Fashion-MNIST is in :mod:`.mini_data`).

ImageNet-1k in the standard layout ``<root>/train/<wnid>/*.JPEG`` and
``<root>/val/<wnid>/*.JPEG``, read with torchvision's ImageFolder and the reference's transforms
(mlcommons/training ``image_classification/tensorflow2/imagenet_preprocessing.py``): training crops
are drawn by TensorFlow's ``sample_distorted_bounding_box`` rule (:func:`distorted_box_window`), flipped at
random and resized to 224x224 without keeping the aspect ratio; evaluation resizes the shorter side to 256
and crops the central 224x224; both resize with TensorFlow 1's bilinear rule (:func:`tf1_resize_bilinear`)
and subtract the reference's per-channel means on the 0-255 scale, dividing by nothing.
:func:`write_smoke_fixture` writes a tiny data set in this layout for ``--smoke``.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from trainperf.errors import DataError

try:  # the compiled window decoder and resize (_window.c, built at install where libjpeg's headers are)
    from trainperf.workloads.resnet import _window
except ImportError:  # not built: whole-image decodes and the torch resize, the same numbers
    _window = None

# The reference's preprocessing constants (imagenet_preprocessing.py): _R_MEAN, _G_MEAN, _B_MEAN on the
# 0-255 scale, no division by a deviation; sample_distorted_bounding_box's arguments; the output size and
# the shorter side before the evaluation crop (DEFAULT_IMAGE_SIZE, _RESIZE_MIN).
REFERENCE_MEAN_255 = (123.68, 116.78, 103.94)
CROP_AREA = (0.05, 1.0)
CROP_ASPECT = (0.75, 1.33)
CROP_MIN_OBJECT_COVERED = 0.1
CROP_MAX_ATTEMPTS = 100
OUTPUT_SIZE = 224
EVAL_RESIZE_MIN = 256
IMAGENET_CLASSES = 1000


def _randint(n: int, generator: torch.Generator | None) -> int:
    """A uniform integer in [0, n)."""
    return int(torch.randint(n, (1,), generator=generator))


def _try_crop(height: int, width: int, aspect: np.float32, generator: torch.Generator | None):
    """One attempt of TensorFlow's GenerateRandomCrop: (top, left, crop height, crop width), or None.

    The crop's height is an integer drawn uniformly between the heights that give the smallest and the
    largest allowed area at this aspect ratio (not its area: larger crops are rarer than under an area-uniform
    rule), its width the height times the ratio rounded half to even, its corner uniform in [0, size - crop)
    (the crop never touches the far edges unless it spans the image). Single-precision arithmetic, as there.
    """
    f32 = np.float32
    min_area = f32(CROP_AREA[0]) * f32(width) * f32(height)
    max_area = f32(CROP_AREA[1]) * f32(width) * f32(height)
    crop_h = int(np.rint(np.sqrt(min_area / aspect)))
    max_h = int(np.rint(np.sqrt(max_area / aspect)))
    if np.rint(f32(max_h) * aspect) > width:  # the tallest crop whose rounded width still fits
        max_h = int((width + 0.5 - 1e-7) / float(aspect))
        if np.rint(f32(max_h) * aspect) > width:
            max_h -= 1
    max_h = min(max_h, height)
    crop_h = min(crop_h, max_h)
    if crop_h < max_h:
        crop_h += _randint(max_h - crop_h + 1, generator)
    crop_w = int(np.rint(f32(crop_h) * aspect))
    area = f32(crop_w * crop_h)
    if area < min_area:  # rounding left it too small: one row more
        crop_h += 1
        crop_w = int(np.rint(f32(crop_h) * aspect))
        area = f32(crop_w * crop_h)
    if area > max_area:  # or too large: one row less
        crop_h -= 1
        crop_w = int(np.rint(f32(crop_h) * aspect))
        area = f32(crop_w * crop_h)
    if area < min_area or area > max_area or crop_w > width or crop_h > height or crop_w <= 0 or crop_h <= 0:
        return None
    top = _randint(height - crop_h, generator) if crop_h < height else 0
    left = _randint(width - crop_w, generator) if crop_w < width else 0
    return top, left, crop_h, crop_w


def distorted_box_window(
    height: int, width: int, *, generator: torch.Generator | None = None
) -> tuple[int, int, int, int]:
    """The reference's training crop window (top, left, crop height, crop width) for an image of this size.

    TensorFlow's ``sample_distorted_bounding_box`` as the reference calls it (min_object_covered 0.1, aspect
    0.75-1.33, area 0.05-1, 100 attempts, ``use_image_if_no_bounding_boxes``) on ImageNet records that carry
    no boxes, so the one object box is the whole image: each attempt draws an aspect ratio uniformly, then a
    crop (:func:`_try_crop`); the crop is kept when it covers at least 0.1 of the object box, here 10 % of
    the image (which raises the effective lower area bound from 5 % to 10 %), and at least one pixel. When
    every attempt fails the window is the whole image.
    """
    image_area = np.float32(height * width)
    lo, hi = (np.float32(a) for a in CROP_ASPECT)
    for _ in range(CROP_MAX_ATTEMPTS):
        u = np.float32(torch.rand((), generator=generator))
        window = _try_crop(height, width, u * (hi - lo) + lo, generator)
        if window is None:
            continue
        crop_area = np.float32(window[2] * window[3])
        if crop_area >= 1 and crop_area / image_area >= np.float32(CROP_MIN_OBJECT_COVERED):
            return window
    return 0, 0, height, width


def tf1_resize_bilinear(
    image: torch.Tensor, size: tuple[int, int], *, rows: slice = slice(None), cols: slice = slice(None)
) -> torch.Tensor:
    """Resize a (C, H, W) image to ``size`` = (height, width) as the reference does, float32 out.

    ``tf.compat.v1.image.resize(method=BILINEAR, align_corners=False)``: output pixel i samples the input at
    i * (in / out) (no half-pixel offset, so the grid is anchored at the top-left corner), interpolating
    between floor and the next pixel (clamped at the last), without antialiasing; along each row first, then
    between rows, as TensorFlow's kernel computes it. ``rows``, ``cols``: compute only that part of the output
    (a crop of the resized image, without resizing the rest).
    """
    out_h, out_w = size
    in_h, in_w = image.shape[1], image.shape[2]

    def axis(n_in: int, n_out: int, part: slice) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        pos = torch.arange(n_out, dtype=torch.float32)[part] * np.float32(n_in / n_out)
        lower = pos.floor()
        upper = torch.minimum(pos.ceil(), torch.tensor(float(n_in - 1)))
        return lower.long(), upper.long(), pos - lower

    y0, y1, wy = axis(in_h, out_h, rows)
    x0, x1, wx = axis(in_w, out_w, cols)
    # the four neighbours of every output pixel, gathered from the 8-bit image before any arithmetic
    upper, lower = image.index_select(1, y0), image.index_select(1, y1)
    tl, tr = upper.index_select(2, x0).float(), upper.index_select(2, x1).float()
    bl, br = lower.index_select(2, x0).float(), lower.index_select(2, x1).float()
    top = tl + (tr - tl) * wx
    bottom = bl + (br - bl) * wx
    return top + (bottom - top) * wy[:, None]


def _reference_input(image: torch.Tensor) -> torch.Tensor:
    """(3, H, W) float on the 0-255 scale, less the reference's channel means."""
    return image.sub_(torch.tensor(REFERENCE_MEAN_255)[:, None, None])


def _chw(img) -> torch.Tensor:
    """An RGB PIL image as a uint8 (3, H, W) tensor."""
    return torch.from_numpy(np.asarray(img, dtype=np.uint8).copy()).permute(2, 0, 1)


class PlainReferenceTrainTransform:
    """The reference's training preprocessing of one RGB PIL image, written as the reference states it: the
    distorted-box crop (:func:`distorted_box_window`), a horizontal flip with probability 1/2, a resize to
    224x224 that does not keep the aspect ratio (:func:`tf1_resize_bilinear`), the channel means subtracted. In
    this order, as the reference's ``_decode_crop_and_flip`` and ``_resize_image``: with a corner-anchored
    resize, flipping before and after resizing differ. Draws from torch's default generator (a DataLoader seeds
    each worker's). :class:`ReferenceTrainTransform` computes the same numbers faster; this one is its oracle
    (tests/unit/test_resnet_fast_path.py) and its peer in ``benchmarks/data_throughput.py``."""

    def __call__(self, img) -> torch.Tensor:
        top, left, h, w = distorted_box_window(img.height, img.width)
        pixels = _chw(img.crop((left, top, left + w, top + h)))
        if float(torch.rand(())) < 0.5:
            pixels = pixels.flip(2)
        return _reference_input(tf1_resize_bilinear(pixels, (OUTPUT_SIZE, OUTPUT_SIZE)))


def _tf1_axis(n_in: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`tf1_resize_bilinear`'s sampling along one axis of ``n_in`` pixels to 224, in numpy: (lower, upper,
    weight of upper), the same float32 numbers."""
    pos = np.arange(OUTPUT_SIZE, dtype=np.float32) * np.float32(n_in / OUTPUT_SIZE)
    lower = np.floor(pos)
    upper = np.minimum(np.ceil(pos), np.float32(n_in - 1))
    return lower.astype(np.intp), upper.astype(np.intp), pos - lower


_MEAN_ROW = torch.tensor(REFERENCE_MEAN_255).repeat(OUTPUT_SIZE)  # one output row's means, float32


def crop_flip_resize(pixels: np.ndarray, window: tuple[int, int, int, int], flip: bool) -> torch.Tensor:
    """The crop ``window`` (top, left, height, width) of an (H, W, 3) uint8 image, flipped when ``flip``,
    resized to 224x224 by :func:`tf1_resize_bilinear`'s rule, the channel means subtracted: a new (224, 224, 3)
    float32 tensor, bit for bit :class:`PlainReferenceTrainTransform`'s numbers.

    Only the pixels the resize samples are read: the two columns of each output column (a flip reverses the
    columns read), in the rows the resize reads. Those are every row of the crop when it is at most 448 rows
    tall (each output row reads a row and the next, and consecutive output rows are at most two rows apart), so
    the crop's rows are used in place and each is interpolated along its row once, even where two output rows
    share it; a taller crop's 448 rows are gathered first. Then between rows, for each output row. The arithmetic
    is the reference resize's, in its order (along each row, then between rows), in float32: separate
    elementwise operations, each rounded as there.
    """
    top, left, h, w = window
    if _window is not None and pixels.flags.c_contiguous and pixels.dtype == np.uint8 and pixels.ndim == 3:
        out = torch.empty((OUTPUT_SIZE, OUTPUT_SIZE, 3))
        _window.resize_window(pixels, pixels.shape[0], pixels.shape[1], *window, flip, out.numpy(), REFERENCE_MEAN_255)
        return out
    return _crop_flip_resize_torch(pixels, window, flip)


def _crop_flip_resize_torch(pixels: np.ndarray, window: tuple[int, int, int, int], flip: bool) -> torch.Tensor:
    """:func:`crop_flip_resize` in torch, where the compiled module did not build."""
    top, left, h, w = window
    n = OUTPUT_SIZE
    y0, y1, wy = _tf1_axis(h)
    x0, x1, wx = _tf1_axis(w)
    if flip:  # column j of the flipped crop is column w - 1 - j of the crop
        x0, x1 = (w - 1) - x0, (w - 1) - x1
    if h <= 2 * n:
        rows = torch.from_numpy(pixels[top : top + h])  # a view: the rows of a C-contiguous image are contiguous
    else:
        rows = torch.from_numpy(np.take(pixels, np.concatenate([y0, y1]) + top, axis=0))
        y0, y1 = np.arange(n), np.arange(n, 2 * n)
    r = rows.shape[0]
    near = rows.index_select(1, torch.from_numpy(x0 + left)).reshape(r, n * 3).float()
    horizontal = rows.index_select(1, torch.from_numpy(x1 + left)).reshape(r, n * 3).float()
    horizontal.sub_(near).mul_(torch.from_numpy(np.repeat(wx, 3))).add_(near)  # near + (far - near) * wx
    upper = horizontal.index_select(0, torch.from_numpy(y0))
    vertical = horizontal.index_select(0, torch.from_numpy(y1))  # lower rows
    vertical.sub_(upper).mul_(torch.from_numpy(wy[:, None])).add_(upper)  # upper + (lower - upper) * wy
    return vertical.sub_(_MEAN_ROW).view(n, n, 3)


class EncodedJpeg(NamedTuple):
    """A JPEG file's bytes and the size its header gives, for :class:`ReferenceTrainTransform` to decode only the
    crop window of (:func:`read_train_image`)."""

    raw: bytes
    height: int
    width: int
    path: str


class ReferenceTrainTransform:
    """The reference's training preprocessing (:class:`PlainReferenceTrainTransform`'s numbers, bit for bit, and
    the same draws from torch's default generator, in the same order) of an :class:`EncodedJpeg`, an (H, W, 3)
    uint8 image or an RGB PIL image: the crop window and the flip are drawn first (from the size alone), then only
    the window of an encoded JPEG is decoded (``_window.decode_window``: libjpeg-turbo's partial decompression,
    the same pixels as a whole-image decode) and :func:`crop_flip_resize` reads only the pixels the resize
    samples. Out: (3, 224, 224) float32, a channels-first view of a channels-last tensor
    (:func:`collate_channels_last` batches them without reordering their memory)."""

    def __call__(self, pixels) -> torch.Tensor:
        encoded = isinstance(pixels, EncodedJpeg)
        if not encoded:
            pixels = np.ascontiguousarray(pixels)
        window = distorted_box_window(*((pixels.height, pixels.width) if encoded else pixels.shape[:2]))
        flip = float(torch.rand(())) < 0.5
        if encoded:
            pixels, window = _decode_window(pixels, window)
        return crop_flip_resize(pixels, window, flip).permute(2, 0, 1)


def _decode_window(image: EncodedJpeg, window: tuple[int, int, int, int]):
    """(pixels, window in them): the window's pixels alone, or, for a file libjpeg reports any error or warning
    in, the whole image as :func:`decode_rgb` decodes it and the window in it."""
    top, left, h, w = window
    if _window is not None:
        crop = np.empty((h, w, 3), np.uint8)
        try:
            _window.decode_window(image.raw, top, left, h, w, crop)
            return crop, (0, 0, h, w)
        except ValueError:
            pass
    pixels = decode_rgb(image.raw, image.path)
    if pixels.shape[:2] != (image.height, image.width):
        raise DataError(
            f"{image.path}: its JPEG header says {image.width}x{image.height} but it decodes to "
            f"{pixels.shape[1]}x{pixels.shape[0]}: replace the file"
        )
    return pixels, window


def collate_channels_last(samples: list[tuple[torch.Tensor, int]]) -> list[torch.Tensor]:
    """torch's default collation of (image, label) samples, the images batched in channels-last memory: an
    (N, 3, 224, 224) tensor whose memory is (N, 224, 224, 3), the layout the model trains in (so the step's
    ``contiguous(memory_format=torch.channels_last)`` copies nothing), with the same values as the default
    collation's. Each :class:`ReferenceTrainTransform` output is a view of such memory, so the batch is one
    contiguous copy of each image, not a transposition; in a DataLoader worker it is written to shared memory,
    as the default collation writes it."""
    from torch.utils.data import default_collate

    images, labels = default_collate([(x.permute(1, 2, 0), y) for x, y in samples])
    return [images.permute(0, 3, 1, 2), labels]


def read_rgb(path: str | Path) -> np.ndarray:
    """An image file as an (H, W, 3) uint8 array, the pixels torchvision's ImageFolder loader gives (PIL,
    converted to RGB): :func:`decode_rgb` of its bytes."""
    return decode_rgb(Path(path).read_bytes(), path)


def read_train_image(path: str | Path) -> EncodedJpeg | np.ndarray:
    """The training set's loader: a JPEG whose header says YCbCr or RGB (ImageNet's all but a few) as its bytes
    and size, for :class:`ReferenceTrainTransform` to decode only the crop window of, where the compiled decoder
    is built; any other file decoded whole (:func:`decode_rgb`)."""
    import simplejpeg

    raw = Path(path).read_bytes()
    if _window is not None and raw[:2] == b"\xff\xd8":
        try:
            height, width, colorspace, _ = simplejpeg.decode_jpeg_header(raw)
        except ValueError:
            colorspace = None
        if colorspace in ("YCbCr", "RGB"):
            from PIL import Image

            if height * width > 2 * Image.MAX_IMAGE_PIXELS:  # where PIL, ImageFolder's loader, refuses it too
                raise DataError(
                    f"{path}: its JPEG header says {width}x{height} pixels, more than PIL's decompression-bomb "
                    f"limit ({2 * Image.MAX_IMAGE_PIXELS:,}): replace the file"
                )
            return EncodedJpeg(raw, height, width, str(path))
    return decode_rgb(raw, path)


def decode_rgb(raw: bytes, path: str | Path) -> np.ndarray:
    """An image file's bytes (``path`` names it) as an (H, W, 3) uint8 array, the pixels torchvision's
    ImageFolder loader gives (PIL, converted to RGB). A JPEG whose header says YCbCr or RGB (ImageNet's all but
    a few) is decoded by simplejpeg's libjpeg-turbo straight into a numpy array (the same numbers as PIL's and
    torchvision's decoders, tests/unit/test_resnet_fast_path.py, and faster: no PIL image or tensor to copy out
    of); one it refuses, even for a recoverable error, is read as before: torchvision's decoder when that gives
    three channels, else PIL as ImageFolder reads it (greyscale, CMYK, a PNG named .JPEG, as ImageNet holds a
    few)."""
    import io

    import simplejpeg

    if raw[:2] == b"\xff\xd8":
        try:
            if simplejpeg.decode_jpeg_header(raw)[2] in ("YCbCr", "RGB"):
                return simplejpeg.decode_jpeg(raw, "RGB")
        except ValueError:
            pass
        from torchvision.io import decode_jpeg

        try:
            image = decode_jpeg(torch.frombuffer(bytearray(raw), dtype=torch.uint8))
        except RuntimeError:
            image = None
        if image is not None and image.shape[0] == 3:
            return image.permute(1, 2, 0).numpy()  # the decoder's own (H, W, 3) buffer
    from PIL import Image

    try:
        with Image.open(io.BytesIO(raw)) as img:
            return np.asarray(img.convert("RGB"))
    except OSError as e:  # PIL's UnidentifiedImageError and truncated files
        raise DataError(f"{path}: not an image PIL or libjpeg can read ({e}): replace the file") from e


class ReferenceEvalTransform:
    """The reference's evaluation preprocessing: the shorter side resized to 256 keeping the aspect ratio
    (the other side truncated, as ``_smallest_size_at_least`` casts to int), the central 224x224 with the
    extra pixel of an odd margin on the bottom/right (``_central_crop``: offset (size - 224) // 2), the
    channel means subtracted."""

    def __call__(self, img) -> torch.Tensor:
        pixels = _chw(img)
        h, w = pixels.shape[1], pixels.shape[2]
        ratio = np.float32(EVAL_RESIZE_MIN) / np.float32(min(h, w))
        new_h, new_w = int(np.float32(h) * ratio), int(np.float32(w) * ratio)
        top, left = (new_h - OUTPUT_SIZE) // 2, (new_w - OUTPUT_SIZE) // 2
        rows, cols = slice(top, top + OUTPUT_SIZE), slice(left, left + OUTPUT_SIZE)
        return _reference_input(tf1_resize_bilinear(pixels, (new_h, new_w), rows=rows, cols=cols))


def check_imagenet_layout(root: Path) -> None:
    """Before the clock: the ImageNet folders exist (no image is read)."""
    for split in ("train", "val"):
        if not (root / split).is_dir():
            raise DataError(
                f"ImageNet folder {root / split} not found: the reference scale reads "
                "<data-dir>/resnet/reference/{train,val}/<wnid>/*.JPEG (val sorted into class folders)"
            )


def imagenet_datasets(root: Path, *, classes: int | None = IMAGENET_CLASSES):
    """ImageNet train and val as torchvision ImageFolders with the reference's transforms.

    ``classes``: how many class folders there must be (None: any number up to 1000, as a smoke fixture has).
    """
    from torchvision import datasets

    check_imagenet_layout(root)
    train = datasets.ImageFolder(root / "train", ReferenceTrainTransform(), loader=read_train_image)
    val = datasets.ImageFolder(root / "val", ReferenceEvalTransform())
    if train.classes != val.classes:
        raise DataError(f"ImageNet train and val under {root} have different class folders")
    found = len(train.classes)
    if (classes is not None and found != classes) or found > IMAGENET_CLASSES:
        raise DataError(
            f"ImageNet under {root} has {found} class folders in train/ and val/; the reference model is "
            f"built for {IMAGENET_CLASSES} (one folder per wnid): sort val into its class folders and remove others"
        )
    return train, val


# A few real ImageNet wnids, the first and the last of the sorted 1000 among them.
SMOKE_WNIDS = ("n01440764", "n01443537", "n02085620", "n02123045", "n03000134", "n04037443", "n07747607", "n15075141")
SMOKE_TRAIN_PER_CLASS, SMOKE_VAL_PER_CLASS = 3, 2


def write_smoke_fixture(root: Path) -> str:
    """A tiny ImageNet in the reference layout under ``root`` (``train/<wnid>/*.JPEG``, ``val/<wnid>/*.JPEG``).

    JPEGs of several sizes and aspect ratios, each class a colour of its own; as in ImageNet, a few are
    greyscale or CMYK, which the loader must turn into RGB. Deterministic.
    """
    from PIL import Image

    rng = np.random.default_rng(0)
    count = 0
    for split, per_class in (("train", SMOKE_TRAIN_PER_CLASS), ("val", SMOKE_VAL_PER_CLASS)):
        for c, wnid in enumerate(SMOKE_WNIDS):
            folder = root / split / wnid
            folder.mkdir(parents=True, exist_ok=True)
            colour = np.array([(37 * c) % 256, (91 * c + 60) % 256, (151 * c + 120) % 256], dtype=np.float64)
            for i in range(per_class):
                h, w = int(rng.integers(40, 120)), int(rng.integers(40, 120))
                pixels = np.clip(colour + rng.normal(0, 40, (h, w, 3)), 0, 255).astype(np.uint8)
                image = Image.fromarray(pixels, "RGB")
                if count % 7 == 3:
                    image = image.convert("L")
                elif count % 7 == 5:
                    image = image.convert("CMYK")
                image.save(folder / f"{wnid}_{split}_{i}.JPEG", "JPEG", quality=90)
                count += 1
    return (
        f"{len(SMOKE_WNIDS)} classes, {SMOKE_TRAIN_PER_CLASS} train and {SMOKE_VAL_PER_CLASS} val JPEGs each, "
        "some greyscale or CMYK"
    )
