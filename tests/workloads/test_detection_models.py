"""One optimizer step of each detection model on fake data at both sizes, and the reference models' facts."""

from __future__ import annotations

import re
from pathlib import Path

import mlperf_logging
import pytest
import torch
from stepping import dry_workload, one_step

from trainperf.workloads.common.detection import models
from trainperf.workloads.maskrcnn import model as maskrcnn_model

RULES = Path(mlperf_logging.__file__).parent / "compliance_checker" / "training_2.0.0"


@pytest.mark.parametrize("key", ["ssd", "maskrcnn"])
def test_mini_model_one_step(key, tmp_path):
    w = dry_workload(key, "mini", tmp_path)
    assert (w.train_samples, w.eval_samples) == (8000, 500)  # the scenes' sizes, known without reading them
    model, value = one_step(w)
    loss = w.loss(model, w.synthetic_batch())
    assert torch.isfinite(loss) and loss > 0
    assert value == {f: 0.0 for f, _ in w.spec.fields}
    assert w.reference_tensor_names(model) == []


@pytest.mark.parametrize("key", ["ssd", "maskrcnn"])
def test_reference_dry_run_is_full_size_on_a_small_batch(key, tmp_path):
    # The full-size step itself is tests/workloads/test_contract.py's.
    w = dry_workload(key, "reference", tmp_path)
    assert w.local_batch_size == w.DRY_RUN_LOCAL_BATCH
    assert len(w.reference_tensor_names(w.build_model())) == {"ssd": 89, "maskrcnn": 21}[key]


def _closed_tensor_list(name: str) -> list[str]:
    end_block = (RULES / name).read_text().split("- END:")[1].split("- KEY:")[0]
    return sorted(re.findall(r'"([A-Za-z0-9_.]+)"', end_block))


def test_ssd_tensor_names_match_the_v2_closed_rule_file():
    expected = _closed_tensor_list("closed_ssd.yaml")
    assert len(expected) == 89
    assert sorted(models.ssd_tensor_names(models.reference_retinanet())) == expected


def test_maskrcnn_tensor_names_match_the_v2_closed_rule_file():
    expected = _closed_tensor_list("closed_maskrcnn.yaml")
    assert len(expected) == 21
    with torch.device("meta"):  # the names, without allocating 44 M parameters
        net = maskrcnn_model.reference_maskrcnn()
    assert sorted(models.maskrcnn_tensor_names(net)) == expected


def test_reference_models_have_the_mlperf_sizes():
    retina = models.reference_retinanet()
    assert retina.head.classification_head.num_classes == 264
    assert retina.transform.min_size == (800,) and retina.transform.max_size == 800
    with torch.device("meta"):
        mask = maskrcnn_model.reference_maskrcnn()
    assert mask.transform.min_size == (800,) and mask.transform.max_size == 1333
    # frozen BatchNorm and frozen stem + layer1, as in the references
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in mask.backbone.body.modules())
    assert not mask.backbone.body.conv1.weight.requires_grad
    assert mask.backbone.body.layer2[0].conv1.weight.requires_grad


def test_mini_models_keep_the_data_size():
    # torchvision's default transform would scale 96 px scenes up to 800 px
    for net in (models.mini_retinanet(10), models.mini_maskrcnn(10)):
        net.eval()
        images, _ = net.transform([torch.rand(3, 96, 96)])
        assert images.tensors.shape[-2:] == (96, 96)


def test_backbone_checkpoint_errors_are_clear(tmp_path):
    from trainperf.errors import DataError

    model = models.reference_retinanet()
    with pytest.raises(DataError, match="not found"):
        models.load_backbone_checkpoint(model, tmp_path / "missing.pth")
    torch.save({"conv1.weight": torch.zeros(1)}, tmp_path / "partial.pth")
    with pytest.raises(DataError, match="lacks"):
        models.load_backbone_checkpoint(model, tmp_path / "partial.pth")
    # a real torchvision ResNeXt50-32x4d state dict loads
    import torchvision

    torch.save(torchvision.models.resnext50_32x4d().state_dict(), tmp_path / "x50.pth")
    models.load_backbone_checkpoint(model, tmp_path / "x50.pth")
