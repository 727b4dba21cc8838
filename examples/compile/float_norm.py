"""Compile task: a norm read back to a Python float.

Symptom (torch 2.13 CPU): `float(tensor)` reads the value to the host: a graph break, and the
resumed frame guards on the float, so new inputs recompile.
"""

import torch
import torch.nn as nn

D = 64


class Model(nn.Module):
    def __init__(self, d: int = D) -> None:
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        norm = float(h.norm())
        return torch.tanh(h / (norm + 1e-6) * 8.0)


def get_inputs():
    return [torch.randn(32, D)]


def get_init_inputs():
    return []


def get_input_sequence():
    return [[torch.randn(32, D)] for _ in range(4)]
