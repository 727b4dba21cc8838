"""The compile kind's criteria: the tables a `compile-*` profile holds (verifiers/criteria/)."""

from __future__ import annotations

from pydantic import Field

from assay.verifiers.criteria import CriteriaBase, FlushedTiming, JudgeLimits, StrictModel, load_profile


class HeldOut(StrictModel):
    # Weight seeds the submission is judged under (each with its own inputs); the task's input
    # sequence runs under the first.
    seeds: int = Field(ge=1, le=16)


class Graph(StrictModel):
    max_breaks: int = Field(ge=0)
    fullgraph: bool
    # Over the task's input sequence after the first call: one is the automatic-dynamic recompile.
    max_recompiles: int = Field(ge=0)
    # aten ops traced into compiled graphs over the aten ops Model runs eagerly.
    min_coverage: float = Field(ge=0, le=1)
    # Calls dynamo did not trace into (allow_in_graph of user code) and custom ops.
    max_opaque: int = Field(ge=0)


class Parity(StrictModel):
    atol: float = Field(ge=0)
    rtol: float = Field(ge=0)
    # Over tolerance but no further than this many times eager's own error from an fp64 run of
    # Model: the model is ill-conditioned, not the compile wrong.
    fp64_factor: float = Field(ge=1)


class Speed(FlushedTiming):
    # compiled ModelNew over Model eager (or over compiled Model, where that is slower than
    # eager); 0 leaves speed unjudged (reported only); rounds 0: not timed at all
    min_vs_eager: float = Field(ge=0)


class Criteria(CriteriaBase):
    heldout: HeldOut
    graph: Graph
    parity: Parity
    speed: Speed
    limits: JudgeLimits


def load_criteria(name: str = "compile-default") -> Criteria:
    return load_profile(name, Criteria, kind="compile")
