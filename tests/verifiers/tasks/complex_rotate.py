"""Rotate complex numbers by 45 degrees and scale: (a + ib)(1 + i)."""

import torch
import torch.nn as nn

N = 4096


class Model(nn.Module):
    def forward(self, a, b):
        return torch.complex(a, b) * (1 + 1j)


def get_inputs():
    return [torch.randn(N), torch.randn(N)]


def get_init_inputs():
    return []
