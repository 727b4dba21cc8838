"""GELU (exact, erf form) over a 2-D activation."""

import torch
import torch.nn as nn

BATCH = 2048
DIM = 2048


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.GELU()

    def forward(self, x):
        return self.act(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
