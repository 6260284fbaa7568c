"""The reference Mask R-CNN: the MSRA ResNet-50 and its R-50.pkl (read without running code from the file),
the reference's heads, losses, optimizer and decay steps. Full-size models are built on the meta device where
only names and shapes matter."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from stepping import dry_workload
from torchvision.models.detection.roi_heads import RoIHeads

from trainperf.errors import DataError, UsageError
from trainperf.workloads.common.detection import models
from trainperf.workloads.maskrcnn import c2_weights
from trainperf.workloads.maskrcnn import model as ref


def _meta_model():
    with torch.device("meta"):
        return ref.reference_maskrcnn()


# --- the model ---------------------------------------------------------------------------------------------
def test_reference_model_has_the_reference_size_names_and_81_classes():
    net = _meta_model()
    assert sum(p.numel() for p in net.parameters()) == 44_347_573
    assert len(models.maskrcnn_tensor_names(net)) == 21
    assert net.roi_heads.box_predictor.cls_score.out_features == 81  # 80 COCO categories and background
    assert net.roi_heads.box_predictor.bbox_pred.out_features == 81 * 4
    assert net.roi_heads.mask_predictor.mask_fcn_logits.out_channels == 81
    assert net.rpn._post_nms_top_n["training"] == 1000 and net.rpn._pre_nms_top_n["training"] == 2000
    assert (net.roi_heads.fg_bg_sampler.batch_size_per_image, net.roi_heads.fg_bg_sampler.positive_fraction) == (
        512,
        0.25,
    )
    assert isinstance(net.roi_heads, ref.ReferenceRoIHeads) and net.roi_heads.box_beta == 1.0


def test_msra_backbone_strides_in_the_1x1_with_frozen_affine_batchnorm():
    body = _meta_model().backbone.body
    for stage in (body.layer2, body.layer3, body.layer4):
        assert stage[0].conv1.stride == (2, 2) and stage[0].conv2.stride == (1, 1)
        assert stage[0].downsample[0].stride == (2, 2)
    assert body.layer1[0].conv1.stride == (1, 1)
    frozen = [m for m in body.modules() if isinstance(m, torch.nn.modules.batchnorm._NormBase)]
    assert not frozen  # no trainable or tracked BatchNorm anywhere
    assert all(m.eps == 0.0 for m in body.modules() if type(m).__name__ == "FrozenBatchNorm2d")
    # FREEZE_CONV_BODY_AT = 2: stem and res2 frozen, res3-res5 trained
    assert not any(p.requires_grad for p in [*body.conv1.parameters(), *body.layer1.parameters()])
    assert all(p.requires_grad for layer in (body.layer2, body.layer3, body.layer4) for p in layer.parameters())


def test_input_is_bgr_0_255_minus_the_caffe_mean():
    transform = _meta_model().transform
    image = torch.zeros(3, 2, 2)
    image[0] = 1.0  # pure red in RGB [0, 1]
    out = ref.CaffeTransform.normalize(transform, image)
    assert out[:, 0, 0].tolist() == pytest.approx([-102.9801, -115.9465, 255 - 122.7717])  # B, G, R
    assert transform.min_size == (800,) and transform.max_size == 1333 and transform.size_divisible == 32


def test_heads_are_initialised_as_the_reference():
    torch.manual_seed(0)
    net = ref.reference_maskrcnn()
    predictor, head = net.roi_heads.box_predictor, net.roi_heads.box_head
    assert float(predictor.cls_score.weight.detach().std()) == pytest.approx(0.01, rel=0.02)
    assert float(predictor.bbox_pred.weight.detach().std()) == pytest.approx(0.001, rel=0.02)
    biases = [predictor.cls_score.bias, predictor.bbox_pred.bias, head.fc6.bias, head.fc7.bias]
    biases += [net.roi_heads.mask_predictor.conv5_mask.bias, net.roi_heads.mask_predictor.mask_fcn_logits.bias]
    assert all(float(b.detach().abs().max()) == 0 for b in biases)
    bound = (3.0 / head.fc7.in_features) ** 0.5  # kaiming_uniform_(a=1): U(-sqrt(3/fan_in), sqrt(3/fan_in))
    assert (
        float(head.fc7.weight.detach().abs().max()) <= bound
        and float(head.fc7.weight.detach().abs().max()) > 0.9 * bound
    )


def _tiny_heads(cls, beta=None):
    from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
    from torchvision.models.detection.mask_rcnn import MaskRCNNHeads, MaskRCNNPredictor
    from torchvision.ops import MultiScaleRoIAlign

    torch.manual_seed(0)
    heads = cls(
        MultiScaleRoIAlign(["0"], 7, 2), TwoMLPHead(4 * 49, 16), FastRCNNPredictor(16, 3),
        0.5, 0.5, 32, 0.25, (10.0, 10.0, 5.0, 5.0), 0.0, 0.5, 10,
        MultiScaleRoIAlign(["0"], 14, 2), MaskRCNNHeads(4, (4,), 1), MaskRCNNPredictor(4, 4, 3),
    )  # fmt: skip
    if beta is not None:
        heads.box_beta = beta
    return heads


def _roi_inputs():
    g = torch.Generator().manual_seed(1)
    features = {"0": torch.randn(1, 4, 16, 16, generator=g)}
    proposals = [torch.tensor([[4.0, 4, 40, 40], [10, 8, 50, 60], [0, 0, 63, 63], [30, 30, 60, 50]])]
    masks = torch.zeros(2, 64, 64, dtype=torch.uint8)
    masks[0, 5:40, 5:40] = masks[1, 10:55, 12:48] = 1
    targets = [
        {"boxes": torch.tensor([[5.0, 5, 40, 40], [12, 10, 48, 55]]), "labels": torch.tensor([1, 2]), "masks": masks}
    ]
    return features, proposals, [(64, 64)], targets


def test_roi_heads_are_torchvisions_with_the_box_loss_at_beta_1():
    features, proposals, shapes, targets = _roi_inputs()
    theirs = _tiny_heads(RoIHeads).train()
    torch.manual_seed(5)
    _, expected = theirs(features, [p.clone() for p in proposals], shapes, targets)
    same = _tiny_heads(ref.ReferenceRoIHeads, beta=1 / 9).train()  # torchvision's beta: identical box losses
    torch.manual_seed(5)
    _, got = same(features, [p.clone() for p in proposals], shapes, targets)
    assert got.keys() == expected.keys() == {"loss_classifier", "loss_box_reg", "loss_mask"}
    for k in ("loss_classifier", "loss_box_reg"):
        assert torch.allclose(got[k], expected[k]), k
    # the mask targets' window is the proposal's inclusive x1..x2 (boxes.py), one pixel inside torchvision's
    assert not torch.allclose(got["loss_mask"], expected["loss_mask"])
    ours = _tiny_heads(ref.ReferenceRoIHeads).train()  # the reference's beta 1
    torch.manual_seed(5)
    _, losses = ours(features, [p.clone() for p in proposals], shapes, targets)
    assert torch.allclose(losses["loss_classifier"], expected["loss_classifier"])
    assert not torch.allclose(losses["loss_box_reg"], expected["loss_box_reg"])
    # and in evaluation, the same detections and masks as torchvision's
    theirs.eval(), ours.eval()
    with torch.no_grad():
        a, _ = theirs(features, proposals, shapes)
        b, _ = ours(features, proposals, shapes)
    assert [sorted(x) for x in a] == [sorted(x) for x in b]
    assert all(torch.equal(x[k], y[k]) for x, y in zip(a, b, strict=True) for k in x)


def test_box_head_loss_is_smooth_l1_with_beta_1_over_all_sampled_regions():
    logits = torch.zeros(3, 2)
    deltas = torch.zeros(3, 8)
    deltas[0, 4:] = torch.tensor([0.5, -2.0, 0.0, 0.0])  # region 0, class 1
    labels = [torch.tensor([1, 0, 0])]
    targets = [torch.zeros(3, 4)]
    _, box = ref.box_head_loss(logits, deltas, labels, targets)
    # smooth L1, beta 1: 0.5 * 0.5^2 + (2 - 0.5); divided by the 3 sampled regions
    assert float(box) == pytest.approx((0.125 + 1.5) / 3)


# --- R-50.pkl ------------------------------------------------------------------------------------------------
def test_c2_names_cover_every_backbone_tensor_once():
    state = _meta_model().backbone.body.state_dict()
    learnt = {k for k in state if not k.endswith(("running_mean", "running_var"))}
    shapes = c2_weights.r50_blob_shapes()
    mapped = {c2_weights.c2_to_torchvision(c2): c2 for c2 in shapes}
    assert len(mapped) == len(shapes) == 159 and set(mapped) == learnt
    assert all(tuple(state[k].shape) == shapes[c2] for k, c2 in mapped.items())
    assert mapped["layer1.0.conv1.weight"] == "res2_0_branch2a_w"
    assert mapped["bn1.weight"] == "res_conv1_bn_s" and mapped["layer4.0.downsample.1.bias"] == "res5_0_branch1_bn_b"


def test_written_c2_pickle_is_python2_cpickle_layout(tmp_path):
    blobs = {"conv1_w": np.arange(6, dtype=np.float32).reshape(1, 6, 1, 1), "res_conv1_bn_s": np.ones(300, np.float32)}
    data = b"".join(c2_weights.c2_pickle_bytes(blobs))
    assert data.startswith(b"\x80\x02}") and b"cnumpy.core.multiarray\n_reconstruct\n" in data
    assert b"_codecs" not in data  # array bytes are Python 2 8-bit strings, as cPickle wrote them
    plain = pickle.loads(data, encoding="latin1")  # what the reference's _load_c2_pickled_weights does
    assert plain.keys() == {"blobs"} and all(np.array_equal(plain["blobs"][k], v) for k, v in blobs.items())
    (tmp_path / "a.pkl").write_bytes(data)
    flat = tmp_path / "b.pkl"
    c2_weights.write_c2_pickle(flat, {**blobs, "conv1_w_momentum": np.zeros(1, np.float32)}, under_blobs=False)
    for path in (tmp_path / "a.pkl", flat):
        got = c2_weights.read_c2_pickle(path)
        assert got.keys() == blobs.keys() and all(np.array_equal(got[k], v) for k, v in blobs.items())


@pytest.fixture(scope="module")
def r50_pkl(tmp_path_factory):
    path = tmp_path_factory.mktemp("r50") / "R-50.pkl"
    blobs = c2_weights.random_r50_blobs(seed=7)
    for k in blobs:
        if k.endswith("_bn_s"):  # scales and biases that are not the identity, to see where they land
            blobs[k] = np.linspace(0.5, 1.5, blobs[k].size, dtype=np.float32)
        elif k.endswith("_bn_b"):
            blobs[k] = np.linspace(-0.1, 0.1, blobs[k].size, dtype=np.float32)
    c2_weights.write_c2_pickle(path, blobs)
    return path, blobs


def test_r50_pkl_loads_and_a_block_computes_what_the_msra_block_computes(r50_pkl):
    path, blobs = r50_pkl
    body = ref.msra_resnet50()
    loaded = c2_weights.load_r50_into(body, path)
    assert len(loaded) == 159 and "fc1000_w" not in loaded
    assert torch.equal(body.bn1.weight, torch.from_numpy(blobs["res_conv1_bn_s"]))
    assert torch.equal(body.bn1.running_var, torch.ones(64))  # the C2 affine form: statistics stay 0 / 1

    def affine(x, name):
        return (
            x * torch.from_numpy(blobs[name + "_bn_s"])[:, None, None]
            + torch.from_numpy(blobs[name + "_bn_b"])[:, None, None]
        )

    def conv(x, name, stride=1, padding=0):
        return F.conv2d(x, torch.from_numpy(blobs[name + "_w"]), stride=stride, padding=padding)

    x = torch.randn(1, 256, 12, 10)
    p = "res3_0"  # the first block of res3: stride 2 in branch2a (the 1x1), as MSRA's ResNet
    y = F.relu(affine(conv(x, f"{p}_branch2a", stride=2), f"{p}_branch2a"))
    y = F.relu(affine(conv(y, f"{p}_branch2b", padding=1), f"{p}_branch2b"))
    y = affine(conv(y, f"{p}_branch2c"), f"{p}_branch2c")
    expected = F.relu(y + affine(conv(x, f"{p}_branch1", stride=2), f"{p}_branch1"))
    with torch.no_grad():
        assert torch.allclose(body.layer2[0](x), expected, atol=1e-5)


def test_r50_pkl_that_would_run_code_is_refused_unread(tmp_path):
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    evil = tmp_path / "R-50.pkl"
    evil.write_bytes(pickle.dumps({"blobs": {"conv1_w": Evil()}}, protocol=2))
    with pytest.raises(DataError, match=r"R-50\.pkl asks to call posix\.system.*refused unread"):
        c2_weights.read_c2_pickle(evil)
    assert not marker.exists()
    # a bytes object pickled by Python 3 at protocol 2 asks for _codecs.encode: refused too
    evil.write_bytes(pickle.dumps({"blobs": {"x": b"\x00"}}, protocol=2))
    with pytest.raises(DataError, match="_codecs.encode"):
        c2_weights.read_c2_pickle(evil)
    # an allowed global used to allocate before any data is read
    huge = (
        b"\x80\x02}U\x01a"
        + b"cnumpy.core.multiarray\n_reconstruct\n(cnumpy\nndarray\n(J\x00\x00\x00\x7ftU\x01bt"
        + b"Rs."
    )
    evil.write_bytes(huge)
    with pytest.raises(DataError, match="not an empty array"):
        c2_weights.read_c2_pickle(evil)


def test_missing_wrong_shaped_and_foreign_weights_are_named(tmp_path):
    body = ref.msra_resnet50()
    bad = tmp_path / "R-50.pkl"
    shapes = c2_weights.r50_blob_shapes()
    c2_weights.write_c2_pickle(bad, {"conv1_w": np.zeros(shapes["conv1_w"], np.float32)})
    with pytest.raises(
        DataError,
        match=r"R-50\.pkl lack 158 of the reference ResNet-50's 159 tensors \(first: res_conv1_bn_s \(bn1.weight\)",
    ):
        c2_weights.load_r50_into(body, bad)
    c2_weights.write_c2_pickle(bad, {"res2_0_branch2a_w": np.zeros((64, 64, 3, 3), np.float32)})
    with pytest.raises(
        DataError,
        match=r"tensor res2_0_branch2a_w \(layer1.0.conv1.weight\) has shape \(64, 64, 3, 3\).*needs \(64, 64, 1, 1\)",
    ):
        c2_weights.load_r50_into(body, bad)
    c2_weights.write_c2_pickle(bad, {"conv1_w": np.zeros(shapes["conv1_w"], np.int32)})
    with pytest.raises(DataError, match=r"tensor conv1_w \(conv1.weight\) is of type int32"):
        c2_weights.load_r50_into(body, bad)
    torch.save(body.state_dict(), tmp_path / "resnet50.pth")  # a torchvision checkpoint is not the reference's
    with pytest.raises(DataError, match="cannot be read as a Detectron C2 pickle"):
        c2_weights.load_r50_into(body, tmp_path / "resnet50.pth")
    bad.write_bytes(b"".join(c2_weights.c2_pickle_bytes({"conv1_w": np.zeros(100, np.float32)}))[:300])  # truncated
    with pytest.raises(DataError, match="cannot be read as a Detectron C2 pickle"):
        c2_weights.read_c2_pickle(bad)
    with pytest.raises(DataError, match="not found"):
        c2_weights.read_c2_pickle(tmp_path / "absent.pkl")


# --- the workload: backbone, optimizer, decay steps --------------------------------------------------------------
def test_workload_loads_r50_pkl_from_the_recipe_path(tmp_path, r50_pkl):
    import dataclasses

    from trainperf.workloads.common.detection import fixtures

    path, blobs = r50_pkl
    fixtures.write_coco2017(tmp_path / "maskrcnn" / "reference")
    w = dry_workload("maskrcnn", "reference", tmp_path)
    w.config = dataclasses.replace(w.config, dry_run=False)
    with pytest.raises(DataError, match=r"R-50\.pkl not found.*MSRA"):
        w.prepare()  # the default place, <data-dir>/maskrcnn/reference/R-50.pkl, is empty
    w.recipe = dataclasses.replace(w.recipe, backbone_checkpoint=str(path))
    w.prepare()
    model = w.build_model()
    assert torch.equal(model.backbone.body.layer3[2].conv2.weight, torch.from_numpy(blobs["res4_2_branch2b_w"]))
    w.recipe = dataclasses.replace(w.recipe, backbone_checkpoint="", backbone_init="random")  # open division only
    w.prepare()  # no R-50.pkl needed: the reference's random initialisation
    assert w._backbone is None
    w.recipe = dataclasses.replace(w.recipe, backbone_init="torchvision")
    with pytest.raises(UsageError, match="backbone_init='torchvision'.*R-50.pkl or random"):
        w.prepare()


def test_optimizer_gives_biases_twice_the_rate_without_weight_decay(tmp_path):
    w = dry_workload("maskrcnn", "reference", tmp_path)
    model = _meta_model()
    opt, sched = w.build_optimizer(model)
    weights, biases = opt.param_groups
    assert all("bias" not in n for n, p in model.named_parameters() if any(p is q for q in weights["params"]))
    assert len(biases["params"]) == sum(1 for n, p in model.named_parameters() if p.requires_grad and "bias" in n)
    assert biases["initial_lr"] == 2 * weights["initial_lr"] == 2 * 0.02
    assert (weights["weight_decay"], biases["weight_decay"]) == (1e-4, 0.0)
    # The reference (engine/trainer.py) steps WarmupMultiStepLR before each update: its first update already
    # takes the factor of step 1, 1/3 * (1 - 1/500) + 1/500, and its 500th is the first at the full rate.
    assert weights["lr"] == pytest.approx(0.02 * (1 / 3 * (1 - 1 / 500) + 1 / 500))
    factor = sched.lr_lambdas[0]  # factor(s): the multiplier of update s, counted from 0 as the harness does
    assert factor(498) == pytest.approx(1 / 3 * (1 - 499 / 500) + 499 / 500) and factor(499) == pytest.approx(1.0)


def test_decay_steps_follow_the_batch_and_are_logged(tmp_path):
    import dataclasses

    w = dry_workload("maskrcnn", "reference", tmp_path)
    assert w.global_batch_size == 2  # a dry run's batch: the reference's run_and_time.sh steps at 2 images per step
    assert w.hparams()["opt_learning_rate_decay_steps"] == [480000, 640000]
    for batch, steps in ((16, [60000, 80000]), (64, [15000, 20000]), (48, [20000, 26667])):
        w.recipe = dataclasses.replace(w.recipe, global_batch_size=batch)
        assert w.hparams()["opt_learning_rate_decay_steps"] == steps
    w.recipe = dataclasses.replace(w.recipe, global_batch_size=64)
    opt, sched = w.build_optimizer(_meta_model())
    factor = sched.lr_lambdas[0]  # update s from 0; the reference's 15000th update (from 1) is its first decayed
    assert (
        factor(14998) == pytest.approx(1.0)
        and factor(14999) == pytest.approx(0.1)
        and factor(19998) == pytest.approx(0.1)
        and factor(19999) == pytest.approx(0.01)
    )
    w.recipe = dataclasses.replace(w.recipe, opt_learning_rate_decay_steps=(16500, 22000))  # given: used as given
    assert w.hparams()["opt_learning_rate_decay_steps"] == [16500, 22000]


def test_the_optimizer_is_logged_by_the_references_name(tmp_path):
    """tools/train_mlperf.py:129 logs opt_name "sgd_with_momentum" (MLPerf v2.0 maskrcnn); so does trainperf."""
    assert dry_workload("maskrcnn", "reference", tmp_path).hparams()["opt_name"] == "sgd_with_momentum"
