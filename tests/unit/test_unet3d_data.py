"""unet3d data: the generator, the KiTS19 loader and the reference's preprocessing, bad input, patches."""

from __future__ import annotations

import gzip

import nibabel
import numpy as np
import pytest

from trainperf.errors import DataError
from trainperf.workloads.unet3d import data, generator
from trainperf.workloads.unet3d.sampling import TrainSampler, fit_box

PREP = data.Preprocessing(min_shape=(32, 32, 32))


def write_case(root, cid, image, label, spacing=(1.6, 1.2, 1.2)):
    folder = root / f"case_{cid}"
    folder.mkdir(parents=True, exist_ok=True)
    affine = np.diag([*spacing, 1.0])
    nibabel.save(nibabel.Nifti1Image(image, affine), folder / data.IMAGE_FILE)
    nibabel.save(nibabel.Nifti1Image(label, affine), folder / data.LABEL_FILE)
    return folder


def test_phantoms_are_deterministic_labelled_and_differ_per_case():
    a_img, a_lab = generator.draw_case(3)
    b_img, b_lab = generator.draw_case(3)
    assert np.array_equal(a_img, b_img) and np.array_equal(a_lab, b_lab)
    c_img, c_lab = generator.draw_case(4)
    assert a_img.shape != c_img.shape or not np.array_equal(a_lab, c_lab)
    for lab in (a_lab, c_lab):
        counts = np.bincount(lab.ravel(), minlength=3)
        assert len(counts) == 3 and counts[1] > 1000 and counts[2] > 100  # kidneys and a tumour in every case
    assert a_img.dtype == np.int16 and a_lab.dtype == np.uint8


def test_preprocessing_resamples_clips_normalizes_and_pads(tmp_path):
    image = np.full((10, 20, 20), 500.0)  # above the clip: becomes (304 - 101) / 76.9
    image[:, :10] = -1000.0  # below it: (-79 - 101) / 76.9 = -2.34
    label = np.zeros((10, 20, 20), np.uint8)
    label[4:6, 8:12, 8:12] = 2
    write_case(tmp_path, "00007", image, label, spacing=(3.2, 0.6, 0.6))
    img, lab, spacing = data.read_nifti_case(tmp_path / "case_00007")
    assert spacing == pytest.approx((3.2, 0.6, 0.6))
    x, y = data.preprocess_case(img, lab, spacing, PREP)
    # resampled to int(spacing / target * shape) = (20, 10, 10), then padded to the 32^3 patch
    assert x.shape == y.shape == (1, 32, 32, 32) and x.dtype == np.float32 and y.dtype == np.uint8
    assert x.max() == pytest.approx((304 - 101) / 76.9) and x.min() == pytest.approx((-79 - 101) / 76.9)
    assert set(np.unique(y)) == {0, 2}


def test_prepare_cases_writes_the_preprocessed_form_once(tmp_path):
    for i in range(2):
        write_case(tmp_path, f"0000{i}", *generator.draw_case(i))
    folder, ids = data.prepare_cases(tmp_path, PREP)
    assert ids == ["00000", "00001"] and folder == tmp_path / data.PREPROCESSED
    before = (folder / "case_00001_x.npy").stat().st_mtime_ns
    data.prepare_cases(tmp_path, PREP)  # unchanged cases are not preprocessed again
    assert (folder / "case_00001_x.npy").stat().st_mtime_ns == before
    cases = data.load_cases(folder, ids)
    assert cases[0].image.shape == cases[0].label.shape and cases[0].image.shape[0] == 1
    # the reference's preprocessed form is read as it is
    npy_only = tmp_path / "npy"
    npy_only.mkdir()
    for p in folder.glob("case_*.npy"):
        (npy_only / p.name).write_bytes(p.read_bytes())
    assert data.prepare_cases(npy_only, PREP) == (npy_only, ids)


def _good(tmp_path):
    image, label = generator.draw_case(0)
    return write_case(tmp_path, "00012", image, label)


def test_a_case_folder_missing_a_file_names_the_case(tmp_path):
    (_good(tmp_path) / data.LABEL_FILE).unlink()
    with pytest.raises(DataError, match=r"case_00012: .*segmentation.nii.gz is missing"):
        data.prepare_cases(tmp_path, PREP)


def test_a_truncated_nifti_names_the_case(tmp_path):
    path = _good(tmp_path) / data.IMAGE_FILE
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(DataError, match=r"case_00012: .*imaging.nii.gz cannot be read as NIfTI \(truncated or corrupt"):
        data.prepare_cases(tmp_path, PREP)


def test_a_label_volume_of_another_shape_names_the_case(tmp_path):
    folder = _good(tmp_path)
    nibabel.save(nibabel.Nifti1Image(np.zeros((5, 6, 7), np.uint8), np.eye(4)), folder / data.LABEL_FILE)
    with pytest.raises(DataError, match=r"case_00012: image .* has shape \(\d+, \d+, \d+\) but its label volume"):
        data.prepare_cases(tmp_path, PREP)


@pytest.mark.parametrize("bad", [3, 255])
def test_labels_outside_0_1_2_name_the_case(tmp_path, bad):
    folder = _good(tmp_path)
    image, label = generator.draw_case(0)
    label[0, 0, 0] = bad
    nibabel.save(nibabel.Nifti1Image(label, np.diag([1.6, 1.2, 1.2, 1.0])), folder / data.LABEL_FILE)
    with pytest.raises(DataError, match=rf"case_00012: .*holds label {bad} outside \{{0, 1, 2\}}"):
        data.prepare_cases(tmp_path, PREP)


def test_a_gzip_that_is_not_nifti_names_the_case(tmp_path):
    folder = _good(tmp_path)
    (folder / data.IMAGE_FILE).write_bytes(gzip.compress(b"not a nifti file" * 40))
    with pytest.raises(DataError, match=r"case_00012: .*cannot be read as NIfTI"):
        data.prepare_cases(tmp_path, PREP)


def test_preprocessed_npy_of_the_wrong_kind_names_the_case(tmp_path):
    np.save(tmp_path / "case_00003_x.npy", np.zeros((1, 4, 4, 4), np.float64))
    np.save(tmp_path / "case_00003_y.npy", np.zeros((1, 4, 4, 4), np.uint8))
    with pytest.raises(DataError, match=r"case_00003: .*case_00003_x.npy holds float64"):
        data.prepare_cases(tmp_path, PREP)


def test_mini_data_verifies_and_a_changed_file_is_found(data_dir, tmp_path):
    assert generator.verify_mini(data_dir) == []
    assert generator.prepare_mini(data_dir) == []  # idempotent: nothing is written again
    assert "manifest.json is missing" in generator.verify_mini(tmp_path)[0]
    manifest = generator.read_manifest(data_dir)
    assert len(manifest["files"]) == 2 * (generator.TRAIN_CASES + generator.EVAL_CASES)


def test_foreground_crops_hold_foreground_and_every_patch_is_patch_sized():
    label = np.zeros((1, 40, 50, 45), np.uint8)
    label[0, 30:36, 5:9, 40:44] = 1
    label[0, 31:33, 6:8, 41:43] = 2
    image = np.zeros(label.shape, np.float32)
    case = data.Case("00000", image, label)
    sampler = TrainSampler([case], (32, 32, 32), oversampling=1.0, seed=5)
    for epoch in range(20):
        x, y = sampler.sample(0, epoch, 0)
        assert x.shape == y.shape == (1, 32, 32, 32) and (y > 0).any()
    random_only = TrainSampler([case], (32, 32, 32), oversampling=0.0, seed=5)
    assert all(random_only.sample(0, e, 0)[0].shape == (1, 32, 32, 32) for e in range(20))


def test_fit_box_grows_and_shrinks_to_the_patch_inside_the_volume():
    rng = np.random.default_rng(0)
    for start, stop, size in [(0, 4, 40), (36, 40, 40), (5, 60, 64), (10, 12, 32)]:
        for _ in range(20):
            lo, hi = fit_box(rng, start, stop, 32, size)
            assert hi - lo == 32 and 0 <= lo and hi <= size


def test_bad_case_stops_a_run_before_the_clock_with_no_result(tmp_path):
    import subprocess
    import sys

    root = tmp_path / "data" / "unet3d" / "reference"
    generator.write_smoke_fixture(root)
    path = root / "case_00003" / data.LABEL_FILE
    path.write_bytes(path.read_bytes()[:300])  # truncated
    out = tmp_path / "out"
    r = subprocess.run(
        [sys.executable, "-m", "trainperf", "run", "unet3d", "--scale", "reference", "--seed", "1"]
        + ["--data-dir", str(tmp_path / "data"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "KiTS19 case_00003:" in r.stderr and "truncated or corrupt" in r.stderr
    logs = list(out.rglob("result_*.txt")) if out.exists() else []
    assert all('"run_start"' not in p.read_text() for p in logs)  # stopped before the clock
    assert not any(p.name == "result_0.txt" for p in logs)


def test_a_batch_larger_than_the_training_cases_is_refused_before_the_clock(tmp_path):
    """An epoch drops its last partial batch (the reference's DataLoader(drop_last=True)): a global batch above the
    training cases would train nothing and never reach an evaluation, so prepare() refuses it, naming the fix."""
    import dataclasses

    from trainperf import registry
    from trainperf.dist import DistContext
    from trainperf.errors import UsageError
    from trainperf.spec import RunConfig

    generator.write_smoke_fixture(tmp_path / "unet3d" / "reference")  # 2 training and 2 evaluation cases
    spec = registry.get_spec("unet3d", "reference")
    recipe = registry.default_recipe("unet3d", "reference")

    w = registry.workload_class("unet3d")(
        spec,
        dataclasses.replace(recipe, global_batch_size=3),
        RunConfig(seed=1, smoke=True),
        data_dir=tmp_path,
        dist=DistContext(),
    )
    with pytest.raises(UsageError, match="global_batch_size 3 is more than the 2 training cases.*at most 2"):
        w.prepare()  # (a smoke run's batch of 1 per process trains them: test_unet3d_models.py)
