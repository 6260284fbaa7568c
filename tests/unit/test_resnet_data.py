"""The Fashion-MNIST IDX files: preparation, checksums and clear errors for bad files."""

from __future__ import annotations

import shutil

import pytest

from trainperf.errors import DataError
from trainperf.workloads.resnet import data, mini_data


@pytest.fixture
def mini_copy(tmp_path, data_dir):
    dest = tmp_path / "data"
    shutil.copytree(mini_data.mini_dir(data_dir), mini_data.mini_dir(dest))
    return dest


def test_prepared_data_loads_with_the_expected_shapes(data_dir):
    xtr, ytr, xte, yte = mini_data.load_mini(data_dir)
    assert xtr.shape == (60000, 1, 28, 28) and xte.shape == (10000, 1, 28, 28)
    assert ytr.shape == (60000,) and int(ytr.max()) == 9
    assert mini_data.verify_mini(data_dir) == []


def test_prepare_is_idempotent(mini_copy):
    assert mini_data.prepare_mini(mini_copy) == []  # nothing rewritten


def test_truncated_file_names_file_and_fix(mini_copy):
    f = mini_data.mini_dir(mini_copy) / "train-images-idx3-ubyte"
    f.write_bytes(f.read_bytes()[:100000])
    with pytest.raises(DataError, match=r"train-images-idx3-ubyte is 100000 bytes.*trainperf data prepare resnet"):
        mini_data.load_mini(mini_copy)
    assert any("checksum" in p for p in mini_data.verify_mini(mini_copy))


def test_wrong_magic_number(mini_copy):
    f = mini_data.mini_dir(mini_copy) / "t10k-labels-idx1-ubyte"
    raw = bytearray(f.read_bytes())
    raw[3] = 0x03
    f.write_bytes(bytes(raw))
    with pytest.raises(DataError, match=r"t10k-labels-idx1-ubyte has IDX magic number 0x00000803"):
        mini_data.load_mini(mini_copy)


def test_wrong_image_count(mini_copy):
    f = mini_data.mini_dir(mini_copy) / "t10k-images-idx3-ubyte"
    raw = bytearray(f.read_bytes())
    raw[4:8] = (9999).to_bytes(4, "big")
    f.write_bytes(bytes(raw[: 16 + 9999 * 784]))
    with pytest.raises(DataError, match=r"t10k-images-idx3-ubyte holds 9999 items, expected 10000"):
        mini_data.load_mini(mini_copy)


def test_missing_file(mini_copy):
    (mini_data.mini_dir(mini_copy) / "train-labels-idx1-ubyte").unlink()
    with pytest.raises(DataError, match="train-labels-idx1-ubyte is missing"):
        mini_data.load_mini(mini_copy)


def test_prepare_repairs_a_corrupt_file(mini_copy):
    f = mini_data.mini_dir(mini_copy) / "t10k-labels-idx1-ubyte"
    f.write_bytes(b"garbage")
    assert mini_data.prepare_mini(mini_copy) == [f]
    assert mini_data.verify_mini(mini_copy) == []


def test_prepare_without_the_debian_package_says_what_to_install(tmp_path):
    with pytest.raises(DataError, match="apt-get install dataset-fashion-mnist"):
        mini_data.prepare_mini(tmp_path / "d", source=tmp_path / "nowhere")
    assert not list((tmp_path / "d").rglob("*ubyte*"))


def test_imagenet_layout_loads_with_the_reference_transforms(tmp_path):
    from PIL import Image

    root = tmp_path / "imagenet"
    for split in ("train", "val"):
        for wnid in ("n01440764", "n01443537"):
            folder = root / split / wnid
            folder.mkdir(parents=True)
            for i in range(2):
                Image.new("RGB", (300, 260), (i * 100, 50, 200)).save(folder / f"{wnid}_{i}.JPEG")
    train, val = data.imagenet_datasets(root, classes=None)  # two classes stand in for the 1000
    assert len(train) == 4 and len(val) == 4 and train.classes == ["n01440764", "n01443537"]
    x, y = train[0]
    assert tuple(x.shape) == (3, 224, 224) and y == 0
    assert tuple(val[3][0].shape) == (3, 224, 224) and val[3][1] == 1


def test_imagenet_missing_split_says_which_layout(tmp_path):
    (tmp_path / "train").mkdir()
    with pytest.raises(DataError, match=r"val not found.*<wnid>/\*\.JPEG"):
        data.imagenet_datasets(tmp_path)
