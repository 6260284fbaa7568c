"""The MiniGo policy/value network (architecture only): a residual trunk with a policy and a value head.

Reference (MLPerf v2.0 minigo, ``ml_perf/flags/19/architecture.flags`` of mlcommons/training): 19x19 board,
17 input planes (8 past positions of each colour plus the colour to play), a trunk of 19 residual blocks of
256 filters, policy head conv1x1(2) -> FC(362 = 361 points + pass), value head conv1x1(1) -> FC(256) ->
FC(1) -> tanh. The mini network is the same design at a small width and depth.
"""

from __future__ import annotations

import torch
from torch import nn


class _Residual(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(y)))


class GoNet(nn.Module):
    """(B, planes, N, N) -> (policy logits over N*N points + pass, value in [-1, 1] for the player to move)."""

    def __init__(self, *, size: int, planes: int, width: int, blocks: int, fc_width: int) -> None:
        super().__init__()
        self.size = size
        self.stem = nn.Sequential(nn.Conv2d(planes, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.trunk = nn.Sequential(*[_Residual(width) for _ in range(blocks)])
        self.policy_conv = nn.Sequential(nn.Conv2d(width, 2, 1, bias=False), nn.BatchNorm2d(2), nn.ReLU())
        self.policy_fc = nn.Linear(2 * size * size, size * size + 1)
        self.value_conv = nn.Sequential(nn.Conv2d(width, 1, 1, bias=False), nn.BatchNorm2d(1), nn.ReLU())
        self.value_fc = nn.Sequential(nn.Linear(size * size, fc_width), nn.ReLU(), nn.Linear(fc_width, 1), nn.Tanh())

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.trunk(self.stem(x))
        policy = self.policy_fc(self.policy_conv(h).flatten(1))
        value = self.value_fc(self.value_conv(h).flatten(1)).squeeze(1)
        return policy, value


def mini_gonet(size: int) -> GoNet:
    return GoNet(size=size, planes=3, width=32, blocks=3, fc_width=64)


def reference_gonet() -> GoNet:
    return GoNet(size=19, planes=17, width=256, blocks=19, fc_width=256)
