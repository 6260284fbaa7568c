"""unet3d data: KiTS19 cases in their own layout, the reference's preprocessing, and its preprocessed form.

Input (both scales, one loader): a folder of KiTS19 cases, ``case_NNNNN/imaging.nii.gz`` (CT, Hounsfield
units) and ``case_NNNNN/segmentation.nii.gz`` (0 background, 1 kidney, 2 tumour), read with nibabel; or the
reference's preprocessed form, ``case_NNNNN_x.npy`` (float32, 1 x D x H x W) and ``case_NNNNN_y.npy``
(uint8, same shape), as mlcommons/training ``image_segmentation/pytorch/preprocess_dataset.py`` writes it
(``NNNNN``: KiTS19's five-digit case number, ``case_00000`` to ``case_00209``).

From NIfTI, :func:`preprocess_case` does what the reference's preprocessing does: resample to the spacing
(1.6, 1.2, 1.2) mm (trilinear with aligned corners for the image, nearest for the label, to the shape
``int(spacing / target * shape)``), clip to [-79, 304] HU, subtract 101.0 and divide by 76.9, and pad with
edge values, centred, to at least the training patch. The reference runs this offline, untimed, before its
timed runs read the ``.npy`` files; so does :func:`prepare_cases`, called by the workload's ``prepare``
(before the clock): it validates every case and writes the preprocessed form beside the cases (kept while
the source files are unchanged). The timed ``load_data`` reads the ``.npy`` files.

Bad input is one :class:`DataError` naming the case and the file: a case folder missing a file, a NIfTI file
that cannot be read or is truncated, an image whose shape differs from its label volume, labels outside
{0, 1, 2}, a preprocessed pair of the wrong dtype or shape.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainperf.errors import DataError

IMAGE_FILE, LABEL_FILE = "imaging.nii.gz", "segmentation.nii.gz"
CASE_DIR = re.compile(r"^case_(\d{5})$")
NPY_IMAGE = re.compile(r"^case_(\d{5})_x\.npy$")
PREPROCESSED = "preprocessed"  # where the preprocessed form of NIfTI input is written, beside the cases
STAMP = ".source.json"  # in PREPROCESSED: what each case was made from (sizes and times of its NIfTI files)
NUM_CLASSES = 3  # background, kidney, tumour

# The 42 evaluation cases of the MLPerf reference (evaluation_cases.txt); the other 168 of case_00000 -
# case_00209 are training cases.
REFERENCE_EVAL_CASES = frozenset(
    f"{i:05d}"
    for i in (0, 3, 5, 6, 12, 24, 34, 41, 44, 49, 52, 56, 61, 65, 66, 70, 76, 78, 80, 84, 86, 87, 92, 111, 112)
    + (125, 128, 138, 157, 160, 161, 162, 169, 171, 176, 185, 187, 189, 198, 203, 206, 207)
)
REFERENCE_MAX_CASE = 210  # the reference uses case_00000 - case_00209 (KiTS19's labelled cases)


@dataclass(frozen=True, kw_only=True)
class Preprocessing:
    """The reference's preprocessing constants (preprocess_dataset.py); ``min_shape`` is the training patch."""

    spacing: tuple[float, float, float] = (1.6, 1.2, 1.2)
    clip: tuple[float, float] = (-79.0, 304.0)
    mean: float = 101.0
    std: float = 76.9
    min_shape: tuple[int, int, int] = (128, 128, 128)

    @property
    def padding_value(self) -> float:
        """The normalized value of the lowest clipped intensity, (-79 - 101) / 76.9 = -2.34 (the reference's
        evaluation pads with the constant -2.2 instead, which the reference scale uses: workload.py FLAVOURS)."""
        return (self.clip[0] - self.mean) / self.std

    def as_dict(self) -> dict:
        return {
            "spacing": list(self.spacing),
            "clip": list(self.clip),
            "mean": self.mean,
            "std": self.std,
            "min_shape": list(self.min_shape),
        }


@dataclass
class Case:
    """One preprocessed case: image (float32, 1 x D x H x W, normalized) and label (uint8, same shape)."""

    case_id: str
    image: np.ndarray
    label: np.ndarray


# --- reading ---------------------------------------------------------------------------------------------
def case_folders(root: Path) -> list[Path]:
    """The ``case_NNNNN`` folders under ``root``, sorted."""
    try:
        return sorted(p for p in root.iterdir() if p.is_dir() and CASE_DIR.match(p.name))
    except OSError as e:
        raise DataError(f"cannot list the KiTS19 folder {root} ({e.strerror})") from None


def read_nifti_case(case_dir: Path) -> tuple[np.ndarray, np.ndarray, tuple[float, float, float]]:
    """(image float32 D x H x W, label uint8 D x H x W, the image's spacing in mm), validated."""
    import nibabel

    case = case_dir.name
    volumes = []
    spacing: tuple[float, float, float] = (1.0, 1.0, 1.0)
    for name in (IMAGE_FILE, LABEL_FILE):
        path = case_dir / name
        if not path.is_file():
            raise DataError(
                f"KiTS19 {case}: {path} is missing; every case folder holds {IMAGE_FILE} and {LABEL_FILE} "
                "(restore the file, or remove the case folder)"
            )
        try:
            img = nibabel.load(path)
            data = np.asarray(img.dataobj)
        except (OSError, EOFError, ValueError, zlib.error, nibabel.filebasedimages.ImageFileError) as e:
            raise DataError(
                f"KiTS19 {case}: {path} cannot be read as NIfTI (truncated or corrupt: {e}); download the case again"
            ) from None
        if data.ndim != 3:
            raise DataError(
                f"KiTS19 {case}: {path} holds a {data.ndim}-D volume of shape {data.shape}; KiTS19 volumes are 3-D"
            )
        if name == IMAGE_FILE:
            spacing = tuple(float(s) for s in img.header.get_zooms()[:3])  # pixdim[1:4], as the reference reads it
        volumes.append(data)
    image, label = volumes
    if image.shape != label.shape:
        raise DataError(
            f"KiTS19 {case}: image {case_dir / IMAGE_FILE} has shape {image.shape} but its label volume "
            f"{case_dir / LABEL_FILE} has shape {label.shape}; they must match voxel for voxel"
        )
    check_labels(label, f"KiTS19 {case}: {case_dir / LABEL_FILE}")
    return image.astype(np.float32), label.astype(np.uint8), spacing


def check_labels(label: np.ndarray, where: str) -> None:
    """Labels are whole numbers in {0, 1, 2}."""
    if not np.issubdtype(label.dtype, np.integer):
        bad = label[(label != np.round(label)) | ~np.isfinite(label)]
        if bad.size:
            raise DataError(f"{where} holds label {bad.flat[0].item()!r}, not a whole number; labels are 0, 1 or 2")
    outside = label[(label < 0) | (label > NUM_CLASSES - 1)]
    if outside.size:
        raise DataError(
            f"{where} holds label {outside.flat[0].item()!r} outside {{0, 1, 2}} (background, kidney, tumour); "
            "fix or remove the case"
        )


# --- the reference's preprocessing -----------------------------------------------------------------------
def preprocess_case(
    image: np.ndarray, label: np.ndarray, spacing: Sequence[float], prep: Preprocessing
) -> tuple[np.ndarray, np.ndarray]:
    """Resample to ``prep.spacing``, clip and normalize, pad to ``prep.min_shape``: (1 x D x H x W float32, uint8)."""
    import torch
    import torch.nn.functional as F

    if list(spacing) != list(prep.spacing):
        shape = (np.array(spacing) / np.array(prep.spacing) * np.array(image.shape)).astype(int).tolist()
        image = F.interpolate(torch.from_numpy(image)[None, None], size=shape, mode="trilinear", align_corners=True)
        label = F.interpolate(torch.from_numpy(label)[None, None].float(), size=shape, mode="nearest")
        image, label = image[0, 0].numpy(), label[0, 0].numpy().astype(np.uint8)
    image = (np.clip(image, *prep.clip) - prep.mean) / prep.std
    bounds = [max(0, m - s) for m, s in zip(prep.min_shape, image.shape, strict=False)]
    pads = [(b // 2, b - b // 2) for b in bounds]
    image, label = np.pad(image, pads, mode="edge"), np.pad(label, pads, mode="edge")
    return image[None].astype(np.float32), label[None].astype(np.uint8)


def _source_stamp(case_dir: Path) -> list[list[int]]:
    out = []
    for name in (IMAGE_FILE, LABEL_FILE):
        st = os.stat(case_dir / name)
        out.append([st.st_size, st.st_mtime_ns, st.st_ino])
    return out


def _save_npy(path: Path, array: np.ndarray) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, array, allow_pickle=False)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def prepare_cases(root: Path, prep: Preprocessing, *, case_ids: Sequence[str] | None = None) -> tuple[Path, list[str]]:
    """Before the clock: validate the cases under ``root`` and make sure their preprocessed form exists.

    ``root`` holds KiTS19 case folders (preprocessed into ``root/preprocessed``, each case again only when its
    files changed) or the reference's ``*_x.npy``/``*_y.npy`` files (validated). Returns (the folder of the
    ``.npy`` files, the case ids). ``case_ids``: only these cases (the reference's first 210).
    """
    if not root.is_dir():
        raise DataError(
            f"KiTS19 folder {root} not found: put the cases there as case_NNNNN/{IMAGE_FILE} and {LABEL_FILE} "
            "(or the reference's preprocessed case_NNNNN_x.npy / case_NNNNN_y.npy files)"
        )
    folders = case_folders(root)
    if case_ids is not None:
        folders = [f for f in folders if CASE_DIR.match(f.name)[1] in case_ids]
    if not folders:
        return root, check_preprocessed(root, case_ids=case_ids)
    out = root / PREPROCESSED
    try:
        out.mkdir(exist_ok=True)
    except OSError as e:
        raise DataError(f"cannot write the preprocessed cases to {out} ({e.strerror}): make {root} writable") from None
    stamps_path = out / STAMP
    try:
        stamps = json.loads(stamps_path.read_text())
    except (OSError, ValueError):
        stamps = {}
    if stamps.get("preprocessing") != prep.as_dict():
        stamps = {"preprocessing": prep.as_dict(), "cases": {}}
    ids = []
    for folder in folders:
        cid = CASE_DIR.match(folder.name)[1]
        ids.append(cid)
        try:
            stamp = _source_stamp(folder)
        except OSError:
            stamp = None  # a missing file: read_nifti_case names it
        x_path, y_path = out / f"case_{cid}_x.npy", out / f"case_{cid}_y.npy"
        if stamp is not None and stamps["cases"].get(cid) == stamp and x_path.is_file() and y_path.is_file():
            continue
        image, label, spacing = read_nifti_case(folder)
        x, y = preprocess_case(image, label, spacing, prep)
        _save_npy(x_path, x)
        _save_npy(y_path, y)
        stamps["cases"][cid] = stamp
    stamps["cases"] = {k: v for k, v in stamps["cases"].items() if k in ids}
    try:
        tmp = stamps_path.with_name(f".{STAMP}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(stamps))
        os.replace(tmp, stamps_path)
    except OSError:
        pass  # only the shortcut is lost: the cases are preprocessed again next time
    return out, ids


def check_preprocessed(folder: Path, *, case_ids: Sequence[str] | None = None) -> list[str]:
    """Validate the reference's preprocessed form in ``folder`` (headers, and every label); the case ids."""
    ids = sorted(m[1] for p in folder.iterdir() if (m := NPY_IMAGE.match(p.name)))
    if case_ids is not None:
        ids = [i for i in ids if i in case_ids]
    if not ids:
        raise DataError(
            f"no KiTS19 cases in {folder}: expected case_NNNNN/{IMAGE_FILE} and {LABEL_FILE} folders, or the "
            "reference's preprocessed case_NNNNN_x.npy and case_NNNNN_y.npy files"
        )
    for cid in ids:
        x, y = _open_pair(folder, cid, mmap=True)
        check_labels(np.asarray(y), f"KiTS19 case_{cid}: {folder / f'case_{cid}_y.npy'}")
    return ids


def _open_pair(folder: Path, cid: str, *, mmap: bool) -> tuple[np.ndarray, np.ndarray]:
    arrays = []
    for suffix, dtype in (("x", np.float32), ("y", np.uint8)):
        path = folder / f"case_{cid}_{suffix}.npy"
        if not path.is_file():
            raise DataError(f"KiTS19 case_{cid}: {path} is missing (each case has an _x.npy image and a _y.npy label)")
        try:
            a = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
        except (OSError, ValueError, EOFError) as e:
            raise DataError(f"KiTS19 case_{cid}: {path} cannot be read as .npy (truncated or corrupt: {e})") from None
        if a.dtype != dtype or a.ndim != 4 or a.shape[0] != 1:
            raise DataError(
                f"KiTS19 case_{cid}: {path} holds {a.dtype} of shape {a.shape}; the preprocessed form is "
                f"{np.dtype(dtype)} of shape 1 x D x H x W"
            )
        arrays.append(a)
    x, y = arrays
    if x.shape != y.shape:
        raise DataError(f"KiTS19 case_{cid}: image {x.shape} and label {y.shape} in {folder} differ in shape")
    return x, y


def load_cases(folder: Path, case_ids: Sequence[str]) -> list[Case]:
    """Read the preprocessed cases (on the clock)."""
    return [Case(cid, *(np.ascontiguousarray(a) for a in _open_pair(folder, cid, mmap=False))) for cid in case_ids]
