"""LayerNorm over the last dimension, with affine weight and bias."""

import torch
import torch.nn as nn

ROWS = 4096
HIDDEN = 1024


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(ROWS, HIDDEN) * 2 + 0.5]


def get_init_inputs():
    return [HIDDEN]
