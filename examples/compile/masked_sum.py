"""Compile task: a sum over the entries a mask selects.

Symptom (torch 2.13 CPU): boolean indexing has a data-dependent output shape, so dynamo breaks
the graph there (capture_dynamic_output_shape_ops is off).
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
        positive = h[h > 0].sum()
        return h / (positive + 1.0)


def get_inputs():
    return [torch.randn(32, D)]


def get_init_inputs():
    return []
