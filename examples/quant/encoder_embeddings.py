"""A random-init 2-layer transformer encoder with mean pooling (embeddings): a sentence
embedder's shape without its weights, so a test needs no download. Inputs are token ids."""

import torch
import torch.nn as nn

OUTPUT = "embeddings"
VOCAB = 1000
DIM = 256
SEQ = 32


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Parameter(torch.randn(SEQ, DIM) * 0.02)
        layer = nn.TransformerEncoderLayer(DIM, 4, 4 * DIM, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, ids):
        h = self.encoder(self.tok(ids) + self.pos[: ids.shape[1]])
        return self.proj(h.mean(1))


def get_model():
    return Model().eval()


def get_inputs():
    return (torch.randint(0, VOCAB, (16, SEQ)),)


def get_probes():
    g = torch.Generator().manual_seed(0)
    return [(torch.randint(0, VOCAB, (8, SEQ), generator=g),) for _ in range(4)]
