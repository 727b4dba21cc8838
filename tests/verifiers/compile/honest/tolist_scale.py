import torch
import torch.nn as nn

D = 64


class ModelNew(nn.Module):
    def __init__(self, d: int = D) -> None:
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        # the max of the rows' peaks is the tensor's peak: no host round trip
        scale = h.abs().amax() + 1e-6
        return torch.sigmoid(h / scale)
