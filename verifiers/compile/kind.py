"""The compile kind for the verifier process: a request -> the compile verifier -> an Outcome.

The task comes from the run's spec (trusted); fixed.py from the submission's read-only
snapshot, imported only inside the verification's sandbox, after the verifier has measured
the task's Model and captured dynamo's state.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from assay.verifiers.compile.criteria import Criteria
from assay.verifiers.criteria import CriteriaBase
from assay.verifiers.kinds import Progress, VerifyRequest
from assay.verifiers.outcome import Outcome, no_submission

MODES = Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]


class CompileVerifyOptions(BaseModel):
    """The compile job's [compile] table as the verifier reads it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    backend: Literal["inductor", "aot_eager", "eager"] = Field(
        default="inductor", description="the torch.compile backend the fix is judged with"
    )
    mode: MODES | None = Field(default=None, description="inductor's mode (only with backend inductor)")


class CompileVerifier:
    name = "compile"
    entry = "fixed.py"
    criteria_model = Criteria
    options_model = CompileVerifyOptions
    criteria_dir = None

    def verify(self, request: VerifyRequest, criteria: CriteriaBase, progress: Progress | None) -> Outcome:
        assert isinstance(criteria, Criteria)
        from assay.errors import UserError
        from assay.verifiers.compile.verify import verify_compile

        options = CompileVerifyOptions.model_validate(request.options)
        if options.mode is not None and options.backend != "inductor":
            raise UserError(
                f"compile mode {options.mode!r} needs backend 'inductor', not {options.backend!r}",
                "drop mode, or set backend = 'inductor'",
            )
        if request.entry is None:
            task = request.task_path
            return no_submission(
                criteria.sha256, hashlib.sha256(task.read_bytes()).hexdigest() if task.is_file() else None
            )
        return verify_compile(request.task_path, request.entry, criteria, options, request.sandbox_backend, progress)

    def warm(self, request: VerifyRequest, criteria: CriteriaBase) -> None:
        """Nothing to build ahead: every compile happens in the verification's own sandbox."""


KIND = CompileVerifier()
