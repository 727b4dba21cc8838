"""SiLU (swish): x * sigmoid(x)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 2048
DIM = 2048


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.silu(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
