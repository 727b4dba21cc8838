"""The quant kind's criteria: the tables a `quant-*` profile holds (verifiers/criteria/)."""

from __future__ import annotations

from pydantic import Field

from assay.verifiers.criteria import CriteriaBase, FlushedTiming, JudgeLimits, StrictModel, load_profile


class HeldOutProbes(StrictModel):
    # Tensor tasks: probes drawn with a held-out seed like the task's own (see the harness).
    count: int = Field(ge=3, le=256)
    # Text tasks: sentences drawn with a held-out seed from the pool shipped beside the criteria.
    texts: int = Field(ge=3, le=256)
    # Generate tasks: prompts drawn with a held-out seed from quant/heldout_prompts.toml, spread
    # over text, JSON and tool-call prompts.
    prompts: int = Field(ge=3, le=64)


class Logits(StrictModel):
    min_top1_agreement: float = Field(ge=0, le=1)
    max_kl_mean: float = Field(ge=0)
    # an argmax flip where fp32's two logits lie within this many of the row's standard
    # deviations is a tie (the reference is not determined there), counted as agreeing
    tie_margin: float = Field(ge=0, le=0.5)


class Embeddings(StrictModel):
    min_cosine_mean: float = Field(ge=-1, le=1)
    min_cosine_min: float = Field(ge=-1, le=1)
    min_nn_agreement: float = Field(ge=0, le=1)


class Generate(StrictModel):
    min_greedy_agreement: float = Field(ge=0, le=1)
    min_top1_agreement: float = Field(ge=0, le=1)
    min_json_kept: float = Field(ge=0, le=1)
    min_tool_agreement: float = Field(ge=0, le=1)
    # fp32's logit for its own token within this many standard deviations of its logits of the
    # quantized model's choice: a tie, so a divergence there says nothing about the recipe
    tie_margin: float = Field(ge=0, le=0.5)
    new_tokens: int = Field(ge=4, le=256)
    structured_new_tokens: int = Field(ge=4, le=256)


class Quality(StrictModel):
    logits: Logits
    embeddings: Embeddings
    generate: Generate


class Objective(StrictModel):
    # A recipe must gain something on the objective it serves: at most (1 - this) of the fp32
    # model's bytes for "size", at least this speedup for "latency".
    min_size_gain: float = Field(gt=0, lt=1)
    min_speedup: float = Field(gt=1)


class Timing(FlushedTiming):
    rounds: int = Field(ge=4)  # latency is the objective's figure: always timed


class Criteria(CriteriaBase):
    heldout: HeldOutProbes
    quality: Quality
    objective: Objective
    timing: Timing
    limits: JudgeLimits


def load_criteria(name: str = "quant-default") -> Criteria:
    return load_profile(name, Criteria, kind="quant")
