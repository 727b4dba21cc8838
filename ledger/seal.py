"""A run's record, sealed into its verdict (invariant 6: everything recorded, and noticed if lost).

The verdict chain covers verdicts; the rest of a run's record (its row, steps, tool calls,
policy decisions, approvals and submissions) is covered by the seal the verifier signs into the
run's verdict: per table, how many rows the run had and a root hash over them; for the run row,
a hash of the fields that never change. Deleting, changing or adding a row of a sealed run after
its verdict (even with the append-only triggers dropped and put back) changes what `seal`
computes now, and `check` names the table and the run. What fits one machine and a team's
PostgreSQL, after Certificate Transparency: the chain's head is signed and kept outside the
database (verifiers/receipts.py), so a cut-off or restored-from-backup ledger shows too.

A row's digest is SHA-256 over the canonical JSON of its columns as the ledger reads them back
(timestamps as UTC text), less its surrogate `id`; a table's root is SHA-256 over the sorted
digests, one per line, so it does not depend on the order the database returns them in.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from sqlmodel import SQLModel, select

from assay.ledger.chain import canonical_json, format_time
from assay.ledger.tables import Approval, PolicyDecision, Run, Step, Submission, ToolCall, table_name, table_of
from assay.typed import as_dict

SEAL_VERSION = 1
SEALED: tuple[type[SQLModel], ...] = (Step, ToolCall, PolicyDecision, Approval, Submission)
# The run row's fields that never change after it is created (status and times move on).
RUN_FIELDS = ("id", "job", "kind", "brain", "created_at", "budget", "spec")


def _plain(value: Any) -> Any:
    return format_time(value) if isinstance(value, datetime) else value


def row_digest(row: SQLModel, fields: tuple[str, ...] | None = None) -> str:
    names = fields or tuple(c for c in type(row).model_fields if c != "id")
    content = {name: _plain(getattr(row, name)) for name in names}
    return hashlib.sha256(canonical_json(content)).hexdigest()


def _root(digests: list[str]) -> str:
    return hashlib.sha256("\n".join(sorted(digests)).encode()).hexdigest()


def seal(session: Any, run_id: str) -> dict[str, Any] | None:
    """The seal of a run as the ledger holds it now (None when there is no such run)."""
    run = session.exec(select(Run).where(Run.id == run_id)).first()
    if run is None:
        return None
    tables: dict[str, Any] = {}
    for model in SEALED:
        rows = list(session.exec(select(model).where(table_of(model).c.run_id == run_id)))
        tables[table_name(model)] = {"count": len(rows), "root": _root([row_digest(r) for r in rows])}
    return {"version": SEAL_VERSION, "run": row_digest(run, RUN_FIELDS), "tables": tables}


def check(sealed: Any, now: dict[str, Any] | None, run_id: str) -> list[str]:
    """How the run's record now differs from the seal in its verdict, table by table."""
    seal = as_dict(sealed)
    if seal is None or seal.get("version") != SEAL_VERSION:
        return [f"run {run_id}: its verdict's seal is unreadable"]
    if now is None:
        return [f"runs: the row of run {run_id} is gone (its verdict remains)"]
    problems: list[str] = []
    if now["run"] != seal.get("run"):
        problems.append(f"runs: the row of run {run_id} was changed after its verdict")
    was = as_dict(seal.get("tables")) or {}
    for table, current in now["tables"].items():
        old = as_dict(was.get(table))
        if old is None:
            problems.append(f"{table}: run {run_id}'s verdict sealed no such table")
            continue
        n_old, n_now = old.get("count"), current["count"]
        if n_old != n_now:
            how = f"{n_old - n_now} deleted" if isinstance(n_old, int) and n_old > n_now else "rows added"
            problems.append(f"{table}: run {run_id} had {n_old} rows when verified, has {n_now} ({how})")
        elif old.get("root") != current["root"]:
            problems.append(f"{table}: rows of run {run_id} were changed or replaced after its verdict")
    return problems
