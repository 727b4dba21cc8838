"""A convolution, a ReLU and a per-channel bias: KernelBench level 2's most common shape."""

import torch
import torch.nn as nn

BATCH = 4
IN_CHANNELS = 3
OUT_CHANNELS = 16
SIZE = 24
KERNEL = 3


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.conv(x)
        x = torch.relu(x)
        return x + self.bias


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL, (OUT_CHANNELS, 1, 1)]
