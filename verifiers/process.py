"""The verifier process: `python -m assay.verifiers verify --run RUN`.

It runs apart from the agent (its own process, its own key), takes the submission from the
ledger rather than from anything the agent says, runs the kind's checks in fresh sandboxes
against criteria no agent-writable path reaches, signs the verdict and appends it to the
chain. It never imports agents or tools, and never imports agent-written code into itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from assay import __version__
from assay.errors import UserError
from assay.ledger import Ledger, LedgerError
from assay.settings import settings
from assay.verifiers import signing

# kind -> "module:function". Kept here, not taken from the agents' registry: the verifier
# decides for itself which checks a kind gets.
VERIFIERS = {"kernel": "assay.verifiers.kernel_job:verify_submission"}
# kind -> what builds that kind's verification caches ahead of a submission (optional).
WARMERS = {"kernel": "assay.verifiers.kernel_job:warm"}

Progress = Callable[[float, float | None, str | None], None]


def _verifier_for(kind: str, table: dict[str, str] = VERIFIERS):
    target = table.get(kind)
    if target is None:
        raise UserError(f"no verifier for job kind {kind!r}", f"use one of: {', '.join(sorted(VERIFIERS))}")
    module, _, fn = target.partition(":")
    return getattr(importlib.import_module(module), fn)


def _run_of(ledger: Ledger, run_id: str):
    run = ledger.get_run(run_id)
    if run is None:
        raise UserError(f"no run {run_id!r} in the ledger", "check the run id with `assay verdicts`")
    return run


def _criteria_of(spec: dict[str, Any]) -> str:
    return str(spec.get("criteria") or "kernel-default")


def warm_run(run_id: str) -> None:
    """Build the caches a verification of this run will need, before there is a submission.
    Writes nothing to the ledger; a kind without a warmer does nothing."""
    with contextlib.closing(Ledger.open()) as ledger:
        run = _run_of(ledger, run_id)
    spec = dict(run.spec or {})
    if run.kind in WARMERS:
        _verifier_for(run.kind, WARMERS)(spec=spec, criteria=_criteria_of(spec))


def verify_run(run_id: str, *, ledger: Ledger | None = None, progress: Progress | None = None) -> dict[str, Any]:
    """Verify a run's latest submission (or record that there is none); returns the verdict row as a dict."""
    own = ledger is None
    ledger = ledger or Ledger.open()
    try:
        run = _run_of(ledger, run_id)
        spec = dict(run.spec or {})
        subs = ledger.submissions(run_id)
        sub = subs[-1] if subs else None
        key = f"verdict:{sub.key if sub else 'none'}"
        done = [v for v in ledger.verdicts(run_id) if v.key == key]
        if done:
            return _row(done[0])
        criteria = _criteria_of(spec)
        result = _verifier_for(run.kind)(spec=spec, submission=sub, criteria=criteria, progress=progress)
        payload = {
            "run_id": run_id,
            "key": key,  # signed with the rest: the row it belongs in (ledger.chain.misplaced)
            "kind": run.kind,
            "passed": bool(result["passed"]),
            "reasons": list(result.get("reasons", [])),
            "checks": list(result.get("checks", [])),
            "metrics": dict(result.get("metrics", {})),
            "criteria": criteria,
            "criteria_hash": result.get("criteria_hash"),
            "submission": sub.key if sub else None,
            "submission_hash": sub.sha256 if sub else None,
            "task_hash": result.get("task_hash"),
            "candidate_hash": result.get("candidate_hash"),
            "verifier_version": __version__,
            "verified_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        key_obj = signing.load_or_create_key(settings().ensure_home())
        verdict = ledger.append_verdict(run_id, payload, signing.sign(key_obj, payload), key=key)
        return _row(verdict)
    except LedgerError as exc:
        raise UserError(str(exc), "check the run id with `assay verdicts`") from None
    finally:
        if own:
            ledger.close()


def _row(v) -> dict[str, Any]:
    return {"id": v.id, "run_id": v.run_id, "key": v.key, "payload": v.payload, "signature": v.signature, "row_hash": v.row_hash}


def sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
