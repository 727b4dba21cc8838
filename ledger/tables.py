"""The ledger's tables: one per thing recorded (run, step, tool call, policy decision, verdict).

Only `runs` is ever updated (its status moves on). Every other row is an event: it is written
once, under an idempotency key unique within its run, and the database refuses UPDATE and
DELETE on it (see `schema.py`). A run resumed after kill -9 re-records its events under the
same keys and the ledger keeps the first copy, so nothing is lost or duplicated.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import Enum
from typing import Any, cast

import sqlalchemy as sa
from sqlmodel import Field, SQLModel


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """Timestamps go in and come out as aware UTC datetimes on every database.

    SQLite has no time zones and drops tzinfo silently; PostgreSQL's timestamptz would hand
    back the session's zone. Normalising here keeps the verdict hash identical on both.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("ledger timestamps must be timezone-aware (UTC)")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _json(nullable: bool = False) -> Any:
    # Plain JSON, not JSONB: PostgreSQL keeps the text as written, so what was hashed is what
    # comes back.
    return Field(default_factory=dict, sa_type=sa.JSON, nullable=nullable)


def _created_at() -> Any:
    return Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)


class RunStatus(str, Enum):
    created = "created"
    running = "running"
    waiting_approval = "waiting_approval"
    verifying = "verifying"
    passed = "passed"
    failed = "failed"
    error = "error"

    @property
    def finished(self) -> bool:
        return self in (RunStatus.passed, RunStatus.failed, RunStatus.error)


class Run(SQLModel, table=True):
    __tablename__ = "runs"  # pyright: ignore[reportAssignmentType]  # SQLModel types it as a declared_attr; SQLAlchemy takes a plain name

    id: str = Field(primary_key=True, max_length=64)
    job: str = Field(description="job file or job name the run was started from")
    kind: str = Field(index=True, description="job kind: kernel, quant, porting, compile")
    brain: str
    status: str = Field(default=RunStatus.created.value, index=True)
    created_at: datetime = _created_at()
    updated_at: datetime = _created_at()
    started_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    finished_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    budget: dict[str, Any] = _json()
    spec: dict[str, Any] = _json()  # the validated job, so a resume need not re-read its file
    budget_used: dict[str, Any] = _json()
    error: str | None = None


class _Event(SQLModel):
    """Columns every event row has; `(run_id, key)` is its idempotency key."""

    run_id: str = Field(foreign_key="runs.id", index=True, max_length=64)
    key: str = Field(max_length=255)
    created_at: datetime = _created_at()


class Step(_Event, table=True):
    __tablename__ = "steps"  # pyright: ignore[reportAssignmentType]  # SQLModel types it as a declared_attr; SQLAlchemy takes a plain name
    __table_args__ = (sa.UniqueConstraint("run_id", "key", name="uq_steps_run_key"),)

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(description="workflow node or agent step name")
    payload: dict[str, Any] = _json()


class ToolCall(_Event, table=True):
    __tablename__ = "tool_calls"  # pyright: ignore[reportAssignmentType]  # SQLModel types it as a declared_attr; SQLAlchemy takes a plain name
    __table_args__ = (sa.UniqueConstraint("run_id", "key", name="uq_tool_calls_run_key"),)

    id: int | None = Field(default=None, primary_key=True)
    step_key: str | None = Field(default=None, max_length=255)
    tool: str = Field(index=True)
    arguments: dict[str, Any] = _json()  # already redacted by the gateway; never raw
    decision: str = Field(description="allow, deny, approved, denied")
    result_digest: str | None = Field(default=None, max_length=71)  # "sha256:" + 64 hex
    result_size: int | None = None
    started_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    finished_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    duration_ms: float | None = None
    error: str | None = None
    # What the gateway returned, already redacted: a resumed run replays it instead of
    # running the tool twice. Fingerprint = tool + canonical arguments.
    fingerprint: str | None = Field(default=None, max_length=64)
    outcome: dict[str, Any] = _json()


class PolicyDecision(_Event, table=True):
    __tablename__ = "policy_decisions"  # pyright: ignore[reportAssignmentType]  # SQLModel types it as a declared_attr; SQLAlchemy takes a plain name
    __table_args__ = (sa.UniqueConstraint("run_id", "key", name="uq_policy_decisions_run_key"),)

    id: int | None = Field(default=None, primary_key=True)
    tool: str
    decision: str = Field(description="allow, deny, needs_approval, approved, denied")
    reason: str = ""
    detail: dict[str, Any] = _json()


class Verdict(_Event, table=True):
    """A link in the verdict chain; `id` is its position (1, 2, 3 ... with no gaps)."""

    __tablename__ = "verdicts"  # pyright: ignore[reportAssignmentType]  # SQLModel types it as a declared_attr; SQLAlchemy takes a plain name
    __table_args__ = (sa.UniqueConstraint("run_id", "key", name="uq_verdicts_run_key"),)

    # Assigned by the writer under the chain lock, not by a sequence: a sequence skips numbers
    # on rolled-back inserts, and gaps must mean only one thing, a deleted row.
    id: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    payload: dict[str, Any] = _json()
    signature: str = ""
    prev_hash: str = Field(max_length=64)
    row_hash: str = Field(max_length=64, unique=True)


class Approval(_Event, table=True):
    """One event in the life of a gated call: requested, then approved or denied, then used.

    Events, not a mutable row: who asked, who decided and when stay on record, and an
    approval covers exactly one call with exactly the arguments the human saw.
    """

    __tablename__ = "approvals"  # pyright: ignore[reportAssignmentType]  # SQLModel types it as a declared_attr; SQLAlchemy takes a plain name
    __table_args__ = (sa.UniqueConstraint("run_id", "key", name="uq_approvals_run_key"),)

    id: int | None = Field(default=None, primary_key=True)
    event: str = Field(description="requested, approved, denied, used")
    request_key: str = Field(max_length=255, index=True, description="key of the 'requested' event")
    fingerprint: str = Field(max_length=64)
    tool: str
    arguments: dict[str, Any] = _json()  # redacted, as the agent sent them
    reason: str = ""
    actor: str = ""


class Submission(_Event, table=True):
    """The agent's only handle on the outcome: a snapshot of its workspace, hashed."""

    __tablename__ = "submissions"  # pyright: ignore[reportAssignmentType]  # SQLModel types it as a declared_attr; SQLAlchemy takes a plain name
    __table_args__ = (sa.UniqueConstraint("run_id", "key", name="uq_submissions_run_key"),)

    id: int | None = Field(default=None, primary_key=True)
    snapshot: str = Field(description="path of the read-only snapshot, outside every workspace")
    sha256: str = Field(max_length=64)
    files: dict[str, Any] = _json()  # relative path -> sha256
    entry: str = Field(description="the candidate file within the snapshot")


def table_name(model: type[SQLModel]) -> str:
    """A table model's name (SQLModel's stubs type __tablename__ as a declared_attr)."""
    name = getattr(model, "__tablename__")  # noqa: B009  (read past the stub's type)
    assert isinstance(name, str)
    return name


def table_of(model: type[SQLModel] | SQLModel) -> sa.Table[Any]:
    """A table model's Table (SQLModel's stubs do not declare __table__)."""
    table = getattr(model, "__table__")  # noqa: B009  (read past the stub's type)
    assert isinstance(table, sa.Table)
    return cast("sa.Table[Any]", table)  # isinstance leaves its column-collection parameter open


LEDGER_TABLES: tuple[type[SQLModel], ...] = (Run, Step, ToolCall, PolicyDecision, Verdict, Approval, Submission)
APPEND_ONLY: tuple[type[SQLModel], ...] = (Step, ToolCall, PolicyDecision, Verdict, Approval, Submission)
