"""The verifier process: `python -m assay.verifiers verify --run RUN`.

It runs apart from the agent (its own process, its own key), takes the submission from the
ledger rather than from anything the agent says, runs the kind's checks in fresh sandboxes
against criteria no agent-writable path reaches, signs the verdict and appends it to the
chain. It never imports agents or tools, and never imports agent-written code into itself.
Which checks a kind gets is its own registry's (verifiers/kinds.py); this module knows no kind.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from assay import __version__
from assay.errors import UserError
from assay.ledger import Ledger, LedgerError, Verdict
from assay.runspec import RunSpec
from assay.settings import settings
from assay.verifiers import receipts, signing
from assay.verifiers.kinds import (
    Progress,
    VerifierKind,
    VerifyRequest,
    load_criteria_for,
    verifier_kind,
)
from assay.verifiers.outcome import Outcome


def _run_of(ledger: Ledger, run_id: str):
    run = ledger.get_run(run_id)
    if run is None:
        raise UserError(f"no run {run_id!r} in the ledger", "check the run id with `assay verdicts`")
    return run


def request_for(spec: RunSpec, entry: Path | None) -> VerifyRequest:
    return VerifyRequest(
        kind=spec.kind,
        task_path=Path(spec.task_path),
        entry=entry,
        criteria=spec.criteria,
        options=spec.options,
        sandbox_backend=spec.sandbox_backend,
    )


def judge(kind: VerifierKind, request: VerifyRequest, progress: Progress | None = None) -> tuple[Outcome, str]:
    """The kind's outcome for one request, under the named profile of that kind, and the
    profile's name. The options are validated by the verifier's own model first."""
    try:
        kind.options_model.model_validate(request.options)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "options"
        raise UserError(
            f"the job's [{kind.name}] options are not ones the {kind.name} verifier takes: {where}: {err['msg']}",
            f"see examples/{kind.name}/ for a valid job",
        ) from None
    criteria = load_criteria_for(kind, request.criteria)
    return kind.verify(request, criteria, progress), criteria.name


def warm_run(run_id: str) -> None:
    """Build the caches a verification of this run will need, before there is a submission.
    Writes nothing to the ledger; a kind without caches does nothing."""
    with contextlib.closing(Ledger.open()) as ledger:
        run = _run_of(ledger, run_id)
    spec = RunSpec.of(run.spec, run_id)
    kind = verifier_kind(spec.kind)
    kind.warm(request_for(spec, None), load_criteria_for(kind, spec.criteria))


def verify_run(run_id: str, *, ledger: Ledger | None = None, progress: Progress | None = None) -> dict[str, Any]:
    """Verify a run's latest submission (or record that there is none); returns the verdict row as a dict."""
    own = ledger is None
    ledger = ledger or Ledger.open()
    try:
        run = _run_of(ledger, run_id)
        spec = RunSpec.of(run.spec, run_id)
        if spec.kind != run.kind:
            raise UserError(
                f"run {run_id} is a {run.kind} run but its spec names {spec.kind!r}",
                "start the job again with `assay run JOB.toml`",
            )
        subs = ledger.submissions(run_id)
        sub = subs[-1] if subs else None
        key = f"verdict:{sub.key if sub else 'none'}"
        done = [v for v in ledger.verdicts(run_id) if v.key == key]
        if done:
            key_obj = signing.load_or_create_key(settings().ensure_home())
            return {**_row(done[0]), "receipt": receipts.receipt(key_obj, ledger.url, done[0])}
        kind = verifier_kind(spec.kind)
        entry = Path(sub.snapshot) / sub.entry if sub else None
        outcome, criteria = judge(kind, request_for(spec, entry), progress)
        payload = {
            "run_id": run_id,
            "key": key,  # signed with the rest: the row it belongs in (ledger.chain.misplaced)
            "kind": run.kind,
            **outcome.verdict_fields(),
            "criteria": criteria,
            "submission": sub.key if sub else None,
            "submission_hash": sub.sha256 if sub else None,
            "verifier_version": __version__,
            "verified_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        return chain_verdict(ledger, run_id, key, payload)
    except LedgerError as exc:
        raise UserError(str(exc), "check the run id with `assay verdicts`") from None
    finally:
        if own:
            ledger.close()


def chain_verdict(ledger: Ledger, run_id: str, key: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Seal the run's record into the payload (ledger/seal.py: a row lost or changed later
    shows), sign it, chain it, and sign the chain's new head outside the database
    (verifiers/receipts.py). Returns the verdict row with its receipt."""
    payload = {**payload, "seal": ledger.seal_run(run_id)}
    home = settings().ensure_home()
    key_obj = signing.load_or_create_key(home)
    verdict = ledger.append_verdict(run_id, payload, signing.sign(key_obj, payload), key=key)
    receipts.write_head(home, key_obj, ledger.url, verdict.id, verdict.row_hash)
    return {**_row(verdict), "receipt": receipts.receipt(key_obj, ledger.url, verdict)}


def _row(v: Verdict) -> dict[str, Any]:
    return {
        "id": v.id,
        "run_id": v.run_id,
        "key": v.key,
        "payload": v.payload,
        "signature": v.signature,
        "row_hash": v.row_hash,
    }
