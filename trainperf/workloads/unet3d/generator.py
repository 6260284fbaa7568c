"""The unet3d mini data: labelled abdominal CT phantoms written as KiTS19 cases (NIfTI, nibabel).

No labelled kidney CT installs offline from PyPI or Debian (checked: neither lists KiTS, MSD or a
kidney/abdomen CT package), so ``trainperf data prepare unet3d`` draws them. Each case, from its own seeded
generator (:data:`SEED`, the case number):

* a volume of 40-48 x 52-60 x 52-60 voxels at the reference's spacing (1.6, 1.2, 1.2) mm, so the loader's
  resampling keeps it as it is (the smoke fixture exercises resampling);
* anatomy drawn as implicit shapes in a coordinate frame bent by a random smooth elastic deformation
  (Gaussian-smoothed noise, up to about 4 mm), so every boundary is irregular and differs per case: the body
  (fat, -100 to -70 HU, inside a wall of muscle, 35-60 HU) in air, two psoas-like muscles and a vertebra
  (bone, 700 HU: clipped to 304 by the preprocessing) behind, a liver-like organ (95-125 HU, between the
  tumours' and the kidneys' range, so intensity alone does not separate them);
* two kidneys (label 1): rotated ellipsoids (cortex 150-210 HU) around a darker sinus (25-55 HU, still
  kidney); one or two tumours (label 2): ellipsoidal blobs of 5-10 mm radius centred in a kidney's rim,
  60-100 HU (hypo-enhancing), which may bulge out of the kidney;
* a multiplicative bias field (up to +-8 % of attenuation above air, smooth), smooth tissue texture and
  Gaussian noise (sigma 8-16 HU), written as int16 HU.

Deterministic from the seed: the same cases and bytes on every preparation (nibabel writes gzip without a
timestamp); ``manifest.json`` records each file's sha256, checked before every run.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np

from trainperf.data import verified
from trainperf.errors import DataError
from trainperf.fileio import atomic_write_text
from trainperf.workloads.unet3d import MINI
from trainperf.workloads.unet3d.data import IMAGE_FILE, LABEL_FILE

SEED = 20220629  # MLPerf Training v2.0's results date, as the other generators use
VERSION = 2
MINI_SUBDIR = Path("unet3d") / "mini"
MANIFEST = "manifest.json"
# case_00000 - case_00047 train, case_00048 - case_00063 evaluate: the mini spec states the counts (__init__.py)
TRAIN_CASES, EVAL_CASES = MINI.train_samples, MINI.eval_samples
SPACING = (1.6, 1.2, 1.2)
FIX = "run `trainperf data prepare unet3d` (it draws the cases again)"


def mini_dir(data_dir: Path) -> Path:
    return data_dir / MINI_SUBDIR


def case_ids() -> list[str]:
    return [f"{i:05d}" for i in range(TRAIN_CASES + EVAL_CASES)]


def eval_case_ids() -> frozenset[str]:
    return frozenset(f"{i:05d}" for i in range(TRAIN_CASES, TRAIN_CASES + EVAL_CASES))


def _smooth_field(rng: np.random.Generator, shape: tuple[int, ...], sigma: float) -> np.ndarray:
    """Gaussian-smoothed noise scaled to a maximum absolute value of 1."""
    from scipy.ndimage import gaussian_filter

    f = gaussian_filter(rng.standard_normal(shape), sigma, mode="reflect")
    return f / max(np.abs(f).max(), 1e-12)


def _ellipsoid(p: tuple[np.ndarray, ...], centre, radii, angle: float) -> np.ndarray:
    """sum((q / r)^2) of the points p (mm) in an ellipsoid's frame, rotated by ``angle`` in the H-W plane."""
    z, y, x = (p[i] - centre[i] for i in range(3))
    c, s = np.cos(angle), np.sin(angle)
    y, x = c * y - s * x, s * y + c * x
    return (z / radii[0]) ** 2 + (y / radii[1]) ** 2 + (x / radii[2]) ** 2


def draw_case(index: int, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """One phantom: (image int16 HU, label uint8), both D x H x W."""
    rng = np.random.default_rng([seed, index])
    shape = (int(rng.integers(40, 49)), int(rng.integers(52, 61)), int(rng.integers(52, 61)))
    grid = np.meshgrid(*[(np.arange(n) - (n - 1) / 2) * s for n, s in zip(shape, SPACING, strict=False)], indexing="ij")
    amp = rng.uniform(2.0, 4.0)  # elastic deformation, mm
    p = tuple(g + amp * _smooth_field(rng, shape, 5.0) for g in grid)
    extent = [(n - 1) / 2 * s for n, s in zip(shape, SPACING, strict=False)]  # half-size in mm

    hu = np.full(shape, -1000.0)
    body = (p[1] / (extent[1] * rng.uniform(0.80, 0.92))) ** 2 + (p[2] / (extent[2] * rng.uniform(0.86, 0.96))) ** 2
    hu[body <= 1] = rng.uniform(-100, -70)  # fat
    hu[(body > 0.8) & (body <= 1)] = rng.uniform(35, 60)  # the abdominal wall's muscle
    for s in (-1.0, 1.0):  # psoas-like muscles beside the spine
        psoas = _ellipsoid(p, (0, extent[1] * 0.45, s * extent[2] * 0.2), (extent[0] * 1.2, 7, 6), 0.0)
        hu[psoas <= 1] = rng.uniform(35, 60)
    spine = (p[1] - extent[1] * 0.6) ** 2 + (p[2] / 1.2) ** 2 <= (extent[1] * rng.uniform(0.1, 0.14)) ** 2
    hu[spine & (body <= 1)] = 700.0
    side = rng.choice([-1.0, 1.0])  # the liver's side
    liver = _ellipsoid(
        p,
        (rng.uniform(-8, 8), -extent[1] * 0.25, side * extent[2] * 0.45),
        (extent[0] * 0.9, extent[1] * 0.35, extent[2] * 0.3),
        rng.uniform(-0.4, 0.4),
    )
    hu[(liver <= 1) & (body <= 1)] = rng.uniform(95, 125)

    label = np.zeros(shape, np.uint8)
    kidneys = []
    for s in (-1.0, 1.0):
        centre = (rng.uniform(-6, 6), extent[1] * rng.uniform(0.15, 0.3), s * extent[2] * rng.uniform(0.4, 0.55))
        radii = (rng.uniform(12, 18), rng.uniform(8, 11), rng.uniform(6, 8.5))
        angle = s * rng.uniform(0.2, 0.7)
        k = _ellipsoid(p, centre, radii, angle)
        sinus = _ellipsoid(p, (centre[0], centre[1], centre[2] - s * radii[2] * 0.45), [r * 0.45 for r in radii], angle)
        hu[k <= 1] = rng.uniform(150, 210)
        hu[sinus <= 1] = rng.uniform(25, 55)
        label[k <= 1] = 1
        kidneys.append((centre, radii))
    for t in range(1 if rng.random() < 0.7 else 2):
        centre, radii = kidneys[int(rng.integers(2))] if t == 0 else kidneys[int(rng.integers(2))]
        direction = rng.standard_normal(3)
        direction /= np.linalg.norm(direction)
        at = [c + d * r * rng.uniform(0.5, 0.95) for c, d, r in zip(centre, direction, radii, strict=False)]
        r = rng.uniform(5, 10)
        tumour = _ellipsoid(p, at, (r * rng.uniform(0.8, 1.2), r, r * rng.uniform(0.8, 1.2)), rng.uniform(0, 3.1))
        wobble = 1 + 0.25 * _smooth_field(rng, shape, 3.0)  # irregular margins
        inside = tumour <= wobble
        hu[inside] = rng.uniform(60, 100)
        label[inside] = 2

    from scipy.ndimage import gaussian_filter

    hu += 10 * gaussian_filter(rng.standard_normal(shape), 1.5) / 0.1  # tissue texture (about 10 HU)
    bias = 1 + rng.uniform(0.03, 0.08) * _smooth_field(rng, shape, 12.0)
    hu = (hu + 1000) * bias - 1000
    hu += rng.normal(0, rng.uniform(8, 16), shape)
    return np.clip(np.round(hu), -1024, 3071).astype(np.int16), label


def _write_nifti(path: Path, array: np.ndarray) -> None:
    import nibabel

    image = nibabel.Nifti1Image(array, affine=np.diag([*SPACING, 1.0]))
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".nii.gz")
    os.close(fd)
    try:
        nibabel.save(image, tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def _header() -> dict:
    return {
        "generator": "trainperf unet3d phantoms",
        "version": VERSION,
        "seed": SEED,
        "train_cases": TRAIN_CASES,
        "eval_cases": EVAL_CASES,
    }


def read_manifest(data_dir: Path) -> dict:
    return verified.read_manifest(mini_dir(data_dir) / MANIFEST, FIX)


def verify_mini(data_dir: Path, *, trust_cache: bool = False) -> list[str]:
    """Problems with the mini cases ([] when all are there and match the manifest's sizes and sha256)."""
    try:
        manifest = read_manifest(data_dir)
    except DataError as e:
        return [str(e)]
    root = mini_dir(data_dir)
    if {k: manifest.get(k) for k in _header()} != _header():
        return [f"{root / MANIFEST} was written by another generator version or settings: {FIX}"]
    names = [f"case_{cid}/{f}" for cid in case_ids() for f in (IMAGE_FILE, LABEL_FILE)]
    missing = [n for n in names if not isinstance(manifest["files"].get(n), dict)]
    if missing:
        return [f"{root / MANIFEST} does not list {missing[0]}: {FIX}"]
    expected = {
        n: verified.Expected(sha256=manifest["files"][n]["sha256"], size=manifest["files"][n]["bytes"]) for n in names
    }
    return verified.check_files(root, expected, trust_cache=trust_cache)


def prepare_mini(data_dir: Path) -> list[Path]:
    """Draw and write the mini cases and their manifest (idempotent: nothing is rewritten when they verify)."""
    root = mini_dir(data_dir)
    if not verify_mini(data_dir, trust_cache=True):
        return []
    written, files = [], {}
    for i, cid in enumerate(case_ids()):
        folder = root / f"case_{cid}"
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise DataError(
                f"cannot create data folder {folder} ({e.strerror}): choose another with --data-dir"
            ) from None
        image, label = draw_case(i)
        for name, array in ((IMAGE_FILE, image), (LABEL_FILE, label)):
            path = folder / name
            _write_nifti(path, array)
            files[f"case_{cid}/{name}"] = {"bytes": path.stat().st_size, "sha256": verified.sha256(path)}
            written.append(path)
    atomic_write_text(root / MANIFEST, json.dumps({**_header(), "files": files}, indent=1) + "\n")
    written.append(root / MANIFEST)
    return written


def write_smoke_fixture(root: Path) -> str:
    """Four tiny KiTS19 cases (two of them evaluation cases of the reference's split) in the KiTS19 layout.

    Written at KiTS19-like spacings (3.0 or 2.5 mm slices, 0.8 mm pixels) so that the loader resamples them;
    as NIfTI float64 images, as KiTS19's are. Deterministic.
    """
    import nibabel

    cases = {"00000": (3.0, 0.8, 0.8), "00001": (2.5, 0.78, 0.78), "00002": (3.0, 0.8, 0.8), "00003": (2.5, 0.9, 0.9)}
    for n, (cid, spacing) in enumerate(cases.items()):
        image, label = draw_case(n, seed=SEED + 1)
        folder = root / f"case_{cid}"
        folder.mkdir(parents=True, exist_ok=True)
        affine = np.diag([*spacing, 1.0])
        nibabel.save(nibabel.Nifti1Image(image.astype(np.float64), affine), folder / IMAGE_FILE)
        nibabel.save(nibabel.Nifti1Image(label, affine), folder / LABEL_FILE)
    return f"{len(cases)} KiTS19-layout cases (NIfTI, 2.5-3.0 mm slices), 2 of them reference evaluation cases"
