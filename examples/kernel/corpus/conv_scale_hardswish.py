"""A strided Conv2d, scaled by a learned per-channel factor, then HardSwish."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, scale_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride)
        self.scale = nn.Parameter(torch.randn(scale_shape))

    def forward(self, x):
        x = self.conv(x)
        x = x * self.scale
        return torch.nn.functional.hardswish(x)


batch_size = 16
in_channels = 8
out_channels = 32
height, width = 64, 64
kernel_size = 3
stride = 2
scale_shape = (out_channels, 1, 1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, scale_shape]
