"""Compile task (a control): a step computed in numpy.

Older torch broke the graph at `.numpy()`; on torch 2.13 CPU dynamo traces the numpy calls
(torch._numpy), so Model compiles whole, without recompiles, and matches eager. The verifier
should say "not reproduced on this torch".
"""

import numpy as np
import torch
import torch.nn as nn

D = 64


class Model(nn.Module):
    def __init__(self, d: int = D) -> None:
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        clipped = np.clip(h.detach().numpy(), -1.0, 1.0)
        return torch.from_numpy(clipped) * 2.0


def get_inputs():
    return [torch.randn(32, D)]


def get_init_inputs():
    return []
