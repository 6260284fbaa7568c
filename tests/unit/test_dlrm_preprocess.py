"""The reference's preprocessing of Criteo TSV days (dlrm/preprocess.py), on hand-written days with known answers.

The reference is facebookresearch/dlrm @ 6d75c84 (pinned by mlcommons/training @ a0671ab8): ``data_utils.py``
maps a categorical value to ``int(value, 16) % 40,000,000`` and then to its rank in order of first appearance
over days 0-23 (one dictionary per feature); it shuffles the training days 0-22 across and within days; the
evaluation set is the first ``ceil(N / 2)`` samples of day 23, in order (``data_loader_terabyte.py``).
Each sample here carries a tag in its first integer feature (100 * day + line) to follow it through.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from trainperf import registry
from trainperf.dist import DistContext
from trainperf.errors import DataError
from trainperf.spec import RunConfig
from trainperf.workloads.dlrm import data, preprocess
from trainperf.workloads.dlrm.workload import REFERENCE_DAYS, REFERENCE_TABLE_SIZES


def line(tag: int, cats: dict[int, str] | None = None, label: int = 0) -> str:
    values = ["0000002a"] * data.NUM_SPARSE
    for j, v in (cats or {}).items():
        values[j] = v
    return "\t".join([str(label), str(tag), *["1"] * (data.NUM_DENSE - 1), *values]) + "\n"


def write_days(root, days: list[list[str]]):
    root.mkdir(parents=True, exist_ok=True)
    for k, lines in enumerate(days):
        (root / f"day_{k}").write_text("".join(lines))
    return [root / f"day_{k}" for k in range(len(days))]


def reference_workload(tmp_path, *, batch: int = 64, sizes=None, dist=None):
    spec = registry.get_spec("dlrm", "reference")
    recipe = dataclasses.replace(registry.default_recipe("dlrm", "reference"), global_batch_size=batch)
    dist = dist or DistContext()
    w = registry.workload_class("dlrm")(spec, recipe, RunConfig(seed=1), data_dir=tmp_path, dist=dist)
    if sizes is not None:
        w.model_config = dataclasses.replace(w.model_config, table_sizes=tuple(sizes))
    return w


def tags(records) -> list[int]:
    return np.asarray(records)[:, 1].tolist()


def labelled_days(train_lines: int = 20, test_lines: int = 9) -> list[list[str]]:
    return [[line(100 * k + i, label=i % 2) for i in range(train_lines)] for k in range(REFERENCE_DAYS - 1)] + [
        [line(100 * (REFERENCE_DAYS - 1) + i, label=i % 2) for i in range(test_lines)]
    ]


def test_categorical_values_become_the_reference_s_dense_ids_per_feature(tmp_path):
    # Feature 6 has the reference's 3-row table: 0x0a and 0x0d are both 1 modulo 3 (one row under a plain
    # hash % table size), but distinct values with their own ids here, 0, 1, 2 in order of first appearance;
    # 0x02625a0a is 40,000,010, the same value as 0x0a after % 40,000,000, so the same id. Feature 1's
    # 'ffffffff' (14,967,295 after % 40 M) first appears in day 23: the dictionaries cover it (the next id).
    days = [[line(0, {5: "0000000a"}), line(1, {5: "0000001e"}), line(2, {5: "0000000a"}), line(3, {5: "0000000d"})]]
    days.append([line(100, {5: "02625a0a"}), line(101, {5: "0000001e", 0: "00000007"})])
    days += [[line(100 * k, {5: "0000000d"})] for k in range(2, REFERENCE_DAYS - 1)]
    days.append([line(2300, {5: "0000001e", 0: "ffffffff"}), line(2301, {5: "0000000a", 0: "00000007"})])
    days[-1].append(line(2302, {5: "0000000d"}))
    write_days(tmp_path / "dlrm" / "reference", days)
    w = reference_workload(tmp_path)
    w.prepare()
    w.load_data()
    train = np.asarray(w.train_records)
    by_tag = {int(r[1]): r[data.NUM_DENSE + 1 :] for r in train}
    assert sorted(by_tag) == sorted([0, 1, 2, 3, 100, 101, *[100 * k for k in range(2, 23)]])
    assert [int(by_tag[t][5]) for t in (0, 1, 2, 3, 100, 101, 200)] == [0, 1, 0, 2, 0, 1, 2]
    assert [int(by_tag[t][0]) for t in (0, 101)] == [0, 1]  # 0x2a first, then 0x07
    test = np.asarray(w.eval_records)
    assert tags(test) == [2300, 2301]  # ceil(3 / 2) = 2, in day 23's order
    assert test[:, data.NUM_DENSE + 1 + 5].tolist() == [1, 0] and test[:, data.NUM_DENSE + 1].tolist() == [2, 1]
    stamp = preprocess.prepare_days(w.root, [w.root / f"day_{k}" for k in range(REFERENCE_DAYS)])
    assert stamp["counts"][5] == 3 and stamp["counts"][0] == 3 and stamp["counts"][1] == 1
    saved = np.load(w.root / preprocess.FOLDER / preprocess.DICTIONARY_FILE)
    assert saved["feature_5"].tolist() == [10, 30, 13]
    assert saved["feature_0"].tolist() == [42, 7, 0xFFFFFFFF % 40_000_000]


def test_dictionaries_number_new_values_in_order_of_first_appearance_across_calls():
    d = preprocess.Dictionaries()
    first = np.zeros((4, data.NUM_SPARSE), np.int64)
    first[:, 3] = [30, 10, 30, 20]
    assert d.rows(first)[:, 3].tolist() == [0, 1, 0, 2]
    second = np.zeros((3, data.NUM_SPARSE), np.int64)
    second[:, 3] = [5, 20, 39_999_999]
    assert d.rows(second)[:, 3].tolist() == [3, 2, 4]
    assert d.counts[3] == 5 and d.counts[0] == 1 and d.values(3).tolist() == [30, 10, 20, 5, 39_999_999]


def test_training_days_are_shuffled_across_days_and_each_sample_is_kept_once(tmp_path):
    write_days(tmp_path / "dlrm" / "reference", labelled_days())
    w = reference_workload(tmp_path, batch=64)
    w.prepare()
    w.load_data()
    assert w.train_samples == 23 * 20
    all_tags = tags(w.train_records)
    assert sorted(all_tags) == sorted(100 * k + i for k in range(23) for i in range(20))  # each exactly once
    dense, _, _ = next(w.train_batches())
    batch_days = {int(round(float(np.expm1(v)))) // 100 for v in dense[:, 0].numpy()}
    # A uniformly random order puts about 22 of the 23 days into a batch of 64; days read in date order with
    # each chunk shuffled put at most the 4 days that fill the first batch (20 samples each).
    assert len(batch_days) >= 12, batch_days
    first_day = [t for t in all_tags if t < 100]
    assert first_day != sorted(first_day)  # shuffled within the day as well


def test_the_shuffle_is_a_permutation_with_small_buckets_and_the_same_every_time(tmp_path):
    days = write_days(tmp_path / "a", labelled_days(train_lines=7, test_lines=4))
    made = preprocess.preprocess(days, tmp_path / "a", bucket_records=16)  # ceil(161 / 16) = 11 buckets
    order = tags(data.open_binary(tmp_path / "a" / preprocess.TRAIN_FILE))
    assert made["train_samples"] == 161 and sorted(order) == sorted(100 * k + i for k in range(23) for i in range(7))
    assert len({t // 100 for t in order[:16]}) >= 8
    again = write_days(tmp_path / "b", labelled_days(train_lines=7, test_lines=4))
    preprocess.preprocess(again, tmp_path / "b", bucket_records=16)
    assert tags(data.open_binary(tmp_path / "b" / preprocess.TRAIN_FILE)) == order


def test_the_evaluation_set_is_the_first_ceil_half_of_day_23_in_order(tmp_path):
    write_days(tmp_path / "dlrm" / "reference", labelled_days(test_lines=9))
    w = reference_workload(tmp_path)
    w.prepare()
    w.load_data()
    assert w.eval_samples == 5  # ceil(9 / 2); 9 // 2 would be 4
    assert tags(w.eval_records) == [2300, 2301, 2302, 2303, 2304]


def test_the_preprocessed_form_is_kept_beside_the_days_and_made_again_when_a_day_changes(tmp_path):
    root = tmp_path / "dlrm" / "reference"
    days = write_days(root, labelled_days())
    before = {p.name: p.read_bytes() for p in days}
    w = reference_workload(tmp_path)
    w.prepare()
    train = root / preprocess.FOLDER / preprocess.TRAIN_FILE
    assert w.binary_dir == root / preprocess.FOLDER and train.is_file()
    assert {p.name: p.read_bytes() for p in days} == before  # the user's files are untouched
    assert sorted(p.name for p in root.iterdir()) == sorted([*before, preprocess.FOLDER])
    made = train.stat().st_mtime_ns
    reference_workload(tmp_path).prepare()
    assert train.stat().st_mtime_ns == made  # kept
    with open(days[23], "a") as f:
        f.write(line(2399))
    w = reference_workload(tmp_path)
    w.prepare()
    w.load_data()
    assert w.eval_samples == 5  # ceil(10 / 2)


def test_more_distinct_values_than_a_table_holds_is_a_clear_error(tmp_path):
    days = labelled_days()
    days[0] = [line(i, {5: f"{i:08x}"}) for i in range(4)]  # 4 values (and 0x2a) for the 3-row table
    write_days(tmp_path / "dlrm" / "reference", days)
    with pytest.raises(DataError, match=r"categorical feature 6 .* has 5 distinct values .* table of 3 rows"):
        reference_workload(tmp_path, sizes=REFERENCE_TABLE_SIZES).prepare()


def test_an_integer_beyond_the_reference_s_int32_names_its_line_and_column(tmp_path):
    days = labelled_days()
    days[2][3] = line(2_147_483_648)
    write_days(tmp_path / "dlrm" / "reference", days)
    with pytest.raises(DataError, match=r"day_2: line 4, column 2: integer feature 1 is 2147483648, beyond"):
        reference_workload(tmp_path).prepare()


def test_preprocessing_ahead_of_a_run_and_a_distributed_run_that_would_have_to_do_it(tmp_path, capsys):
    root = tmp_path / "dlrm" / "reference"
    write_days(root, labelled_days())
    two_ranks = DistContext(rank=1, world_size=2)
    with pytest.raises(DataError, match=r"not preprocessed yet .*`python -m trainperf.workloads.dlrm.preprocess "):
        reference_workload(tmp_path, batch=64, dist=two_ranks).prepare()
    assert not (root / preprocess.FOLDER).exists()
    assert preprocess.main([str(root)]) == 0
    assert "460 training and 5 test samples" in capsys.readouterr().out
    w = reference_workload(tmp_path, batch=64, dist=two_ranks)
    w.prepare()  # made ahead: every rank reads it
    assert w.binary_dir == root / preprocess.FOLDER
    (root / "day_7").unlink()
    assert preprocess.main([str(root)]) == 1
    assert "day_7 missing" in capsys.readouterr().err
