import torch
import torch.nn as nn

D = 64


class ModelNew(nn.Module):
    def __init__(self, d: int = D) -> None:
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x: torch.Tensor, steps: int) -> torch.Tensor:
        h = self.fc(x)
        # h <- 0.5 h + x, `steps` times, in closed form: no loop to unroll per value of steps
        decay = 0.5**steps
        return decay * h + x * (2.0 * (1.0 - decay))
