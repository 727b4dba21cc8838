import torch
import torch.nn as nn

N = 4096


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        big = torch.cat([x * 1e7, -x * 1e7 + 1e-3 * torch.sin(x)], dim=1)
        return big.sum(dim=1)
