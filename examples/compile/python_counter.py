"""Compile task: Python state that changes on every call.

Symptom (torch 2.13 CPU): `self.calls` is an int attribute that forward bumps and uses, so
every call fails the guard on its value and recompiles, until the recompile limit is hit.
"""

import torch
import torch.nn as nn

D = 64


class Model(nn.Module):
    def __init__(self, d: int = D) -> None:
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        phase = self.calls % 4
        return torch.tanh(self.fc(x)) * (1.0 + 0.1 * phase)


def get_inputs():
    return [torch.randn(32, D)]


def get_init_inputs():
    return []


def get_input_sequence():
    return [[torch.randn(32, D)] for _ in range(5)]
