"""The ledger store: the one place runs, steps, tool calls, policy decisions and verdicts are
written and read.

Every event write is insert-if-absent on `(run_id, key)`: a writer that died after its
commit and writes the same event again on resume gets the row already there, not a second
one. Verdicts additionally join the hash chain, one writer at a time.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, SQLModel, col, func, select

from assay.ledger import chain, seal
from assay.ledger.schema import (
    CHAIN_LOCK,
    Engines,
    NoLedger,
    database_error,
    ensure_tables,
    has_table,
    open_engines,
    present_guards,
    user_facing,
)
from assay.ledger.tables import (
    APPEND_ONLY,
    LEDGER_TABLES,
    Approval,
    PolicyDecision,
    Run,
    RunStatus,
    Step,
    Submission,
    ToolCall,
    Verdict,
    table_name,
    table_of,
    utcnow,
)
from assay.typed import as_dict

E = TypeVar("E", Step, ToolCall, PolicyDecision, Approval, Submission)
M = TypeVar("M", bound=SQLModel)


class LedgerError(Exception):
    """A caller asked for something the ledger will not do (unknown run, finished run...)."""


def new_run_id() -> str:
    # Sortable by start time, short enough to type after `assay approve`.
    return f"{utcnow():%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def result_digest(result: str | bytes) -> tuple[str, int]:
    data = result.encode() if isinstance(result, str) else result
    return "sha256:" + hashlib.sha256(data).hexdigest(), len(data)


class Ledger:
    """Open with `Ledger.open(url)`; `url=None` means ASSAY_LEDGER_URL, else the SQLite file
    under ASSAY_HOME. Use as a context manager or call `close()`."""

    def __init__(self, engines: Engines):
        self._engines = engines

    # --- opening ----------------------------------------------------------------------------

    @classmethod
    def open(cls, url: str | None = None, *, create: bool = True) -> Ledger:
        """`create=False` is for readers (verify, info): it never creates a file or a table,
        and says so when there is no ledger to read."""
        if url is None:
            from assay.settings import settings

            s = settings()
            url = s.resolved_ledger_url
            if s.ledger_url is None and create:
                s.ensure_home()
        engines = open_engines(url, create=create)
        new_file = _new_sqlite_file(engines)
        try:
            if create:
                ensure_tables(engines, LEDGER_TABLES, APPEND_ONLY)
            elif not has_table(engines, table_name(Verdict)):
                raise NoLedger(
                    f"no assay ledger in {engines.display_url}",
                    "check the ledger URL; a ledger is created by the first run",
                )
        except BaseException:
            engines.dispose()
            if new_file is not None:  # leave no empty ledger behind a failed first open
                for suffix in ("", "-wal", "-shm", "-journal"):
                    Path(f"{new_file}{suffix}").unlink(missing_ok=True)
            raise
        return cls(engines)

    def close(self) -> None:
        self._engines.dispose()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        """The URL with any password hidden, fit for printing."""
        return self._engines.display_url

    @property
    def dialect(self) -> str:
        return self._engines.dialect

    # --- for other rooms: same database, their own tables -----------------------------------

    @property
    def engine(self) -> sa.Engine:
        """For reads. Write through `session(write=True)` so SQLite writers queue properly."""
        return self._engines.read

    @contextmanager
    def session(self, *, write: bool = False) -> Generator[Session]:
        """A SQLModel session that commits when the block ends cleanly, else rolls back.
        Objects stay readable after the block (expire_on_commit=False)."""
        engine = self._engines.write if write else self._engines.read
        try:
            with Session(engine, expire_on_commit=False) as s, s.begin():
                yield s
        except sa_exc.OperationalError as exc:
            # The database went away or stayed locked: the user's problem to fix, in one line.
            raise database_error(self._engines, exc) from None

    def ensure_tables(self, *models: type[SQLModel], append_only: bool = False) -> None:
        """Create another room's SQLModel tables in this database if missing (e.g. the
        autotune cache); `append_only=True` adds the same UPDATE/DELETE-refusing triggers."""
        ensure_tables(self._engines, models, models if append_only else ())

    def insert_once(self, row: M, *, unique: Sequence[str]) -> M:
        """Insert `row` unless a row with the same values in `unique` (columns that carry a
        unique constraint together) exists; return the stored row either way. Safe against
        concurrent writers of the same row, in this process or another."""
        model = type(row)
        ins = self._insert(model).values(**_values(row)).on_conflict_do_nothing(index_elements=list(unique))
        with self.session(write=True) as s:
            s.exec(ins)
            q = select(model).where(*(getattr(model, c) == getattr(row, c) for c in unique))
            return s.exec(q).one()

    # --- runs -------------------------------------------------------------------------------

    def create_run(
        self,
        *,
        job: str,
        kind: str,
        brain: str,
        run_id: str | None = None,
        budget: dict[str, Any] | None = None,
        spec: dict[str, Any] | None = None,
    ) -> Run:
        """A new run in status `created`. With an existing `run_id`, returns that run.
        `spec` is the validated job as JSON, kept so a resume does not depend on the job file."""
        run = Run(id=run_id or new_run_id(), job=job, kind=kind, brain=brain, budget=budget or {}, spec=spec or {})
        return self.insert_once(run, unique=("id",))

    def get_run(self, run_id: str) -> Run | None:
        with self.session() as s:
            return s.get(Run, run_id)

    def list_runs(
        self, *, status: RunStatus | str | None = None, kind: str | None = None, limit: int = 100
    ) -> list[Run]:
        """Newest first."""
        q = select(Run).order_by(col(Run.created_at).desc(), col(Run.id).desc()).limit(limit)
        if status is not None:
            q = q.where(Run.status == RunStatus(status).value)
        if kind is not None:
            q = q.where(Run.kind == kind)
        with self.session() as s:
            return list(s.exec(q))

    def set_run_status(
        self,
        run_id: str,
        status: RunStatus | str,
        *,
        error: str | None = None,
        budget_used: dict[str, Any] | None = None,
    ) -> Run:
        """Move a run on. A finished run (passed, failed, error) stays finished."""
        new = RunStatus(status)
        with self.session(write=True) as s:
            run = s.exec(select(Run).where(Run.id == run_id).with_for_update()).first()
            if run is None:
                raise LedgerError(f"no run {run_id!r} in the ledger")
            old = RunStatus(run.status)
            if old.finished and new != old:
                raise LedgerError(f"run {run_id} is already {old.value}; it cannot become {new.value}")
            now = utcnow()
            run.status = new.value
            run.updated_at = now
            if new != RunStatus.created and run.started_at is None:
                run.started_at = now
            if new.finished and run.finished_at is None:
                run.finished_at = now
            if error is not None:
                run.error = error
            if budget_used is not None:
                run.budget_used = dict(budget_used)
            s.add(run)
            s.flush()
            return run

    # --- events -----------------------------------------------------------------------------

    def record_step(self, run_id: str, *, key: str, name: str, payload: dict[str, Any] | None = None) -> Step:
        return self._insert_once(Step(run_id=run_id, key=key, name=name, payload=payload or {}))

    def record_tool_call(
        self,
        run_id: str,
        *,
        key: str,
        tool: str,
        arguments: dict[str, Any],
        decision: str,
        result: str | bytes | None = None,
        started_at: datetime | None = None,
        finished_at: datetime | None = None,
        error: str | None = None,
        step_key: str | None = None,
        fingerprint: str | None = None,
        outcome: dict[str, Any] | None = None,
        fetch: bool = True,
    ) -> ToolCall | None:
        """`arguments` and `result` must already be redacted. The result itself is not kept,
        only its digest and size."""
        digest, size = result_digest(result) if result is not None else (None, None)
        duration = (finished_at - started_at).total_seconds() * 1000 if started_at and finished_at else None
        return self._insert_once(
            ToolCall(
                run_id=run_id,
                key=key,
                step_key=step_key,
                tool=tool,
                arguments=arguments,
                decision=decision,
                result_digest=digest,
                result_size=size,
                started_at=started_at,
                finished_at=finished_at,
                duration_ms=duration,
                error=error,
                fingerprint=fingerprint,
                outcome=outcome or {},
            ),
            fetch=fetch,
        )

    def record_policy_decision(
        self,
        run_id: str,
        *,
        key: str,
        tool: str,
        decision: str,
        reason: str = "",
        detail: dict[str, Any] | None = None,
        fetch: bool = True,
    ) -> PolicyDecision | None:
        return self._insert_once(
            PolicyDecision(run_id=run_id, key=key, tool=tool, decision=decision, reason=reason, detail=detail or {}),
            fetch=fetch,
        )

    def tool_call(self, run_id: str, key: str) -> ToolCall | None:
        with self.session() as s:
            return s.exec(select(ToolCall).where(ToolCall.run_id == run_id, ToolCall.key == key)).first()

    def recorded_outcome(self, run_id: str, key: str) -> tuple[str | None, str, dict[str, Any]] | None:
        """(fingerprint, decision, outcome) of a recorded call: the replay check, kept lean
        because the gateway asks it before every call that carries a client key."""
        q = sa.select(col(ToolCall.fingerprint), col(ToolCall.decision), col(ToolCall.outcome)).where(
            col(ToolCall.run_id) == run_id, col(ToolCall.key) == key
        )
        row = self._core(self._engines.read, q, first=True)
        return None if row is None else (row[0], row[1], row[2] or {})

    def _event_insert(self, model: type[SQLModel]) -> Any:
        """The insert-if-absent statement for an event table, built once: building and
        cache-keying a statement per call cost more than the write itself."""
        cache = self.__dict__.setdefault("_inserts", {})
        if model not in cache:
            cache[model] = self._insert(model).on_conflict_do_nothing(index_elements=["run_id", "key"])
        return cache[model]

    def _core(
        self, engine: sa.Engine, statement: Any, params: dict[str, Any] | None = None, *, first: bool = False
    ) -> Any:
        """One statement in its own transaction, without an ORM session: the gateway's hot
        path pays for the write, not for the object machinery around it."""
        try:
            with engine.begin() as conn:
                result = conn.execute(statement, params) if params is not None else conn.execute(statement)
                return result.first() if first else None
        except sa_exc.OperationalError as exc:
            raise database_error(self._engines, exc) from None

    # --- approvals and submissions ------------------------------------------------------------

    def approval_events(self, run_id: str) -> list[Approval]:
        return self._events(Approval, run_id)

    def record_approval(
        self,
        run_id: str,
        *,
        key: str,
        event: str,
        request_key: str,
        fingerprint: str,
        tool: str,
        arguments: dict[str, Any] | None = None,
        reason: str = "",
        actor: str = "",
    ) -> Approval:
        return self._insert_once(
            Approval(
                run_id=run_id,
                key=key,
                event=event,
                request_key=request_key,
                fingerprint=fingerprint,
                tool=tool,
                arguments=arguments or {},
                reason=reason,
                actor=actor,
            )
        )

    def record_submission(
        self, run_id: str, *, key: str, snapshot: str, sha256: str, files: dict[str, Any], entry: str
    ) -> Submission:
        return self._insert_once(
            Submission(run_id=run_id, key=key, snapshot=snapshot, sha256=sha256, files=files, entry=entry)
        )

    def submissions(self, run_id: str) -> list[Submission]:
        return self._events(Submission, run_id)

    def steps(self, run_id: str) -> list[Step]:
        return self._events(Step, run_id)

    def tool_calls(self, run_id: str) -> list[ToolCall]:
        return self._events(ToolCall, run_id)

    def policy_decisions(self, run_id: str) -> list[PolicyDecision]:
        return self._events(PolicyDecision, run_id)

    # --- verdicts ---------------------------------------------------------------------------

    def append_verdict(self, run_id: str, payload: dict[str, Any], signature: str, *, key: str) -> Verdict:
        """Chain a verdict. `signature` is the verifier's, over `chain.canonical_json(payload)`.
        Appending the same `(run_id, key)` again returns the verdict already chained."""
        payload = chain.normalize_payload(payload)
        with self.session(write=True) as s:
            if self.dialect == "postgresql":
                # Held to commit: the read of the last row and the insert after it are one step.
                s.connection().execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": CHAIN_LOCK})
            existing = s.exec(select(Verdict).where(Verdict.run_id == run_id, Verdict.key == key)).first()
            if existing is not None:
                return existing
            if s.get(Run, run_id) is None:
                raise LedgerError(f"no run {run_id!r} in the ledger")
            last = s.exec(select(Verdict).order_by(col(Verdict.id).desc()).limit(1)).first()
            prev = last.row_hash if last else chain.GENESIS
            created = utcnow()
            verdict = Verdict(
                id=(last.id + 1) if last else 1,
                run_id=run_id,
                key=key,
                created_at=created,
                payload=payload,
                signature=signature,
                prev_hash=prev,
                row_hash=chain.row_hash(
                    prev, run_id=run_id, key=key, created_at=created, payload=payload, signature=signature
                ),
            )
            s.add(verdict)
            s.flush()
            return verdict

    def verdict_hash(self, verdict_id: int) -> str | None:
        """The stored row_hash of verdict `verdict_id` (raw: it must answer after tampering too)."""
        with user_facing(self._engines), self._engines.read.connect() as conn:
            return conn.execute(sa.text("SELECT row_hash FROM verdicts WHERE id = :i"), {"i": verdict_id}).scalar()

    def seal_run(self, run_id: str) -> dict[str, Any] | None:
        """The run's record as it stands now (ledger/seal.py), for the verifier to sign."""
        with self.session() as s:
            return seal.seal(s, run_id)

    def audit_record(self) -> list[str]:
        """What is missing or changed in the record besides the verdict chain: each verified
        run against the seal in its newest verdict, every finished run against its verdict.
        Problems name the table and the run; empty when the record is whole."""
        problems: list[str] = []
        with self.session() as s:
            try:
                newest: dict[str, Verdict] = {}
                for v in s.exec(select(Verdict).order_by(col(Verdict.id))):
                    newest[v.run_id] = v
                runs = {r.id: r for r in s.exec(select(Run))}
            except Exception as exc:  # tampered beyond reading: say so, do not crash
                return [f"the runs or verdicts table cannot be read ({type(exc).__name__})"]
            for run_id, v in newest.items():
                payload = as_dict(v.payload) or {}  # the column says dict; a tampered row may not
                if "seal" not in payload:
                    continue  # verified before seals existed
                try:
                    now = seal.seal(s, run_id)
                except Exception as exc:
                    problems.append(f"run {run_id}: its record cannot be read ({type(exc).__name__})")
                    continue
                problems += seal.check(payload["seal"], now, run_id)
            for run_id, run in runs.items():
                if run.status not in (RunStatus.passed.value, RunStatus.failed.value):
                    continue
                v = newest.get(run_id)
                if v is None:
                    problems.append(f"verdicts: run {run_id} is {run.status} but has no verdict")
                elif (run.status == RunStatus.passed.value) != bool((v.payload or {}).get("passed")):
                    problems.append(
                        f"runs: run {run_id} says {run.status}, its verdict says {'pass' if (v.payload or {}).get('passed') else 'fail'}"
                    )
        return problems

    def verdicts(self, run_id: str | None = None) -> list[Verdict]:
        q = select(Verdict).order_by(col(Verdict.id))
        if run_id is not None:
            q = q.where(Verdict.run_id == run_id)
        with self.session() as s:
            return list(s.exec(q))

    def verify_chain(
        self, *, signature_check: chain.SignatureCheck | None = None, expected_head: str | None = None
    ) -> chain.ChainReport:
        """Walk every verdict in order and report the first one that is wrong.

        Reads raw columns, not model objects: after tampering a value may not even parse, and
        that must be reported as a changed row, not raised."""
        cols = "id, run_id, key, created_at, payload, signature, prev_hash, row_hash"
        with user_facing(self._engines), self._engines.read.connect() as conn:

            def find_by_hash(h: str) -> int | None:
                return conn.execute(sa.text("SELECT id FROM verdicts WHERE row_hash = :h LIMIT 1"), {"h": h}).scalar()

            # A second connection walks the rows so the lookups above need not wait for it.
            with self._engines.read.connect() as walker:
                rows = walker.execution_options(stream_results=True, yield_per=500).exec_driver_sql(
                    f"SELECT {cols} FROM verdicts ORDER BY id"
                )
                return chain.walk(
                    chain.iter_raw(rows), find_by_hash, signature_check=signature_check, expected_head=expected_head
                )

    # --- overview ---------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        with self.session() as s:
            return {table_name(m): s.exec(select(func.count()).select_from(m)).one() for m in LEDGER_TABLES}

    def guards(self) -> dict[str, bool]:
        """Which append-only tables still have their UPDATE/DELETE-refusing triggers."""
        return present_guards(self._engines, [table_name(m) for m in APPEND_ONLY])

    # --- internals --------------------------------------------------------------------------

    def _insert(self, model: type[SQLModel]) -> Any:
        table = table_of(model)
        return postgresql.insert(table) if self.dialect == "postgresql" else sqlite.insert(table)

    @overload
    def _insert_once(self, event: E, *, fetch: Literal[True] = ...) -> E: ...

    @overload
    def _insert_once(self, event: E, *, fetch: bool) -> E | None: ...

    def _insert_once(self, event: E, *, fetch: bool = True) -> E | None:
        """`fetch=False` skips reading the stored row back: the gateway's hot path only needs
        the write to be durable before the call's result leaves."""
        try:
            if fetch:
                return self.insert_once(event, unique=("run_id", "key"))
            self._core(self._engines.write, self._event_insert(type(event)), _values(event))
            return None
        except sa_exc.IntegrityError as exc:
            if "foreign key" in str(exc.orig).lower():
                raise LedgerError(f"no run {event.run_id!r} in the ledger") from None
            raise

    def _events(self, model: type[E], run_id: str) -> list[E]:
        with self.session() as s:
            return list(s.exec(select(model).where(model.run_id == run_id).order_by(col(model.id))))


def _new_sqlite_file(engines: Engines) -> Path | None:
    """The SQLite file the first connection just created, if it holds nothing yet."""
    if engines.dialect != "sqlite":
        return None
    if not engines.url.database:
        return None
    path = Path(engines.url.database)
    return path if path.exists() and path.stat().st_size == 0 else None


def _values(obj: SQLModel) -> dict[str, Any]:
    """Column values of a not-yet-inserted row; an unset autoincrement id is left to the database."""
    values = {c.name: getattr(obj, c.name) for c in table_of(obj).columns}
    if values.get("id") is None:
        values.pop("id", None)
    return values
