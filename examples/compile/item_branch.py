"""Compile task: a branch on a value read back to Python.

Symptom (torch 2.13 CPU): `.item()` breaks the graph ("Unsupported Tensor.item() call with
capture_scalar_outputs=False"), and `fullgraph=True` fails. The branch is decided by the input,
so the input sequence takes both sides.
"""

import torch
import torch.nn as nn

D = 64


class Model(nn.Module):
    def __init__(self, d: int = D) -> None:
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.out = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x)
        if x.mean().item() > 0:
            h = torch.relu(h)
        else:
            h = torch.tanh(h)
        return self.out(h)


def get_inputs():
    return [torch.randn(32, D)]


def get_init_inputs():
    return []


def get_input_sequence():
    return [[torch.randn(32, D) + 1.0], [torch.randn(32, D) - 1.0], [torch.randn(32, D) + 0.5]]
