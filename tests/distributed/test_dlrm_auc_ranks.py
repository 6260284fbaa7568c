"""dlrm's AUC on 2 gloo ranks equals the AUC on 1: every evaluation sample is scored once and gathered."""

from __future__ import annotations

import pytest
from test_evaluation_shards import _evaluate

pytestmark = [pytest.mark.slow, pytest.mark.distributed]


def test_two_ranks_give_the_auc_of_one(tmp_path, data_dir):
    one = _evaluate(["dlrm"], data_dir, tmp_path / "one.json", 1)["dlrm"]
    two = _evaluate(["dlrm"], data_dir, tmp_path / "two.json", 2)["dlrm"]
    assert set(one) == {"auc"} and 0.0 < one["auc"] < 1.0
    assert two == pytest.approx(one, rel=1e-9, abs=1e-12)
