"""A quant task whose first layer takes 576 features (SmolLM2's hidden size): torchao's CPU int4
with group 128 leaves it fp32 with only a log line, and a recipe must not get credit for it."""

import torch
import torch.nn as nn

OUTPUT = "logits"


def get_model():
    return nn.Sequential(nn.Linear(576, 256), nn.GELU(), nn.Linear(256, 32)).eval()


def get_inputs():
    return (torch.randn(8, 576),)


def get_probes():
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(8, 576, generator=g),)]
