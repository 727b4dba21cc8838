"""The quant kind for the verifier process: a request -> the quant verifier -> an Outcome.

The task comes from the run's spec (trusted), the recipe from the submission's read-only
snapshot; the verifier applies the recipe itself, so no submitted code runs anywhere.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from assay.verifiers.criteria import CriteriaBase
from assay.verifiers.kinds import Progress, VerifyRequest
from assay.verifiers.outcome import Outcome, no_submission
from assay.verifiers.quant.criteria import Criteria


class QuantVerifyOptions(BaseModel):
    """The quant job's [quant] table as the verifier reads it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    objective: Literal["latency", "size", "memory"] = Field(
        default="size", description="what the recipe must gain: serialized bytes (size) or speed (latency)"
    )
    max_size_ratio: float | None = Field(default=None, gt=0, le=1, description="budget: quantized bytes over fp32's")
    min_speedup: float | None = Field(default=None, gt=0, description="budget: speed over the fp32 model's")


class QuantVerifier:
    name = "quant"
    entry = "recipe.toml"
    criteria_model = Criteria
    options_model = QuantVerifyOptions
    criteria_dir = None

    def verify(self, request: VerifyRequest, criteria: CriteriaBase, progress: Progress | None) -> Outcome:
        assert isinstance(criteria, Criteria)
        import hashlib

        from assay.verifiers.quant.verify import verify_quant

        options = QuantVerifyOptions.model_validate(request.options)
        if request.entry is None:
            task = request.task_path
            return no_submission(
                criteria.sha256, hashlib.sha256(task.read_bytes()).hexdigest() if task.is_file() else None
            )
        return verify_quant(request.task_path, request.entry, criteria, options, request.sandbox_backend, progress)

    def warm(self, request: VerifyRequest, criteria: CriteriaBase) -> None:
        """Nothing to build ahead: the model is made fresh in the verification's own sandbox."""


KIND = QuantVerifier()
