"""SwiGLU gate: silu(gate) * up, two inputs of the same shape."""

import torch
import torch.nn as nn
import torch.nn.functional as F

TOKENS = 2048
HIDDEN = 2048


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, gate, up):
        return F.silu(gate) * up


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN), torch.randn(TOKENS, HIDDEN)]


def get_init_inputs():
    return []
