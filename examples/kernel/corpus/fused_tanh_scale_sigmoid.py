"""tanh, scale, sigmoid."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scaling_factor: float = 2.0):
        super(Model, self).__init__()
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(torch.tanh(x) * self.scaling_factor)


batch_size = 32
channels = 16
height = 32
width = 32


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
