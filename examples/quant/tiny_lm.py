"""A random-init character-level causal LM: the smallest OUTPUT = "generate" task, for tests and
the generate contract (no weights to download). The verifier builds it with a held-out seed and
compares the quantized model's greedy continuations with fp32's.

The generate contract: get_model() returns a module whose forward(input_ids [1, T]) gives
next-token logits [1, T, V] (a tensor, a tuple's first item or `.logits`), or a transformers
model with generate(); get_tokenizer() returns an object with encode(text, add_special_tokens=
False) -> ids, decode(ids) -> text and eos_token_id; get_probes() returns prompts, each a string
or {"prompt", "expect": "text" | "json" | "tool_call", "max_new_tokens"}. An optional
format_prompt(text) turns a user message into a prompt (default: the tokenizer's chat template,
else the text itself); the verifier's held-out prompts go through it too.
"""

import torch
import torch.nn as nn

OUTPUT = "generate"
VOCAB = 97  # printable ASCII (95), newline, end of text
DIM = 256
EOS = VOCAB - 1


class CharTokenizer:
    eos_token_id = EOS

    def encode(self, text, add_special_tokens=False):
        return [ord(c) - 32 if 32 <= ord(c) < 127 else 95 for c in text]

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i + 32) if i < 95 else "\n" for i in ids if i != EOS)


class Model(nn.Module):
    """Embeddings, a causal running mean as the only mixing across positions (so no attention
    code), two residual MLP blocks and a head."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.mix = nn.Linear(2 * DIM, DIM)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM)) for _ in range(2)
        )
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, input_ids):
        e = self.embed(input_ids)
        steps = torch.arange(1, e.shape[1] + 1, dtype=e.dtype).view(1, -1, 1)
        h = self.mix(torch.cat([e, e.cumsum(1) / steps], -1))
        for block in self.blocks:
            h = h + block(h)
        return self.head(h) * 4.0  # sharper than random init's near-uniform logits


def get_model():
    return Model().eval()


def get_tokenizer():
    return CharTokenizer()


def get_inputs():
    return (torch.tensor([CharTokenizer().encode("The quick brown fox jumps over the lazy dog. " * 2)]),)


def get_probes():
    return [
        "Once upon a time",
        "def main():",
        "The weather today is",
        "Dear team, ",
        "SELECT name FROM",
        "In 1905 Einstein",
        {"prompt": 'Reply in JSON: {"name": ', "expect": "json", "max_new_tokens": 24},
        {"prompt": 'Call a tool as {"tool": NAME}: ', "expect": "tool_call", "max_new_tokens": 24},
    ]
