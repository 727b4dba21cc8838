"""Scale, clamp, add a per-channel bias (NCHW)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int, scale: float = 2.0):
        super(Model, self).__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.clamp(x * self.scale, min=-1.0, max=1.0)
        return x + self.bias


batch_size = 32
channels = 16
height = 32
width = 32


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
