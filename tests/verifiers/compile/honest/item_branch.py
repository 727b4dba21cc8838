import torch
import torch.nn as nn

D = 64


class ModelNew(nn.Module):
    def __init__(self, d: int = D) -> None:
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.out = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x)
        # the branch as data: both sides computed, the input's mean picks one per call
        h = torch.where(x.mean() > 0, torch.relu(h), torch.tanh(h))
        return self.out(h)
