"""The quant kind's criteria: the tables a `quant-*` profile holds (verifiers/criteria/)."""

from __future__ import annotations

from pydantic import Field

from assay.verifiers.criteria import CriteriaBase, StrictModel, load_profile


class HeldOutProbes(StrictModel):
    # Tensor tasks: probes drawn with a held-out seed like the task's own (see the harness).
    count: int = Field(ge=3, le=256)
    # Text tasks: sentences drawn with a held-out seed from the pool shipped beside the criteria.
    texts: int = Field(ge=3, le=256)


class Logits(StrictModel):
    min_top1_agreement: float = Field(ge=0, le=1)
    max_kl_mean: float = Field(ge=0)


class Embeddings(StrictModel):
    min_cosine_mean: float = Field(ge=-1, le=1)
    min_cosine_min: float = Field(ge=-1, le=1)
    min_nn_agreement: float = Field(ge=0, le=1)


class Quality(StrictModel):
    logits: Logits
    embeddings: Embeddings


class Objective(StrictModel):
    # A recipe must gain something on the objective it serves: at most (1 - this) of the fp32
    # model's bytes for "size", at least this speedup for "latency".
    min_size_gain: float = Field(gt=0, lt=1)
    min_speedup: float = Field(gt=1)


class Timing(StrictModel):
    rounds: int = Field(ge=4)
    target_round_s: float = Field(gt=0)
    warmup_s: float = Field(ge=0, le=10)
    max_iters: int = Field(ge=2)
    flush_mb: int = Field(ge=1)
    # The trusted subjects' CPU over wall time per thread below this: the machine was too busy,
    # and a speed check that fails says inconclusive.
    min_cpu_share: float = Field(gt=0, le=1)


class Limits(StrictModel):
    timeout_s: float = Field(gt=0)
    memory_mb: int = Field(ge=512)
    pids: int = Field(ge=16)


class Criteria(CriteriaBase):
    heldout: HeldOutProbes
    quality: Quality
    objective: Objective
    timing: Timing
    limits: Limits


def load_criteria(name: str = "quant-default") -> Criteria:
    return load_profile(name, Criteria, kind="quant")
