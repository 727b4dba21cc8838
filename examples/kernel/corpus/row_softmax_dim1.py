"""Softmax over dim 1 (the channels) of a 3-d tensor."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int = 1):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=self.dim)


batch_size = 16
channels = 256
length = 128


def get_inputs():
    return [torch.randn(batch_size, channels, length)]


def get_init_inputs():
    return []
