"""Cheat: defines its model under another name, so there is no ModelNew to run.
"""

import torch
import torch.nn as nn


class FasterModel(nn.Module):
    def forward(self, x):
        return torch.empty_like(x)
