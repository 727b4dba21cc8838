"""Compile task (a control): a model whose compiled output only looks divergent.

It sums values near +-1e7 that cancel: any change of summation order (Inductor's reductions)
moves the result by more than fp32's tolerance, but eager is just as far from an fp64 run. The
verifier should say "not reproduced", not send an agent after a compiler bug.
"""

import torch
import torch.nn as nn

N = 4096


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        big = torch.cat([x * 1e7, -x * 1e7 + 1e-3 * torch.sin(x)], dim=1)
        return big.sum(dim=1)


def get_inputs():
    return [torch.randn(8, N)]


def get_init_inputs():
    return []
