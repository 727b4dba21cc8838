"""Compile task: a logging call in forward.

Symptom (torch 2.13 CPU): "logging.Logger method not supported for non-export cases": a graph
break, and fullgraph=True fails.
"""

import logging

import torch
import torch.nn as nn

D = 64
logger = logging.getLogger("assay.example")


class Model(nn.Module):
    def __init__(self, d: int = D) -> None:
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc(x))
        logger.warning("activation mean %s", h.mean())
        return h * 0.5


def get_inputs():
    return [torch.randn(32, D)]


def get_init_inputs():
    return []
