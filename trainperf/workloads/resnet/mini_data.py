"""resnet's mini data: Fashion-MNIST in its original IDX format (60,000 training and 10,000 test images of 28x28),
taken offline from Debian's ``dataset-fashion-mnist`` package, decompressed and checksummed by
``trainperf data prepare resnet``. The loader validates every file (magic number, dimensions, count, size) and
names the file and the fix when one is wrong. (The reference scale's ImageNet path is in :mod:`.data`.)
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
