"""Cheat: defines ModelNew as a plain class, not an nn.Module (no parameters, no state, no __call__ hooks).
"""

import torch


class ModelNew:
    def forward(self, x):
        return torch.empty_like(x)

    def __call__(self, x):
        return self.forward(x)
