"""The MLPerf v2.0 reference Mask R-CNN R50-FPN (mlcommons/training ``object_detection``, maskrcnn-benchmark's
``e2e_mask_rcnn_R_50_FPN_1x.yaml`` over its ``config/defaults.py``), from torchvision's building blocks.

What the reference fixes, and where it is built here:

- The MSRA ResNet-50 (``modeling/backbone/resnet.py``): the stride of each downsampling block in its first
  1x1 convolution (``STRIDE_IN_1X1=True``), frozen BatchNorm reduced to its affine form (the C2 weights carry a
  scale and a bias only), the stem and stage 1 frozen (``FREEZE_CONV_BODY_AT=2``), convolutions initialised
  ``kaiming_uniform_(a=1)``. torchvision's ``resnet50`` with ``FrozenBatchNorm2d(eps=0)`` has the same modules
  and names; only its downsampling blocks carry the stride in the 3x3, so :func:`msra_resnet50` moves it.
- Input as the Caffe weights expect (``TO_BGR255``, ``PIXEL_MEAN``, ``PIXEL_STD``): BGR, 0-255, minus
  (102.9801, 115.9465, 122.7717), std 1 (:class:`CaffeTransform`); images 800-1333 px, padded to 32.
- FPN P2-P6 with 256 channels (torchvision's ``FeaturePyramidNetwork``, same ``kaiming_uniform_(a=1)`` init
  and max-pool P6), RPN with one 3x3 convolution and N(0, 0.01) init, anchors 32-512 at ratios 0.5/1/2.
- Box head ``fc6``/``fc7`` of 1024 (``make_fc``: ``kaiming_uniform_(a=1)``, bias 0) and a predictor of 81
  classes, 80 COCO categories and background (``cls_score`` N(0, 0.01), ``bbox_pred`` N(0, 0.001), biases 0);
  mask head of four 3x3 convolutions of 256 (torchvision's, initialised as the reference's) and a 2x
  deconvolution and 1x1 logits (``kaiming_normal_`` weights, biases 0).
- Losses: smooth L1 with beta 1/9 in the RPN and beta 1 in the box head (``rpn/loss.py``,
  ``roi_heads/box_head/loss.py``); torchvision fixes the box head's at 1/9, so :class:`ReferenceRoIHeads`
  computes it with the reference's beta.
- Boxes as maskrcnn-benchmark counts them (``boxes.py``): its "+1" pixel arithmetic, its anchors (ratios rounded
  its way, centred on ``(stride - 1) / 2``, at fixed strides), the RPN's border-straddle rule and its pooler.

The remaining differences from maskrcnn-benchmark are listed in this benchmark's README.md.
"""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.models import resnet50
from torchvision.models._utils import IntermediateLayerGetter
from torchvision.models.detection import MaskRCNN
from torchvision.models.detection.backbone_utils import BackboneWithFPN
from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
from torchvision.models.detection.mask_rcnn import MaskRCNNHeads, MaskRCNNPredictor
from torchvision.models.detection.roi_heads import RoIHeads, maskrcnn_inference, maskrcnn_loss
from torchvision.models.detection.transform import GeneralizedRCNNTransform
from torchvision.ops import FrozenBatchNorm2d

from trainperf.workloads.maskrcnn import boxes

COCO_CLASSES = 81  # maskrcnn-benchmark's ROI_BOX_HEAD.NUM_CLASSES: the 80 COCO 2017 categories and background
CAFFE_MEAN_BGR = (102.9801, 115.9465, 122.7717)  # INPUT.PIXEL_MEAN, in BGR order, 0-255
CAFFE_STD = (1.0, 1.0, 1.0)  # INPUT.PIXEL_STD
FPN_CHANNELS = 256
BOX_HEAD_DIM = 1024  # ROI_BOX_HEAD.MLP_HEAD_DIM
MASK_HEAD_LAYERS = (256, 256, 256, 256)  # ROI_MASK_HEAD.CONV_LAYERS
RPN_BOX_BETA = 1.0 / 9  # rpn/loss.py
BOX_HEAD_BETA = 1.0  # roi_heads/box_head/loss.py


STAGES = {"layer1": "0", "layer2": "1", "layer3": "2", "layer4": "3"}  # res2..res5, the FPN's inputs C2..C5


def msra_resnet50() -> nn.Module:
    """MSRA's ResNet-50 trunk as the reference builds it (stem and res2-res5, no classifier): stride in the 1x1
    convolution, frozen affine BatchNorm (scale 1, bias 0 until the C2 weights are loaded), stem and res2
    frozen, the reference's initialisation. Its forward returns the four stages' outputs."""
    body = resnet50(weights=None, norm_layer=partial(FrozenBatchNorm2d, eps=0.0))
    for stage in (body.layer2, body.layer3, body.layer4):
        first = stage[0]  # torchvision puts the stride in conv2 (3x3); MSRA in conv1 (1x1)
        first.conv1.stride, first.conv2.stride = first.conv2.stride, (1, 1)
    for module in body.modules():
        if isinstance(module, nn.Conv2d):  # resnet.py: every convolution kaiming_uniform_(a=1), no bias
            nn.init.kaiming_uniform_(module.weight, a=1)
    for frozen in (body.conv1, body.layer1):  # FREEZE_CONV_BODY_AT = 2: the stem and res2
        for p in frozen.parameters():
            p.requires_grad_(False)
    return IntermediateLayerGetter(body, return_layers=STAGES)  # drops the ImageNet classifier


class CaffeTransform(GeneralizedRCNNTransform):
    """torchvision's resize-and-batch transform with the reference's normalisation: the loader's RGB image in
    [0, 1] becomes BGR in 0-255 minus the Caffe mean (``image_mean``, BGR), divided by ``image_std``."""

    def normalize(self, image: torch.Tensor) -> torch.Tensor:
        if not image.is_floating_point():
            raise TypeError(f"images must be floating point tensors in [0, 1], not {image.dtype}")
        mean = torch.as_tensor(self.image_mean, dtype=image.dtype, device=image.device)
        std = torch.as_tensor(self.image_std, dtype=image.dtype, device=image.device)
        return (image.flip(0) * 255.0 - mean[:, None, None]) / std[:, None, None]


class ReferenceMaskRCNN(MaskRCNN):
    """torchvision's Mask R-CNN holding its boxes in :mod:`boxes`' shifted form between the transform and the
    output: the ground truth made inclusive (and a pixel-wide box dropped) before the resize, the detections
    made inclusive before the masks are pasted and the boxes resized back, then written shifted, so that COCO's
    width ``x2 - x1`` is the reference's ``x2 - x1 + 1``."""

    def forward(self, images, targets=None):  # type: ignore[override]
        if self.training and targets is None:
            raise ValueError("training needs targets")
        sizes = [(int(img.shape[-2]), int(img.shape[-1])) for img in images]
        if targets is not None:
            targets = boxes.inclusive_targets(targets)
        images, targets = self.transform(images, targets)
        if targets is not None:
            targets = [{**t, "boxes": boxes.shifted(t["boxes"])} for t in targets]
        features = self.backbone(images.tensors)
        proposals, rpn_losses = self.rpn(images, features, targets)
        detections, head_losses = self.roi_heads(features, proposals, images.image_sizes, targets)
        if self.training:
            return {**head_losses, **rpn_losses}
        detections = [{**d, "boxes": boxes.shifted(d["boxes"], -1.0)} for d in detections]
        detections = self.transform.postprocess(detections, images.image_sizes, sizes)
        return [{**d, "boxes": boxes.shifted(d["boxes"])} for d in detections]


class ReferenceRoIHeads(RoIHeads):
    """torchvision's ROI heads (boxes and masks) with the reference's box-regression loss.

    torchvision's ``RoIHeads.forward`` calls ``fastrcnn_loss``, whose smooth-L1 beta is fixed at 1/9; the
    reference's box head uses beta 1. This forward is torchvision's for boxes and masks (no keypoints),
    reusing its sampling, post-processing and mask loss, with :func:`box_head_loss` in place of ``fastrcnn_loss``.
    """

    box_beta: float = BOX_HEAD_BETA

    def forward(self, features, proposals, image_shapes, targets=None):  # type: ignore[override]
        if self.training:
            if targets is None:
                raise ValueError("training needs targets")
            proposals, matched_idxs, labels, regression_targets = self.select_training_samples(proposals, targets)
        box_features = self.box_head(self.box_roi_pool(features, proposals, image_shapes))
        class_logits, box_regression = self.box_predictor(box_features)
        if not self.training:
            found, scores, classes = self.postprocess_detections(class_logits, box_regression, proposals, image_shapes)
            result = [{"boxes": b, "labels": c, "scores": s} for b, s, c in zip(found, scores, classes, strict=True)]
            mask_logits = self.mask_predictor(
                self.mask_head(self.mask_roi_pool(features, [r["boxes"] for r in result], image_shapes))
            )
            for probs, r in zip(maskrcnn_inference(mask_logits, classes), result, strict=True):
                r["masks"] = probs
            return result, {}
        loss_classifier, loss_box_reg = box_head_loss(
            class_logits, box_regression, labels, regression_targets, beta=self.box_beta
        )
        # masks are learnt on the positive proposals only
        positive = [torch.where(lab > 0)[0] for lab in labels]
        mask_proposals = [p[i] for p, i in zip(proposals, positive, strict=True)]
        mask_matched = [m[i] for m, i in zip(matched_idxs, positive, strict=True)]
        mask_logits = self.mask_predictor(self.mask_head(self.mask_roi_pool(features, mask_proposals, image_shapes)))
        # the mask targets' window is the proposal's inclusive x1..x2, as the reference crops its polygons
        inclusive = [boxes.shifted(p, -1.0) for p in mask_proposals]
        loss_mask = maskrcnn_loss(
            mask_logits, inclusive, [t["masks"] for t in targets], [t["labels"] for t in targets], mask_matched
        )
        return [], {"loss_classifier": loss_classifier, "loss_box_reg": loss_box_reg, "loss_mask": loss_mask}


def box_head_loss(
    class_logits: torch.Tensor,
    box_regression: torch.Tensor,
    labels: list[torch.Tensor],
    regression_targets: list[torch.Tensor],
    beta: float = BOX_HEAD_BETA,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``FastRCNNLossComputation`` of the reference: cross-entropy over the sampled regions, and smooth L1 (beta 1)
    of the positive regions' deltas for their own class, summed and divided by the number of sampled regions."""
    labels_all = torch.cat(labels, dim=0)
    targets_all = torch.cat(regression_targets, dim=0)
    classification = F.cross_entropy(class_logits, labels_all)
    positive = torch.where(labels_all > 0)[0]
    deltas = box_regression.reshape(class_logits.shape[0], -1, 4)[positive, labels_all[positive]]
    box = F.smooth_l1_loss(deltas, targets_all[positive], beta=beta, reduction="sum") / labels_all.numel()
    return classification, box


def _box_head() -> TwoMLPHead:
    head = TwoMLPHead(FPN_CHANNELS * 7 * 7, BOX_HEAD_DIM)
    for fc in (head.fc6, head.fc7):  # make_fc: "XavierFill", i.e. kaiming_uniform_(a=1); bias 0
        nn.init.kaiming_uniform_(fc.weight, a=1)
        nn.init.zeros_(fc.bias)
    return head


def _box_predictor(num_classes: int) -> FastRCNNPredictor:
    predictor = FastRCNNPredictor(BOX_HEAD_DIM, num_classes)  # class-specific boxes: 4 deltas per class
    nn.init.normal_(predictor.cls_score.weight, std=0.01)  # FPNPredictor
    nn.init.normal_(predictor.bbox_pred.weight, std=0.001)
    nn.init.zeros_(predictor.cls_score.bias)
    nn.init.zeros_(predictor.bbox_pred.bias)
    return predictor


def _mask_predictor(num_classes: int) -> MaskRCNNPredictor:
    dim = MASK_HEAD_LAYERS[-1]
    predictor = MaskRCNNPredictor(dim, dim, num_classes)  # weights kaiming_normal_(fan_out), as MaskRCNNC4Predictor
    for module in (predictor.conv5_mask, predictor.mask_fcn_logits):
        nn.init.zeros_(module.bias)  # the reference zeroes the biases; torchvision leaves PyTorch's default
    return predictor


def reference_maskrcnn(
    *, num_classes: int = COCO_CLASSES, min_size: int = 800, max_size: int = 1333, image_candidates: int = 1000
) -> MaskRCNN:
    """The reference Mask R-CNN R50-FPN from random weights (the MSRA backbone is loaded after, from R-50.pkl).

    ``num_classes`` counts the background; ``image_candidates`` is MLPerf's ``num_image_candidates``, the RPN's
    proposals per image after NMS in training.
    """
    backbone = BackboneWithFPN(
        msra_resnet50(),
        return_layers=STAGES,
        in_channels_list=[256, 512, 1024, 2048],
        out_channels=FPN_CHANNELS,
    )  # extra block: P6 by max-pooling P5, as the reference's LastLevelMaxPool
    model = ReferenceMaskRCNN(
        backbone,
        num_classes=None,  # the heads below carry the classes
        min_size=min_size,
        max_size=max_size,
        image_mean=list(CAFFE_MEAN_BGR),
        image_std=list(CAFFE_STD),
        # RPN (defaults.py and the 1x config): 2000 per level before NMS in training, 1000 in testing; NMS 0.7;
        # 256 anchors per image, half positive; IoU 0.7 / 0.3
        rpn_anchor_generator=boxes.ReferenceAnchorGenerator(),
        rpn_pre_nms_top_n_train=2000,
        rpn_pre_nms_top_n_test=1000,
        rpn_post_nms_top_n_train=image_candidates,
        rpn_post_nms_top_n_test=1000,
        box_head=_box_head(),
        box_predictor=_box_predictor(num_classes),
        mask_head=MaskRCNNHeads(FPN_CHANNELS, MASK_HEAD_LAYERS, 1),
        mask_predictor=_mask_predictor(num_classes),
    )
    model.transform = CaffeTransform(min_size, max_size, list(CAFFE_MEAN_BGR), list(CAFFE_STD), size_divisible=32)
    rpn = model.rpn
    model.rpn = boxes.ReferenceRPN(
        rpn.anchor_generator,
        rpn.head,
        fg_iou_thresh=0.7,
        bg_iou_thresh=0.3,
        batch_size_per_image=256,
        positive_fraction=0.5,
        pre_nms_top_n=dict(rpn._pre_nms_top_n),
        post_nms_top_n=dict(rpn._post_nms_top_n),
        nms_thresh=0.7,
    )
    heads = model.roi_heads
    model.roi_heads = ReferenceRoIHeads(
        # ROI heads (defaults.py): 7x7 box and 14x14 mask pooling with 2 samples per bin over P2-P5; 512 regions
        # per image, a quarter positive, IoU 0.5; deltas weighted (10, 10, 5, 5); score 0.05, NMS 0.5, 100 per image
        box_roi_pool=boxes.ReferencePooler(output_size=7, sampling_ratio=2),
        box_head=heads.box_head,
        box_predictor=heads.box_predictor,
        fg_iou_thresh=0.5,
        bg_iou_thresh=0.5,
        batch_size_per_image=512,
        positive_fraction=0.25,
        bbox_reg_weights=(10.0, 10.0, 5.0, 5.0),
        score_thresh=0.05,
        nms_thresh=0.5,
        detections_per_img=100,
        mask_roi_pool=boxes.ReferencePooler(output_size=14, sampling_ratio=2),
        mask_head=heads.mask_head,
        mask_predictor=heads.mask_predictor,
    )
    return model
