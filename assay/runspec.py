"""The run spec: what the runner hands the verifier process about a run, stored as the run's
`spec` in the ledger. One model, imported by both sides (agents write it, verifiers read it),
so neither reads the other's fields by guesswork.

Every path in it was written by the trusted CLI from the job file, never by the agent: the
verifier reads the task from `task_path`, not from the workspace's copy.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from assay.errors import UserError
from assay.typed import as_dict


class RunSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    # The job as it was validated (JSON), so a resumed run rebuilds the same Job.
    job: dict[str, Any]
    job_file: str | None = None
    task_path: str
    criteria: str
    manifest: str
    workspace: str
    sandbox_backend: Literal["auto", "docker", "bwrap"] = "auto"
    # The kind's [<kind>] table as its options model validated it.
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _stored_before_kinds(cls, data: Any) -> Any:
        # Runs recorded before the spec was a model kept kind, manifest, sandbox and options
        # inside the job only: read them from there, so such a run still resumes and verifies.
        spec = as_dict(data)
        job = as_dict(spec.get("job")) if spec is not None and "kind" not in spec else None
        if spec is None or job is None:
            return data
        return {
            **spec,
            "kind": job.get("kind"),
            "manifest": job.get("manifest"),
            "sandbox_backend": (as_dict(job.get("sandbox")) or {}).get("backend", "auto"),
            "options": job.get("options") or {},
        }

    @classmethod
    def of(cls, stored: Any, run_id: str = "") -> RunSpec:
        """The spec a ledger row holds; a row without a usable one is a UserError naming the run."""
        try:
            return cls.model_validate(stored)
        except ValueError as exc:
            where = f"run {run_id}" if run_id else "the run"
            raise UserError(
                f"{where} has no usable run spec ({str(exc).splitlines()[0]})",
                "start the job again with `assay run JOB.toml`",
            ) from None
