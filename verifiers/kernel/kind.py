"""The kernel kind for the verifier process: a request -> the kernel verifier -> an Outcome.

The task comes from the run's spec (as the trusted CLI recorded it), never from the agent's
workspace; the candidate from the submission's read-only snapshot.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict

from assay.verifiers.criteria import CriteriaBase
from assay.verifiers.kernel.criteria import Criteria
from assay.verifiers.kinds import Progress, VerifyRequest
from assay.verifiers.outcome import (
    Bar,
    Check,
    Figures,
    Headline,
    Outcome,
    no_submission,
)


class KernelVerifyOptions(BaseModel):
    """The kernel job's [kernel] table as the verifier reads it (the backend decides nothing
    here: a cpp and a triton candidate are judged alike)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    backend: Literal["cpp", "triton"] = "cpp"


class KernelVerifier:
    name = "kernel"
    entry = "candidate.py"
    criteria_model = Criteria
    options_model = KernelVerifyOptions
    criteria_dir = None

    def verify(self, request: VerifyRequest, criteria: CriteriaBase, progress: Progress | None) -> Outcome:
        assert isinstance(criteria, Criteria)
        task = request.task_path
        task_hash = hashlib.sha256(task.read_bytes()).hexdigest() if task.is_file() else None
        if request.entry is None:
            return no_submission(criteria.sha256, task_hash)
        from assay.verifiers.kernel.verify import verify_kernel

        report = verify_kernel(task, request.entry, criteria, backend=request.sandbox_backend, progress=progress)
        return outcome_of(report.to_json())

    def warm(self, request: VerifyRequest, criteria: CriteriaBase) -> None:
        """Build what a verification of this task will need (reference.warm_task)."""
        assert isinstance(criteria, Criteria)
        from assay.verifiers.kernel.reference import warm_task

        if request.task_path.is_file():
            warm_task(request.task_path, criteria, backend=request.sandbox_backend)


# The chart's title and the order of its bars: the speedups the timing stage measures.
CHART = "speedup (candidate vs baseline; | marks 1.0x)"


def outcome_of(report: dict) -> Outcome:
    """A KernelReport's JSON as the Outcome every kind returns."""
    metrics = dict(report["metrics"])
    word = "pass" if report["passed"] else "inconclusive" if report["inconclusive"] else "fail"
    speed = metrics.get("speedup_vs_eager")
    bars = [
        Bar(label=k.removeprefix("speedup_vs_"), value=float(v), metric=k)
        for k, v in metrics.items()
        if k.startswith("speedup_vs_") and isinstance(v, (int, float)) and not isinstance(v, bool)
    ]
    return Outcome(
        outcome=word,
        reasons=list(report["reasons"]),
        checks=[Check.model_validate(c) for c in report["checks"]],
        metrics=metrics,
        headline=Headline(name="speedup vs eager", value=float(speed), unit="x")
        if isinstance(speed, (int, float))
        else None,
        figures=Figures(title=CHART, bars=bars) if bars else None,
        criteria_hash=report["criteria_sha256"],
        task_hash=report["task_sha256"],
        candidate_hash=report["candidate_sha256"],
    )


KIND = KernelVerifier()
