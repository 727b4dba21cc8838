"""Scale, clamp, then multiply by a per-channel learned multiplier (NCHW)."""

import torch
import torch.nn as nn

BATCH = 16
CHANNELS = 64
HEIGHT = 64
WIDTH = 64
SCALE = 1.5
CLAMP_MIN = -1.0
CLAMP_MAX = 1.0


class Model(nn.Module):
    def __init__(self, channels, scale, clamp_min, clamp_max):
        super().__init__()
        self.scale = scale
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max
        self.multiplier = nn.Parameter(torch.randn(channels, 1, 1))

    def forward(self, x):
        x = x * self.scale
        x = torch.clamp(x, self.clamp_min, self.clamp_max)
        return x * self.multiplier


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS, SCALE, CLAMP_MIN, CLAMP_MAX]
