"""Softplus with PyTorch's default beta and threshold."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 2048
DIM = 2048


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.softplus(x)


def get_inputs():
    return [torch.randn(BATCH, DIM) * 4]


def get_init_inputs():
    return []
