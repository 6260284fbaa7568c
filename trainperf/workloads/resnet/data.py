"""resnet datasets.

mini: Fashion-MNIST in its original IDX format (60,000 training and 10,000 test images of 28x28), taken
offline from Debian's ``dataset-fashion-mnist`` package, decompressed and checksummed by
``trainperf data prepare resnet``. The loader validates every file (magic number, dimensions, count,
size) and names the file and the fix when one is wrong.

reference: ImageNet-1k in the standard layout ``<root>/train/<wnid>/*.JPEG`` and
``<root>/val/<wnid>/*.JPEG``, read with torchvision's ImageFolder and the reference's transforms
(mlcommons/training ``image_classification/tensorflow2/imagenet_preprocessing.py``): training crops
cover 5-100 % of the image at aspect ratios 3/4-4/3, resized to 224x224 without keeping the aspect
ratio and flipped at random; evaluation resizes the shorter side to 256 and crops the central 224x224;
both subtract the reference's per-channel means on the 0-255 scale and divide by nothing.
:func:`write_smoke_fixture` writes a tiny data set in this layout for ``--smoke``.
"""

from __future__ import annotations

import gzip
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from trainperf.data import verified
from trainperf.errors import DataError

DEBIAN_PACKAGE = "dataset-fashion-mnist"
DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
MINI_SUBDIR = Path("resnet") / "mini"
FIX = "run `trainperf data prepare resnet` (it rebuilds the file from Debian's dataset-fashion-mnist)"

IDX_IMAGES_MAGIC = 0x00000803  # unsigned bytes, 3 dimensions
IDX_LABELS_MAGIC = 0x00000801  # unsigned bytes, 1 dimension


@dataclass(frozen=True)
class IdxFile:
    name: str
    sha256: str
    magic: int
    count: int

    @property
    def size(self) -> int:
        """Bytes of the file: the magic number, one 4-byte size per dimension, then one byte per item or pixel."""
        ndim = self.magic & 0xFF
        return 4 + 4 * ndim + self.count * (IMAGE_SIZE * IMAGE_SIZE if ndim == 3 else 1)


# Checksums of the decompressed files of Fashion-MNIST (identical to the upstream release).
MINI_FILES = (
    IdxFile(
        "train-images-idx3-ubyte",
        "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
        IDX_IMAGES_MAGIC,
        60000,
    ),
    IdxFile(
        "train-labels-idx1-ubyte",
        "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
        IDX_LABELS_MAGIC,
        60000,
    ),
    IdxFile(
        "t10k-images-idx3-ubyte",
        "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
        IDX_IMAGES_MAGIC,
        10000,
    ),
    IdxFile(
        "t10k-labels-idx1-ubyte",
        "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
        IDX_LABELS_MAGIC,
        10000,
    ),
)
IMAGE_SIZE = 28
NUM_CLASSES = 10
# Per-pixel mean and standard deviation of the 60,000 training images (in [0, 1]).
MEAN, STD = 0.2860, 0.3530


def read_idx(path: Path, *, magic: int, count: int) -> np.ndarray:
    """Read and validate one IDX file: images as (N, 28, 28) uint8, labels as (N,) uint8."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"dataset file {path} is missing: {FIX}") from None
    except OSError as e:
        raise DataError(f"dataset file {path} cannot be read ({e.strerror}): {FIX}") from None
    if len(raw) < 8:
        raise DataError(f"dataset file {path} is truncated ({len(raw)} bytes): {FIX}")
    found_magic = int.from_bytes(raw[:4], "big")
    if found_magic != magic:
        raise DataError(
            f"dataset file {path} has IDX magic number 0x{found_magic:08x}, expected 0x{magic:08x} "
            f"(wrong file or corrupt): {FIX}"
        )
    ndim = magic & 0xFF
    header = 4 + 4 * ndim
    dims = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    if dims[0] != count:
        raise DataError(f"dataset file {path} holds {dims[0]} items, expected {count}: {FIX}")
    if ndim == 3 and dims[1:] != [IMAGE_SIZE, IMAGE_SIZE]:
        raise DataError(f"dataset file {path} has images of {dims[1]}x{dims[2]}, expected 28x28: {FIX}")
    expected = header + int(np.prod(dims))
    if len(raw) != expected:
        raise DataError(f"dataset file {path} is {len(raw)} bytes, expected {expected} (truncated or padded): {FIX}")
    data = np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)
    if ndim == 1 and data.max(initial=0) >= NUM_CLASSES:
        raise DataError(f"dataset file {path} has label {int(data.max())}, labels must be 0-9: {FIX}")
    return data


def mini_dir(data_dir: Path) -> Path:
    return data_dir / MINI_SUBDIR


def load_mini(data_dir: Path) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(train images, train labels, test images, test labels); images uint8 (N, 1, 28, 28)."""
    root = mini_dir(data_dir)
    arrays = [read_idx(root / f.name, magic=f.magic, count=f.count) for f in MINI_FILES]
    xtr, ytr, xte, yte = (torch.from_numpy(a.copy()) for a in arrays)
    return xtr.unsqueeze(1), ytr.long(), xte.unsqueeze(1), yte.long()


_sha256 = verified.sha256


def verify_mini(data_dir: Path, *, trust_cache: bool = False) -> list[str]:
    """Problems with the prepared mini data (empty when every file is there and intact): each file's size and
    sha256 against :data:`MINI_FILES`. ``trust_cache``: a file unchanged since it was last found intact is not
    hashed again (:mod:`trainperf.data.verified`), what a run does before its clock starts."""
    manifest = {f.name: verified.Expected(sha256=f.sha256, size=f.size) for f in MINI_FILES}
    return verified.check_files(mini_dir(data_dir), manifest, trust_cache=trust_cache)


def prepare_mini(data_dir: Path, *, source: Path = DEBIAN_DIR) -> list[Path]:
    """Decompress Fashion-MNIST from the Debian package into ``data_dir``; idempotent and checksummed."""
    dest = mini_dir(data_dir)
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DataError(f"cannot create data folder {dest} ({e.strerror}): choose another with --data-dir") from None
    written = []
    for f in MINI_FILES:
        path = dest / f.name
        if path.exists() and _sha256(path) == f.sha256:
            continue
        gz = source / f"{f.name}.gz"
        if not gz.exists():
            raise DataError(
                f"{gz} not found: install Debian's {DEBIAN_PACKAGE} package "
                f"(`sudo apt-get install {DEBIAN_PACKAGE}`, or `make setup`)"
            )
        fd, tmp = tempfile.mkstemp(dir=dest, prefix=f".{f.name}.", suffix=".tmp")
        try:
            with gzip.open(gz, "rb") as src, os.fdopen(fd, "wb") as out:
                shutil.copyfileobj(src, out)
            if _sha256(Path(tmp)) != f.sha256:
                raise DataError(f"{gz} does not decompress to the expected Fashion-MNIST file (checksum differs)")
            os.replace(tmp, path)
        except (OSError, EOFError, gzip.BadGzipFile) as e:
            raise DataError(f"cannot decompress {gz}: {e}; reinstall {DEBIAN_PACKAGE}") from None
        finally:
            Path(tmp).unlink(missing_ok=True)
        written.append(path)
    return written


# The reference's preprocessing constants (imagenet_preprocessing.py): _R_MEAN, _G_MEAN, _B_MEAN on the
# 0-255 scale, no division by a deviation; sample_distorted_bounding_box's area and aspect ranges.
REFERENCE_MEAN_255 = (123.68, 116.78, 103.94)
CROP_AREA = (0.05, 1.0)
CROP_ASPECT = (0.75, 1.33)
IMAGENET_CLASSES = 1000


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
    from torchvision import datasets, transforms

    check_imagenet_layout(root)
    # ToTensor gives x / 255; (x / 255 - mean / 255) / (1 / 255) = x - mean, the reference's input.
    normalize = transforms.Normalize(mean=[m / 255 for m in REFERENCE_MEAN_255], std=[1 / 255] * 3)
    train = datasets.ImageFolder(
        root / "train",
        transforms.Compose(
            [
                transforms.RandomResizedCrop(224, scale=CROP_AREA, ratio=CROP_ASPECT),
                transforms.RandomHorizontalFlip(),
                transforms.ToTensor(),
                normalize,
            ]
        ),
    )
    val = datasets.ImageFolder(
        root / "val",
        transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(), normalize]),
    )
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
