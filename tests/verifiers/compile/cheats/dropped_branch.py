import torch
import torch.nn as nn

D = 64


class ModelNew(nn.Module):
    """Breaks nothing because the branch is gone: always relu, whatever the input."""

    def __init__(self, d: int = D) -> None:
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.out = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.proj(x)))
