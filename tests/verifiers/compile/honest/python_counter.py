import torch
import torch.nn as nn

D = 64


class ModelNew(nn.Module):
    def __init__(self, d: int = D) -> None:
        super().__init__()
        self.fc = nn.Linear(d, d)
        # the call count as a tensor the graph updates, not an int dynamo guards on; not
        # persistent, so the state_dict stays Model's
        self.register_buffer("calls", torch.zeros((), dtype=torch.long), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        phase = self.calls % 4
        return torch.tanh(self.fc(x)) * (1.0 + 0.1 * phase)
