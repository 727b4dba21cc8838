"""Compile task: a debugging print left in forward.

Symptom (torch 2.13 CPU): the print breaks the graph ("Failed to trace builtin operator
`print`"), so `fullgraph=True` fails and the model runs as two graphs.
"""

import torch
import torch.nn as nn

D = 64


class Model(nn.Module):
    def __init__(self, d: int = D) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(self.norm(x))
        print("hidden", tuple(h.shape))
        return x + self.fc2(torch.nn.functional.gelu(h))


def get_inputs():
    return [torch.randn(16, D)]


def get_init_inputs():
    return []
