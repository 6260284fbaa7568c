"""Checkpoints are loaded as tensors only: one that needs Python objects is refused, naming the file and the fix,
and nothing in it runs, even where the environment forces torch to unpickle everything."""

from __future__ import annotations

import os

import pytest
import torch

from trainperf.checkpoint import load_tensors
from trainperf.errors import DataError


class _RunsACommand:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_state_dict_loads(tmp_path):
    torch.save({"w": torch.ones(2)}, tmp_path / "ok.pt")
    assert torch.equal(load_tensors(tmp_path / "ok.pt", what="checkpoint")["w"], torch.ones(2))


def test_a_pickle_that_would_run_code_is_refused_and_never_runs(tmp_path, monkeypatch):
    marker = tmp_path / "RAN"
    torch.save({"w": torch.ones(1), "x": _RunsACommand(marker)}, tmp_path / "evil.pt")
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    with pytest.raises(DataError) as err:
        load_tensors(tmp_path / "evil.pt", what="minigo target checkpoint")
    assert not marker.exists()
    text = str(err.value)
    assert text.startswith(f"minigo target checkpoint {tmp_path / 'evil.pt'} holds Python objects other than tensors")
    assert "torch.save(model.state_dict(), PATH)" in text and "\x1b" not in text


@pytest.mark.parametrize(
    ("content", "says"),
    [(b"not a checkpoint", "cannot be read as a torch checkpoint"), (None, "holds a Tensor, not a state dict")],
)
def test_other_files_are_refused_clearly(tmp_path, content, says):
    path = tmp_path / "x.pt"
    path.write_bytes(content) if content is not None else torch.save(torch.zeros(1), path)
    with pytest.raises(DataError, match=says):
        load_tensors(path, what="checkpoint")
    with pytest.raises(DataError, match="not found"):
        load_tensors(tmp_path / "missing.pt", what="checkpoint")
