"""The detection models of ``ssd`` (RetinaNet) and ``maskrcnn`` (Mask R-CNN), at both scales.

Both are torchvision's detection models (``torchvision.models.detection``): the same heads, losses,
anchor matching, box coding, NMS and post-processing at both scales. Only the backbone and the sizes
change.

reference: the MLPerf v2.0 models. RetinaNet with a ResNeXt50-32x4d FPN (P3-P7, one head column per
OpenImages class, 264, labels 0..263; every image resized to exactly 800x800 without keeping its aspect
ratio, as the reference's transform does; frozen BatchNorm, stem and layer1 frozen), with ImageNet-pretrained
backbone weights from a user-supplied checkpoint (nothing is downloaded). The reference Mask R-CNN, with
its MSRA backbone, is maskrcnn's own: ``trainperf/workloads/maskrcnn/model.py``.

mini: a small ResNeXt (ssd) / ResNet (maskrcnn) of torchvision's own ``Bottleneck`` blocks, trained from
scratch with ordinary BatchNorm, an FPN of 64 channels on P2-P4 (ssd) or P2-P5 (maskrcnn), anchors sized
for the 96x96 scenes' 10-45 px objects, and torchvision's resize transform set to the data's size (its default of 800 px
would spend the CPU's time on empty pixels). Mask R-CNN also samples fewer regions per image (the scenes hold at most
four objects), which cuts the ROI heads' work without changing what they compute.
"""

from __future__ import annotations

from collections import OrderedDict
from functools import partial

import torch
from torch import nn
from torchvision.models.detection import MaskRCNN, RetinaNet
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.backbone_utils import resnet_fpn_backbone
from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
from torchvision.models.detection.mask_rcnn import MaskRCNNHeads, MaskRCNNPredictor
from torchvision.models.detection.retinanet import RetinaNetHead
from torchvision.models.resnet import Bottleneck
from torchvision.ops.feature_pyramid_network import FeaturePyramidNetwork, LastLevelP6P7

from trainperf.workloads.common.detection.roi_align import GridMultiScaleRoIAlign

MINI_IMAGE_SIZE = 96
MINI_FPN_CHANNELS = 64
MINI_HEAD_CONVS = 2  # RetinaNet head depth at the mini scale (the reference has 4)
# Per-channel mean and standard deviation of the mini scenes (measured on 500 training scenes, in [0, 1]).
MINI_MEAN = (0.47, 0.47, 0.47)
MINI_STD = (0.25, 0.25, 0.25)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

OPENIMAGES_MLPERF_CLASSES = 264  # the MLPerf OpenImages subset's classes


class MiniBackbone(nn.Module):
    """Stem and four stages of torchvision ``Bottleneck`` blocks with an FPN on top.

    Stage strides 4, 8, 16, 32 as in ResNet; ``fpn_stages`` picks the stages the FPN reads (ssd: 2-4,
    like RetinaNet's P3-P5; maskrcnn: 1-4, like Mask R-CNN's P2-P5). ``groups > 1`` makes it a ResNeXt.
    """

    def __init__(
        self,
        *,
        planes: tuple[int, ...] = (8, 16, 32, 64),
        blocks: tuple[int, ...] = (1, 1, 2, 1),
        groups: int = 1,
        width_per_group: int = 64,
        fpn_stages: tuple[int, ...] = (2, 3, 4),
        out_channels: int = MINI_FPN_CHANNELS,
    ) -> None:
        super().__init__()
        stem = 2 * planes[0]
        self.stem = nn.Sequential(
            nn.Conv2d(3, stem, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(stem), nn.ReLU(inplace=True)
        )
        self.stages = nn.ModuleList()
        inplanes = stem
        for p, n in zip(planes, blocks, strict=True):
            layers = []
            for j in range(n):
                stride = 2 if j == 0 else 1
                down = None
                if stride != 1 or inplanes != p * Bottleneck.expansion:
                    down = nn.Sequential(
                        nn.Conv2d(inplanes, p * Bottleneck.expansion, 1, stride=stride, bias=False),
                        nn.BatchNorm2d(p * Bottleneck.expansion),
                    )
                layers.append(Bottleneck(inplanes, p, stride, down, groups=groups, base_width=width_per_group))
                inplanes = p * Bottleneck.expansion
            self.stages.append(nn.Sequential(*layers))
        self.fpn_stages = fpn_stages
        self.fpn = FeaturePyramidNetwork(
            [planes[s - 1] * Bottleneck.expansion for s in fpn_stages], out_channels, extra_blocks=None
        )
        self.out_channels = out_channels

    def forward(self, x: torch.Tensor) -> OrderedDict[str, torch.Tensor]:
        x = self.stem(x)
        feats = OrderedDict()
        for i, stage in enumerate(self.stages, start=1):
            x = stage(x)
            if i in self.fpn_stages:
                feats[f"p{i + 1}"] = x
        return self.fpn(feats)


def mini_retinanet(num_classes: int) -> RetinaNet:
    """RetinaNet on a small ResNeXt-FPN for the 96x96 mini scenes; ``num_classes`` excludes background.

    The scenes' objects are 10-45 px, so the pyramid is P2-P4 (strides 4-16) rather than P3-P7: at stride 8
    many small objects had no anchor with IoU >= 0.5, and the same model on P2-P4 reached 2.5x the mAP in
    1.5x the time (README.md). Each head has two convolutions instead of four to pay for the finer level.
    """
    backbone = MiniBackbone(groups=8, width_per_group=16, fpn_stages=(1, 2, 3))
    # Three sizes per level (the 2^(k/3) steps of the RetinaNet paper) from 12 px at P2; three aspect
    # ratios as in the reference.
    sizes = tuple(tuple(round(b * 2 ** (k / 3)) for k in range(3)) for b in (12, 24, 48))
    anchors = AnchorGenerator(sizes, ((0.5, 1.0, 2.0),) * len(sizes))
    # GroupNorm in the heads (torchvision's RetinaNet v2 head): training from scratch is stable with it.
    head = RetinaNetHead(
        backbone.out_channels,
        anchors.num_anchors_per_location()[0],
        num_classes + 1,  # torchvision indexes the classification head by label; 0 is unused
        norm_layer=partial(nn.GroupNorm, 16),
    )
    head.classification_head.conv = head.classification_head.conv[:MINI_HEAD_CONVS]
    head.regression_head.conv = head.regression_head.conv[:MINI_HEAD_CONVS]
    return RetinaNet(
        backbone,
        num_classes=num_classes + 1,
        head=head,
        min_size=MINI_IMAGE_SIZE,
        max_size=MINI_IMAGE_SIZE,
        image_mean=list(MINI_MEAN),
        image_std=list(MINI_STD),
        anchor_generator=anchors,
        detections_per_img=50,
        topk_candidates=200,
    )


def mini_maskrcnn(num_classes: int) -> MaskRCNN:
    """Mask R-CNN on a small ResNet-FPN (P2-P5) for the 96x96 mini scenes; ``num_classes`` excludes background."""
    backbone = MiniBackbone(groups=1, width_per_group=64, fpn_stages=(1, 2, 3, 4))
    c = backbone.out_channels
    names = ["p2", "p3", "p4", "p5"]
    anchors = AnchorGenerator(((10, 14), (20, 28), (40, 56), (80, 112)), ((0.5, 1.0, 2.0),) * 4)
    return MaskRCNN(
        backbone,
        num_classes=None,  # the predictors below carry the class count (with background)
        min_size=MINI_IMAGE_SIZE,
        max_size=MINI_IMAGE_SIZE,
        image_mean=list(MINI_MEAN),
        image_std=list(MINI_STD),
        rpn_anchor_generator=anchors,
        # At most four objects per scene: far fewer proposals and sampled regions than COCO's defaults.
        rpn_pre_nms_top_n_train=300,
        rpn_post_nms_top_n_train=100,
        rpn_pre_nms_top_n_test=300,
        rpn_post_nms_top_n_test=50,
        rpn_batch_size_per_image=64,
        box_batch_size_per_image=48,
        box_detections_per_img=10,
        # One sample per bin: torchvision's CPU roi_align backward dominated the step with two; and that
        # one sample computed with grid_sample, whose backward is multi-threaded (roi_align.py).
        box_roi_pool=GridMultiScaleRoIAlign(names, output_size=7),
        box_head=TwoMLPHead(c * 7 * 7, 256),
        box_predictor=FastRCNNPredictor(256, num_classes + 1),
        mask_roi_pool=GridMultiScaleRoIAlign(names, output_size=14),
        # Four mask convolutions as in the reference, at half the FPN's width: +27 % images/s (README.md).
        mask_head=MaskRCNNHeads(c, (c // 2,) * 4, 1),
        mask_predictor=MaskRCNNPredictor(c // 2, c // 2, num_classes + 1),
    )


def reference_retinanet(image_size: int = 800) -> RetinaNet:
    """MLPerf v2.0 ssd: RetinaNet, ResNeXt50-32x4d FPN P3-P7, 264 classes, 800x800, frozen BN, 3 trainable stages.

    As in the reference (mlcommons/training ``single_stage_detector/ssd/model/retinanet.py`` and
    ``transform.py``): the classification head has one column per category and no background column
    (the focal loss's background is all zeros), so labels are 0..263 (``num_classes=264``); every image is
    resized to exactly ``image_size`` x ``image_size`` with bilinear interpolation, without keeping its
    aspect ratio (torchvision's ``fixed_size``; the boxes are scaled per axis, detections mapped back to
    the original image).
    """
    backbone = resnet_fpn_backbone(
        backbone_name="resnext50_32x4d",
        weights=None,  # ImageNet weights come from a user-supplied checkpoint (load_backbone_checkpoint)
        trainable_layers=3,
        returned_layers=[2, 3, 4],
        extra_blocks=LastLevelP6P7(256, 256),
    )
    return RetinaNet(
        backbone,
        num_classes=OPENIMAGES_MLPERF_CLASSES,
        min_size=image_size,  # not used: fixed_size decides the size
        max_size=image_size,
        image_mean=list(IMAGENET_MEAN),
        image_std=list(IMAGENET_STD),
        fixed_size=(image_size, image_size),  # (width, height)
    )


def load_backbone_checkpoint(model: nn.Module, path) -> None:
    """Load ImageNet-pretrained backbone weights (a torchvision ResNet/ResNeXt state dict) into ``model``."""
    from pathlib import Path

    from trainperf.checkpoint import load_tensors
    from trainperf.errors import DataError

    if not Path(path).is_file():
        raise DataError(
            f"backbone checkpoint {path} not found: the reference scale starts from ImageNet-pretrained "
            "backbone weights (a torchvision state dict); put the file there or pass --set backbone_checkpoint=PATH"
        )
    state = load_tensors(path, what="backbone checkpoint")  # tensors only: a pickle that needs more is refused
    body = model.backbone.body
    wanted = body.state_dict()
    state = {k: v for k, v in state.items() if k in wanted}
    missing = [k for k in wanted if k not in state and not k.endswith("num_batches_tracked")]
    if missing:
        raise DataError(
            f"backbone checkpoint {path} lacks {len(missing)} of the backbone's tensors (e.g. {missing[0]}); "
            "it must be the torchvision ResNet/ResNeXt of the reference backbone"
        )
    body.load_state_dict(state, strict=False)


def ssd_tensor_names(model: nn.Module) -> list[str]:
    """The reference RetinaNet's parameter names as MLPerf's closed_ssd.yaml lists them (89 tensors).

    MLPerf's names are those of the reference's DDP-wrapped model with the older torchvision head layout
    (``head.classification_head.conv.0/2/4/6``, ``backbone.fpn.inner_blocks.0``); torchvision now nests
    each head and FPN conv one level deeper (``conv.0.0``, ``inner_blocks.0.0``), which maps back.
    """
    names = []
    for name, _ in model.named_parameters():
        parts = name.split(".")
        if parts[0] == "head" and parts[2] == "conv":
            parts = parts[:3] + [str(2 * int(parts[3]))] + parts[5:]
        elif parts[:2] == ["backbone", "fpn"] and parts[2] in ("inner_blocks", "layer_blocks"):
            parts = parts[:4] + parts[5:]  # backbone.fpn.inner_blocks.0.0.weight -> backbone.fpn.inner_blocks.0.weight
        names.append("module." + ".".join(parts))
    return names


_MASKRCNN_NAMES = {
    "rpn.head.conv": "RPNHead_conv",
    "rpn.head.cls_logits": "RPNHead_cls",
    "rpn.head.bbox_pred": "RPNHead_bbox",
    "roi_heads.box_head.fc6": "ROI_BOX_FEATURE_EXTRACTOR_fc6",
    "roi_heads.box_head.fc7": "ROI_BOX_FEATURE_EXTRACTOR_fc7",
    "roi_heads.box_predictor.cls_score": "ROI_BOX_PREDICTOR_cls",
    "roi_heads.box_predictor.bbox_pred": "ROI_BOX_PREDICTOR_bbox",
    "roi_heads.mask_predictor.conv5_mask": "ROI_MASK_PREDICTOR_fcn5",
    "roi_heads.mask_predictor.mask_fcn_logits": "ROI_MASK_PREDICTOR_fcn_logits",
}


def maskrcnn_tensor_names(model: nn.Module) -> list[str]:
    """The modules MLPerf's closed_maskrcnn.yaml lists as initialized (21 names: FPN and heads, not the
    pretrained backbone), mapped from torchvision's parameter names, each once."""
    names: list[str] = []
    for name, _ in model.named_parameters():
        if name.startswith("backbone.body."):
            continue
        parts = name.split(".")
        if name.startswith("backbone.fpn."):  # backbone.fpn.inner_blocks.0.0.weight -> FPN_inner_block1
            kind = parts[2].removesuffix("s")
            label = f"FPN_{kind}{int(parts[3]) + 1}"
        elif name.startswith("roi_heads.mask_head."):  # roi_heads.mask_head.0.0.weight -> ..._fcn1
            label = f"ROI_MASK_FEATURE_EXTRACTOR_fcn{int(parts[2]) + 1}"
        else:
            module = ".".join(parts[:3])
            if module not in _MASKRCNN_NAMES:
                raise KeyError(f"no MLPerf name for maskrcnn parameter {name}")
            label = _MASKRCNN_NAMES[module]
        if label not in names:
            names.append(label)
    return names
