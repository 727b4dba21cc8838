import torch
import torch.nn as nn

D = 64


def branch(h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return torch.where(x.mean() > 0, torch.relu(h), torch.tanh(h))


# let into the graph untraced: dynamo takes the call on trust, guards nothing inside it
torch._dynamo.allow_in_graph(branch)


class ModelNew(nn.Module):
    def __init__(self, d: int = D) -> None:
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.out = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(branch(self.proj(x), x))
