"""Mish: x * tanh(softplus(x)), written out as a chain of three ops."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 2048
DIM = 2048


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * torch.tanh(F.softplus(x))


def get_inputs():
    return [torch.randn(BATCH, DIM) * 3]


def get_init_inputs():
    return []
