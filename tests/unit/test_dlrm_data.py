"""The Criteo click-log readers (TSV and the reference's binary form) and the mini generator."""

from __future__ import annotations

import numpy as np
import pytest

from trainperf.errors import DataError
from trainperf.workloads.dlrm import data, generator

SIZES = [7] * data.NUM_SPARSE


def tsv_line(label: str = "1", dense: list[str] | None = None, cats: list[str] | None = None) -> str:
    dense = dense if dense is not None else [str(i) for i in range(data.NUM_DENSE)]
    cats = cats if cats is not None else [f"{i * 0x1000 + 0xA:08x}" for i in range(data.NUM_SPARSE)]
    return "\t".join([label, *dense, *cats]) + "\n"


def test_tsv_values_as_the_reference_parses_them_and_the_mini_scale_s_rows_value_mod_size(tmp_path):
    path = tmp_path / "day_0"
    dense = ["", "-3", "0", "5", *[str(10**k) for k in range(9)]]
    cats = ["", "FFFFFFFF", *[f"{i:x}" for i in range(24)]]
    path.write_text(tsv_line("0", dense, cats) + tsv_line("1"))
    log = data.read_tsv(path, SIZES)
    assert log.labels.tolist() == [0.0, 1.0]
    expected = np.log1p(np.maximum([0, 0, 0, 5, *[10**k for k in range(9)]], 0)).astype(np.float32)
    assert np.allclose(log.dense[0], expected)
    assert log.sparse[0].tolist() == [0, 0xFFFFFFFF % 7, *[i % 7 for i in range(24)]]
    assert log.sparse[1].tolist() == [(i * 0x1000 + 0xA) % 7 for i in range(data.NUM_SPARSE)]


def test_tsv_chunks_keep_line_numbers_and_a_missing_final_newline_is_fine(tmp_path):
    path = tmp_path / "day_0"
    path.write_text("".join(tsv_line(str(i % 2)) for i in range(10)).rstrip("\n"))
    chunks = list(data.iter_tsv(path, SIZES, chunk_lines=3))
    assert [len(c) for c in chunks] == [3, 3, 3, 1]
    bad = tmp_path / "bad"
    bad.write_text("".join(tsv_line() for _ in range(7)) + tsv_line("2"))
    with pytest.raises(DataError, match=r"bad: line 8, column 1: label '2', expected 0 or 1"):
        list(data.iter_tsv(bad, SIZES, chunk_lines=3))


@pytest.mark.parametrize(
    "line,message",
    [
        (tsv_line()[:-1] + "\textra\n", r"line 2: 41 tab-separated columns, expected 40"),
        ("\t".join(tsv_line().split("\t")[:30]) + "\n", r"line 2: 30 tab-separated columns"),
        (tsv_line(cats=["zz"] + ["1"] * 25), r"line 2, column 15: categorical feature 1 is 'zz', not a hexadecimal"),
        (tsv_line(cats=["1"] * 25 + ["123456789"]), r"line 2, column 40: categorical feature 26 is '123456789'"),
        (tsv_line(label="yes"), r"line 2, column 1: label 'yes', expected 0 or 1"),
        (tsv_line(label=""), r"line 2, column 1: label '', expected 0 or 1"),
        (tsv_line(dense=["1.5"] + ["0"] * 12), r"line 2, column 2: integer feature 1 is '1.5', not a whole number"),
        (tsv_line(dense=["0"] * 12 + ["-"]), r"line 2, column 14: integer feature 13 is '-'"),
    ],
)
def test_bad_tsv_lines_name_the_file_line_and_column(tmp_path, line, message):
    path = tmp_path / "day_0"
    path.write_text(tsv_line() + line + tsv_line())
    with pytest.raises(DataError, match=message) as e:
        data.read_tsv(path, SIZES)
    assert str(path) in str(e.value)


def _records(n: int) -> tuple[data.ClickLog, np.ndarray]:
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 1000, (n, data.NUM_DENSE))
    log = data.ClickLog(
        rng.integers(0, 2, n).astype(np.float32),
        np.log1p(raw).astype(np.float32),
        rng.integers(0, 7, (n, data.NUM_SPARSE)),
    )
    return log, raw


def test_binary_form_round_trip(tmp_path):
    log, raw = _records(50)
    path = tmp_path / "terabyte_processed_test.bin"
    data.write_binary(path, log, raw)
    records = data.open_binary(path)
    assert records.shape == (50, 40)
    back = data.binary_records(records, slice(10, 20), path, SIZES)
    assert np.array_equal(back.labels, log.labels[10:20]) and np.array_equal(back.sparse, log.sparse[10:20])
    assert np.allclose(back.dense, log.dense[10:20])


def test_bad_binary_files_name_the_record(tmp_path):
    log, raw = _records(5)
    path = tmp_path / "x.bin"
    data.write_binary(path, log, raw)
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(
        DataError, match=r"x.bin: truncated: 797 bytes is 4 whole records of 160 bytes and 157 bytes of record 5"
    ):
        data.open_binary(path)
    bad_label = data.ClickLog(np.array([0, 1, 3], np.float32), log.dense[:3], log.sparse[:3])
    data.write_binary(path, bad_label, raw[:3])
    with pytest.raises(DataError, match=r"x.bin: record 3: label 3, expected 0 or 1"):
        data.binary_records(data.open_binary(path), slice(0, 3), path, SIZES)
    with pytest.raises(DataError, match=r"record 1: categorical feature 1 has row \d, outside its table of 1 rows"):
        data.binary_records(data.open_binary(path), slice(0, 2), path, [1] * 26)


def test_generator_writes_criteo_tsv_the_reader_maps_back_to_its_rows(tmp_path):
    made = generator.generate(n_train=2000, n_eval=1000)
    for name, text in made["days"].items():
        (tmp_path / name).write_text(text)
    log = data.read_tsv(tmp_path / generator.EVAL_FILE, generator.MINI_TABLE_SIZES)
    assert len(log) == 1000 and log.sparse.max(axis=0).tolist() <= [n - 1 for n in generator.MINI_TABLE_SIZES]
    facts = made["facts"][generator.EVAL_FILE]
    assert 0.15 < facts["click_rate"] < 0.40 and 0.75 < facts["best_auc"] < 0.88
    assert generator.generate(n_train=2000, n_eval=1000)["days"] == made["days"]  # seeded


def test_verify_reports_a_changed_file(tmp_path, monkeypatch):
    monkeypatch.setattr(generator, "TRAIN_SAMPLES", 300)
    monkeypatch.setattr(generator, "EVAL_SAMPLES", 200)
    real_generate = generator.generate
    monkeypatch.setattr(generator, "generate", lambda: real_generate(300, 200))
    written = generator.prepare_mini(tmp_path)
    assert len(written) == 3 and generator.verify_mini(tmp_path) == []
    assert generator.prepare_mini(tmp_path) == []  # idempotent
    day = generator.mini_dir(tmp_path) / generator.EVAL_FILE
    day.write_bytes(day.read_bytes().replace(b"\t", b" ", 1))
    assert "checksum" in generator.verify_mini(tmp_path)[0]
