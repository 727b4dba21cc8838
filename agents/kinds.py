"""Job kinds: each is a slice through the layers (agents/<kind>.py, tools/<kind>.py,
verifiers/<kind>.py). The shared path looks kinds up here and knows nothing else of them."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict


class KernelOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    backend: Literal["cpp", "triton"] = "cpp"


@dataclass(frozen=True)
class JobKind:
    name: str
    options_model: type[BaseModel]
    # Module holding the kind's workflow pieces (brain policy, prompts), imported on use.
    agent_module: str
    # Module holding the kind's verifier, run only by the verifier process.
    verifier_module: str
    default_manifest: str
    default_criteria: str


@lru_cache(maxsize=1)
def job_kinds() -> dict[str, JobKind]:
    kinds = [
        JobKind("kernel", KernelOptions, "assay.agents.kernel", "assay.verifiers.kernel", "kernel-agent", "kernel-default"),
    ]
    return {k.name: k for k in kinds}
