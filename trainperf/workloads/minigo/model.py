"""The MiniGo policy/value network (architecture only): a residual trunk with a policy and a value head.

Reference (MLPerf v2.0 minigo, ``dual_net.py`` with ``ml_perf/flags/19/architecture.flags`` of
mlcommons/training): 19x19 board, 13 input planes (the ``mlperf07`` features, ``features.py``), a trunk of
``trunk_layers=6`` residual blocks of ``conv_width=64`` filters, policy head conv1x1(2) -> BN without scale
and offset -> FC(362 = 361 points + pass), value head conv1x1(1) -> BN without scale and offset ->
FC(``fc_width=64``) -> FC(1) -> tanh. Batch normalisation: TF momentum 0.95 (torch 0.05), epsilon 1e-5.
The mini network is the same design at a small width and depth, with scaled heads and torch's defaults.
"""

from __future__ import annotations

import torch
from torch import nn


class _Residual(nn.Module):
    def __init__(self, width: int, bn_momentum: float) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width, momentum=bn_momentum)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width, momentum=bn_momentum)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(y)))


class GoNet(nn.Module):
    """(B, planes, N, N) -> (policy logits over N*N points + pass, value in [-1, 1] for the player to move)."""

    def __init__(
        self,
        *,
        size: int,
        planes: int,
        width: int,
        blocks: int,
        fc_width: int,
        head_bn_affine: bool = True,  # the reference's head BNs have neither scale nor offset
        bn_momentum: float = 0.1,  # torch's convention: 1 - TF's momentum
    ) -> None:
        super().__init__()
        self.size = size
        self.planes = planes
        m = bn_momentum
        self.stem = nn.Sequential(
            nn.Conv2d(planes, width, 3, padding=1, bias=False), nn.BatchNorm2d(width, momentum=m), nn.ReLU()
        )
        self.trunk = nn.Sequential(*[_Residual(width, m) for _ in range(blocks)])
        self.policy_conv = nn.Sequential(
            nn.Conv2d(width, 2, 1, bias=False), nn.BatchNorm2d(2, momentum=m, affine=head_bn_affine), nn.ReLU()
        )
        self.policy_fc = nn.Linear(2 * size * size, size * size + 1)
        self.value_conv = nn.Sequential(
            nn.Conv2d(width, 1, 1, bias=False), nn.BatchNorm2d(1, momentum=m, affine=head_bn_affine), nn.ReLU()
        )
        self.value_fc = nn.Sequential(nn.Linear(size * size, fc_width), nn.ReLU(), nn.Linear(fc_width, 1), nn.Tanh())

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.trunk(self.stem(x))
        policy = self.policy_fc(self.policy_conv(h).flatten(1))
        value = self.value_fc(self.value_conv(h).flatten(1)).squeeze(1)
        return policy, value


def mini_gonet(size: int) -> GoNet:
    return GoNet(size=size, planes=3, width=32, blocks=3, fc_width=64)


REFERENCE_SIZE = 19
REFERENCE_PLANES = 13  # features.MLPERF07_PLANES
REFERENCE_BLOCKS = 6  # trunk_layers
REFERENCE_WIDTH = 64  # conv_width
REFERENCE_FC_WIDTH = 64  # fc_width


def reference_gonet() -> GoNet:
    """The v2.0 ``dual_net`` as ``ml_perf/flags/19/architecture.flags`` sets it (736,671 parameters)."""
    return GoNet(
        size=REFERENCE_SIZE,
        planes=REFERENCE_PLANES,
        width=REFERENCE_WIDTH,
        blocks=REFERENCE_BLOCKS,
        fc_width=REFERENCE_FC_WIDTH,
        head_bn_affine=False,
        bn_momentum=0.05,  # tf.layers.batch_normalization(momentum=.95)
    )
