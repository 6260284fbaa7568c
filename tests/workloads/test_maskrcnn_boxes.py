"""The reference Mask R-CNN's boxes as maskrcnn-benchmark counts them (trainperf/workloads/maskrcnn/boxes.py): its
anchors at fixed strides, the RPN's border-straddle rule, the "+1" pixel arithmetic from the ground truth to the
written detections, and its pooler; the mini model keeps torchvision's."""

from __future__ import annotations

import pytest
import torch
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.image_list import ImageList
from torchvision.models.detection.roi_heads import paste_masks_in_image
from torchvision.models.detection.rpn import RegionProposalNetwork
from torchvision.ops import roi_align

from trainperf.workloads.common.detection import models
from trainperf.workloads.maskrcnn import boxes
from trainperf.workloads.maskrcnn import model as ref


@pytest.fixture(scope="module")
def small():
    torch.manual_seed(0)
    return ref.reference_maskrcnn(min_size=80, max_size=160)  # a 40 x 40 image is enlarged x 2


def test_anchors_are_the_reference_s_at_its_fixed_strides(small):
    # Detectron's FPN anchors of stride 4, size 32 (anchor_generator.py:233-303): ratios' widths rounded, inclusive
    expected = torch.tensor([[-22.0, -10, 25, 13], [-14, -14, 17, 17], [-10, -22, 13, 25]])
    assert torch.equal(boxes.reference_cell_anchors(4, 32), expected)
    # P2-P6 of an 800 x 1216 batch: P6 is 13 rows, its stride the reference's 64 (torchvision's 800 // 13 = 61)
    shapes = [(200, 304), (100, 152), (50, 76), (25, 38), (13, 19)]
    feats = [torch.zeros(1, 1, h, w) for h, w in shapes]
    images = ImageList(torch.zeros(1, 3, 800, 1216), [(800, 1216)])
    [anchors] = small.rpn.anchor_generator(images, feats)
    assert torch.equal(anchors[:3], boxes.shifted(expected))
    p6 = anchors[-13 * 19 * 3 :]
    assert torch.equal(p6[19 * 3] - p6[0], torch.tensor([0.0, 64, 0, 64]))  # one row down
    assert torch.equal(p6[:3], boxes.shifted(boxes.reference_cell_anchors(64, 512)))


def test_rpn_leaves_anchors_straddling_the_border_out_of_its_loss(small):
    rpn = small.rpn
    gt = boxes.shifted(torch.tensor([[-10.0, 10, 29, 49], [20, 20, 59, 59]]))
    anchors = [gt.clone()]  # each matches a ground-truth box exactly; the first reaches 10 px past the left edge
    rpn.image_sizes = [(100, 60)]
    labels, _ = rpn.assign_targets_to_anchors(anchors, [{"boxes": gt}])
    assert labels[0].tolist() == [-1.0, 1.0]
    # inclusive x2 < width: an anchor ending on the last column is inside, one past it straddles
    edge = boxes.shifted(torch.tensor([[0.0, 0, 59, 99], [0, 0, 60, 99]]))
    assert boxes.straddles(edge, 100, 60).tolist() == [False, True]


def test_box_coding_on_shifted_boxes_is_the_reference_s_plus_one_coding(small):
    """maskrcnn-benchmark's BoxCoder (box_coder.py:45-61, 77-106), written out on inclusive boxes, equals
    torchvision's coder on the shifted boxes the model holds, with the RPN's weights and the box head's."""
    g = torch.Generator().manual_seed(0)
    a = torch.rand(50, 2, generator=g) * 100
    gt_wh, pr_wh = torch.rand(50, 2, generator=g) * 60, torch.rand(50, 2, generator=g) * 60
    gt, proposals = torch.cat([a, a + gt_wh], 1), torch.cat([a + 3, a + 3 + pr_wh], 1)
    for coder, (wx, wy, ww, wh) in ((small.rpn.box_coder, (1, 1, 1, 1)), (small.roi_heads.box_coder, (10, 10, 5, 5))):
        pw, ph = proposals[:, 2] - proposals[:, 0] + 1, proposals[:, 3] - proposals[:, 1] + 1
        gw, gh = gt[:, 2] - gt[:, 0] + 1, gt[:, 3] - gt[:, 1] + 1
        expected = torch.stack(
            [
                wx * ((gt[:, 0] + 0.5 * gw) - (proposals[:, 0] + 0.5 * pw)) / pw,
                wy * ((gt[:, 1] + 0.5 * gh) - (proposals[:, 1] + 0.5 * ph)) / ph,
                ww * torch.log(gw / pw),
                wh * torch.log(gh / ph),
            ],
            1,
        )
        got = coder.encode_single(boxes.shifted(gt), boxes.shifted(proposals))
        assert torch.allclose(got, expected, atol=1e-5)
        decoded = coder.decode_single(got, boxes.shifted(proposals))
        assert torch.allclose(boxes.shifted(decoded, -1.0), gt, atol=1e-3)  # the reference's x2 = ... - 1


def test_ground_truth_is_made_inclusive_before_the_resize_and_pixel_wide_boxes_dropped(small):
    seen = {}

    def rpn(images, features, targets=None):
        seen["targets"] = targets
        raise StopIteration

    small.train()
    small.rpn.forward = rpn
    masks = torch.zeros(2, 40, 40, dtype=torch.uint8)
    target = {"boxes": torch.tensor([[4.0, 4, 20, 20], [10, 10, 11, 20]]), "labels": torch.tensor([3, 4])}
    try:
        with pytest.raises(StopIteration):
            small([torch.rand(3, 40, 40)], [{**target, "masks": masks}])
    finally:
        del small.rpn.forward
    [t] = seen["targets"]
    # COCO's x + w - 1 = 19, enlarged x 2 as inclusive coordinates (38), then held shifted (39)
    assert t["boxes"].tolist() == [[8.0, 8.0, 39.0, 39.0]]
    assert t["labels"].tolist() == [3] and t["masks"].shape[0] == 1  # the 1-pixel-wide box is no target


def test_detections_are_pasted_and_written_as_the_reference_does(small):
    class Heads(torch.nn.Module):
        def forward(self, features, proposals, image_shapes, targets=None):
            box = torch.tensor([[10.0, 10, 21, 31]])  # shifted, in the enlarged image: inclusive 10..20, 10..30
            masks = torch.ones(1, 1, 28, 28)
            return [{"boxes": box, "labels": torch.tensor([1]), "scores": torch.tensor([0.9]), "masks": masks}], {}

    heads, small.roi_heads = small.roi_heads, Heads()
    small.eval()
    try:
        with torch.no_grad():
            [out] = small([torch.rand(3, 40, 40)])
    finally:
        small.roi_heads = heads
    # inclusive 10..20 resized by 1/2 is 5..10 (the reference's BoxList.resize), written with width 10 - 5 + 1
    assert out["boxes"].tolist() == [[5.0, 5.0, 11.0, 16.0]]
    # the mask pasted over the inclusive box 5..10, 5..15, as the reference's Masker pastes it (paste_mask_in_image,
    # padding 1; torchvision's paste_masks_in_image is that algorithm)
    expected = paste_masks_in_image(torch.ones(1, 1, 28, 28), torch.tensor([[5.0, 5, 10, 15]]), (40, 40), padding=1)
    assert torch.equal(out["masks"], expected)


def test_pooler_reads_inclusive_coordinates_at_the_level_of_the_inclusive_area():
    g = torch.Generator().manual_seed(0)
    feats = {str(k): torch.randn(1, 2, 256 >> k, 256 >> k, generator=g) for k in range(4)}
    pooler = boxes.ReferencePooler(output_size=7, sampling_ratio=2)
    box = torch.tensor([[0.0, 0, 112, 112]])  # shifted: inclusive 0..111, area 112^2, level floor(4 + log2(0.5)) = 3
    got = pooler(feats, [box])
    expected = roi_align(feats["1"], torch.tensor([[0.0, 0, 0, 111, 111]]), (7, 7), 1 / 8, 2, aligned=False)
    assert torch.allclose(got, expected)


def test_the_mini_model_keeps_torchvision_s_boxes():
    m = models.mini_maskrcnn(10)
    assert type(m.rpn) is RegionProposalNetwork and type(m.rpn.anchor_generator) is AnchorGenerator
    assert not any(isinstance(x, boxes.ReferencePooler) for x in m.modules())
