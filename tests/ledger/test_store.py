"""The store's API against real SQLite files and a real PostgreSQL server."""

from __future__ import annotations

import hashlib
from datetime import UTC, timedelta

import pytest
import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from assay.ledger import Ledger, LedgerError, Run, RunStatus, utcnow


class AutotuneProbe(SQLModel, table=True):
    """Stands in for another room's table (the kernel autotune cache) in the same database."""

    __tablename__ = "test_autotune_probe"
    id: int | None = Field(default=None, primary_key=True)
    signature: str = Field(unique=True)
    config: dict = Field(default_factory=dict, sa_type=sa.JSON)


@pytest.fixture
def ledger(ledger_url):
    with Ledger.open(ledger_url) as led:
        yield led


def test_run_lifecycle(ledger):
    run = ledger.create_run(
        job="softmax.toml", kind="kernel", brain="playbook", budget={"steps": 20}, spec={"task": "softmax.py"}
    )
    assert run.status == "created" and run.started_at is None
    assert run.created_at.tzinfo == UTC

    running = ledger.set_run_status(run.id, RunStatus.running, budget_used={"steps": 1})
    assert running.started_at is not None and running.budget_used == {"steps": 1}
    ledger.set_run_status(run.id, "verifying")
    done = ledger.set_run_status(run.id, "passed")
    assert done.finished_at is not None and done.finished_at >= done.started_at

    got = ledger.get_run(run.id)
    assert got.status == "passed" and got.budget == {"steps": 20} and got.spec == {"task": "softmax.py"}
    assert got.started_at.tzinfo == UTC
    with pytest.raises(LedgerError, match="already passed"):
        ledger.set_run_status(run.id, "running")
    with pytest.raises(ValueError):
        ledger.set_run_status(run.id, "bogus")
    with pytest.raises(LedgerError, match="no run"):
        ledger.set_run_status("nope", "running")


def test_create_run_with_existing_id_returns_it(ledger):
    first = ledger.create_run(job="a.toml", kind="kernel", brain="playbook", run_id="r-1")
    again = ledger.create_run(job="other.toml", kind="quant", brain="local", run_id="r-1")
    assert (again.id, again.job, again.kind) == ("r-1", "a.toml", "kernel")
    assert first.created_at == again.created_at
    assert ledger.counts()["runs"] == 1


def test_list_runs_filters_newest_first(ledger):
    a = ledger.create_run(job="a", kind="kernel", brain="playbook")
    b = ledger.create_run(job="b", kind="quant", brain="playbook")
    ledger.set_run_status(b.id, "running")
    assert [r.id for r in ledger.list_runs()] == [b.id, a.id]
    assert [r.id for r in ledger.list_runs(status="running")] == [b.id]
    assert [r.id for r in ledger.list_runs(kind="kernel")] == [a.id]
    assert ledger.get_run("missing") is None


def test_events_are_recorded_once_per_key(ledger):
    run = ledger.create_run(job="j", kind="kernel", brain="playbook")
    t0 = utcnow()
    first = ledger.record_tool_call(
        run.id,
        key="call-1",
        tool="build",
        arguments={"path": "k.cpp"},
        decision="allow",
        result="built ok",
        started_at=t0,
        finished_at=t0 + timedelta(milliseconds=250),
    )
    # A resumed run repeats the call: same key, different timings and result.
    again = ledger.record_tool_call(
        run.id,
        key="call-1",
        tool="build",
        arguments={"path": "k.cpp"},
        decision="allow",
        result="other",
    )
    assert again.id == first.id and again.result_digest == first.result_digest
    assert first.result_digest == "sha256:" + hashlib.sha256(b"built ok").hexdigest()
    assert first.result_size == len(b"built ok") and first.duration_ms == pytest.approx(250)

    ledger.record_step(run.id, key="step-1", name="agent", payload={"tokens": 12})
    ledger.record_step(run.id, key="step-1", name="agent", payload={"tokens": 99})
    ledger.record_step(run.id, key="step-2", name="agent")
    ledger.record_policy_decision(run.id, key="pd-1", tool="shell", decision="deny", reason="not in manifest")
    ledger.record_policy_decision(run.id, key="pd-1", tool="shell", decision="deny", reason="not in manifest")

    assert [(s.key, s.payload) for s in ledger.steps(run.id)] == [("step-1", {"tokens": 12}), ("step-2", {})]
    assert len(ledger.tool_calls(run.id)) == 1
    assert [p.reason for p in ledger.policy_decisions(run.id)] == ["not in manifest"]
    # The key is unique per run, not globally.
    other = ledger.create_run(job="j", kind="kernel", brain="playbook")
    ledger.record_step(other.id, key="step-1", name="agent")
    assert ledger.counts()["steps"] == 3


def test_events_need_a_known_run(ledger):
    with pytest.raises(LedgerError, match="no run 'ghost'"):
        ledger.record_step("ghost", key="k", name="agent")
    with pytest.raises(LedgerError, match="no run 'ghost'"):
        ledger.append_verdict("ghost", {"passed": True}, "sig", key="v")


@pytest.mark.parametrize("table", ["steps", "tool_calls", "policy_decisions", "verdicts"])
def test_event_tables_refuse_update_and_delete(ledger, table):
    run = ledger.create_run(job="j", kind="kernel", brain="playbook")
    ledger.record_step(run.id, key="k", name="agent")
    ledger.record_tool_call(run.id, key="k", tool="t", arguments={}, decision="allow")
    ledger.record_policy_decision(run.id, key="k", tool="t", decision="allow")
    ledger.append_verdict(run.id, {"passed": True}, "sig", key="k")
    for stmt in (f"UPDATE {table} SET key = 'forged'", f"DELETE FROM {table}"):
        with pytest.raises(sa.exc.DBAPIError, match="append-only"), ledger.engine.begin() as conn:
            conn.exec_driver_sql(stmt)
    if ledger.dialect == "postgresql":
        with pytest.raises(sa.exc.DBAPIError, match="append-only"), ledger.engine.begin() as conn:
            conn.exec_driver_sql(f"TRUNCATE {table} CASCADE")
    assert ledger.counts()[table] == 1
    assert all(ledger.guards().values())


def test_reopening_keeps_rows_and_guards(ledger_url):
    with Ledger.open(ledger_url) as led:
        run = led.create_run(job="j", kind="kernel", brain="playbook")
        led.append_verdict(run.id, {"passed": True}, "sig", key="v")
    with Ledger.open(ledger_url) as led, Ledger.open(ledger_url, create=False) as reader:
        assert led.counts()["verdicts"] == 1 and reader.get_run(run.id).job == "j"
        assert all(led.guards().values())
        assert led.verify_chain().ok


def test_another_room_adds_its_table(ledger):
    ledger.ensure_tables(AutotuneProbe, append_only=True)
    ledger.ensure_tables(AutotuneProbe, append_only=True)  # idempotent
    with ledger.session(write=True) as s:
        s.add(AutotuneProbe(signature="softmax/f32/4096", config={"block": 256}))
    with ledger.session() as s:
        row = s.get(AutotuneProbe, 1)
        assert row.config == {"block": 256}
    # Deduplicated by its unique column: the second machine's copy is not added.
    kept = ledger.insert_once(AutotuneProbe(signature="softmax/f32/4096", config={"block": 64}), unique=["signature"])
    assert (kept.id, kept.config) == (1, {"block": 256})
    new = ledger.insert_once(AutotuneProbe(signature="gelu/f32/4096", config={"block": 64}), unique=["signature"])
    assert new.id != kept.id and new.config == {"block": 64}
    with ledger.session() as s:
        assert len(s.exec(sa.select(AutotuneProbe)).all()) == 2
    with pytest.raises(sa.exc.DBAPIError, match="append-only"), ledger.session(write=True) as s:
        s.execute(sa.text("UPDATE test_autotune_probe SET signature = 'x'"))


def test_session_rolls_back_on_error(ledger):
    with pytest.raises(RuntimeError), ledger.session(write=True) as s:
        s.add(Run(id="x", job="j", kind="kernel", brain="playbook"))
        s.flush()
        raise RuntimeError("boom")
    assert ledger.get_run("x") is None


@pytest.mark.postgres
def test_reader_never_creates_a_ledger(tmp_path, pg_url):
    from assay.ledger import NoLedger

    path = tmp_path / "absent.db"
    with pytest.raises(NoLedger):
        Ledger.open(f"sqlite:///{path}", create=False)
    assert not path.exists()
    with pytest.raises(NoLedger):
        Ledger.open(pg_url, create=False)
    engine = sa.create_engine(pg_url)
    with engine.connect() as conn:
        assert sa.inspect(conn).get_table_names() == []
    engine.dispose()
