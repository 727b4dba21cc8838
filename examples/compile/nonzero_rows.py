"""Compile task: rows picked by torch.nonzero.

Symptom (torch 2.13 CPU): nonzero's output size depends on the data, so dynamo breaks the graph
there; the rows it picks are then gathered and scattered back.
"""

import torch
import torch.nn as nn

D = 64


class Model(nn.Module):
    def __init__(self, d: int = D) -> None:
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keep = torch.nonzero(x[:, 0] > 0).squeeze(1)
        out = torch.zeros_like(x)
        out[keep] = self.fc(x[keep])
        return out


def get_inputs():
    return [torch.randn(32, D)]


def get_init_inputs():
    return []
