"""A quant task whose model fails in eager: bad input, not a failed recipe."""

import torch
import torch.nn as nn

OUTPUT = "logits"


def get_model():
    return nn.Linear(16, 8).eval()


def get_inputs():
    return (torch.randn(4, 32),)


def get_probes():
    return [(torch.randn(4, 32),)]
