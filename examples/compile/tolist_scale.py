"""Compile task: a scale computed on the host with `.tolist()`.

Symptom (torch 2.13 CPU): `.tolist()` breaks the graph, and the Python max over the list
runs outside any graph.
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
        peaks = h.abs().amax(dim=1).tolist()
        scale = max(peaks) + 1e-6
        return torch.sigmoid(h / scale)


def get_inputs():
    return [torch.randn(32, D)]


def get_init_inputs():
    return []
