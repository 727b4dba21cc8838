"""A random-init MLP classifier head: the smallest quant task (logits), for tests and the
recipe format. The verifier builds it with a held-out seed, so no one tuned to its weights."""

import torch
import torch.nn as nn

OUTPUT = "logits"
HIDDEN = 512
CLASSES = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(128, HIDDEN)
        self.blocks = nn.Sequential(
            *[nn.Sequential(nn.Linear(HIDDEN, 4 * HIDDEN), nn.GELU(), nn.Linear(4 * HIDDEN, HIDDEN)) for _ in range(2)]
        )
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        h = self.embed(x)
        for block in self.blocks:
            h = h + block(h)
        return self.head(h)


def get_model():
    return Model().eval()


def get_inputs():
    return (torch.randn(64, 128),)


def get_probes():
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(32, 128, generator=g),) for _ in range(4)]
