"""Compile task: Python branches on the batch size.

Symptom (torch 2.13 CPU): the `x.shape[0] % 2` test guards on the batch size's parity, so once
sizes go dynamic every new parity recompiles; the input sequence varies the batch.
"""

import torch
import torch.nn as nn

D = 32


class Model(nn.Module):
    def __init__(self, d: int = D) -> None:
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        if x.shape[0] % 2 == 0:
            pairs = h.reshape(-1, 2, h.shape[1]).mean(dim=1)
            return pairs.repeat_interleave(2, dim=0)
        return h


def get_inputs():
    return [torch.randn(8, D)]


def get_init_inputs():
    return []


def get_input_sequence():
    return [[torch.randn(b, D)] for b in (9, 10, 11, 12, 13, 14)]
