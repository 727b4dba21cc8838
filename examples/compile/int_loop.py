"""Compile task: a loop whose trip count is a Python int argument.

Symptom (torch 2.13 CPU): dynamo unrolls `range(steps)` and guards on `steps`, so each new value
in the input sequence recompiles (a recompile storm from Python ints).
"""

import torch
import torch.nn as nn

D = 64


class Model(nn.Module):
    def __init__(self, d: int = D) -> None:
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x: torch.Tensor, steps: int) -> torch.Tensor:
        h = self.fc(x)
        for _ in range(steps):
            h = 0.5 * h + x
        return h


def get_inputs():
    return [torch.randn(16, D), 3]


def get_init_inputs():
    return []


def get_input_sequence():
    return [[torch.randn(16, D), s] for s in (4, 5, 6, 7, 8)]
