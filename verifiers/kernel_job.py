"""The kernel kind's entry for the verifier process: a run's submission -> verdict fields.

The task comes from the run's job (as the trusted CLI recorded it), never from the agent's
workspace; the candidate from the submission's read-only snapshot.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable

from assay.verifiers.criteria import load_criteria


def verify_submission(*, spec: dict[str, Any], submission: Any, criteria: str,
                      progress: Callable[..., None] | None = None) -> dict[str, Any]:
    task = Path(spec["task_path"])
    crit = load_criteria(criteria)
    task_hash = hashlib.sha256(task.read_bytes()).hexdigest() if task.is_file() else None
    if submission is None:
        return {
            "passed": False,
            "reasons": ["no candidate: the agent submitted nothing (see the run's last step for why)"],
            "checks": [{"name": "submission", "passed": False, "detail": "no submission"}],
            "metrics": {},
            "criteria_hash": crit.sha256,
            "task_hash": task_hash,
        }
    from assay.verifiers.kernel import verify_kernel

    candidate = Path(submission.snapshot) / submission.entry
    report = verify_kernel(task, candidate, crit, backend=_backend(spec), progress=progress)
    out = report.to_json()
    return {
        "passed": out["passed"],
        "reasons": out["reasons"],
        "checks": out["checks"],
        "metrics": out["metrics"],
        "criteria_hash": out["criteria_sha256"],
        "task_hash": out["task_sha256"],
        "candidate_hash": out["candidate_sha256"],
    }


def warm(*, spec: dict[str, Any], criteria: str) -> None:
    """Build what a verification of this run's task will need (kernel.warm_task)."""
    from assay.verifiers.kernel import warm_task

    task = Path(spec["task_path"])
    if task.is_file():
        warm_task(task, load_criteria(criteria), backend=_backend(spec))


def _backend(spec: dict[str, Any]) -> str:
    """The sandbox backend the run's job names (as the trusted CLI recorded it)."""
    return str((spec.get("job") or {}).get("sandbox", {}).get("backend", "auto"))
