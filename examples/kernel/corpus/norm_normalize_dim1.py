"""F.normalize over the channels of a 3-d tensor."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.normalize(x, p=2.0, dim=1)


batch_size = 16
channels = 128
length = 256


def get_inputs():
    return [torch.randn(batch_size, channels, length)]


def get_init_inputs():
    return []
