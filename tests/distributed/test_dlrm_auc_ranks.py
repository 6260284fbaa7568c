"""dlrm's AUC on 2 gloo ranks equals the AUC on 1: every evaluation sample is scored once and gathered."""

from __future__ import annotations

import pytest
from test_evaluation_shards import _evaluate_together

pytestmark = [pytest.mark.slow, pytest.mark.distributed]


def test_two_ranks_give_the_auc_of_one(tmp_path, data_dir):
    values = _evaluate_together(["dlrm"], data_dir, {1: tmp_path / "one.json", 2: tmp_path / "two.json"})
    one, two = values[1]["dlrm"], values[2]["dlrm"]
    assert set(one) == {"auc"} and 0.0 < one["auc"] < 1.0
    assert two == pytest.approx(one, rel=1e-9, abs=1e-12)
