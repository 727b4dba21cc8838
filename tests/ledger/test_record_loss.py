"""A ledger that notices loss (invariants 4 and 6), attacked with database access: the append-only
triggers dropped, then the last row, every row, or a middle row of each recorded table deleted, or
an older copy of the whole database put back. `assay ledger verify` fails every time, naming the
table and the run; with receipts, each missing verdict is named. On SQLite and PostgreSQL.

The record is written through the Ledger API the way the gateway and runner write it, and each
run's verdict through the verifier process's own chain_verdict (seal, sign, chain, signed head)."""

from __future__ import annotations

import json
import shutil

import pytest
import sqlalchemy as sa

from assay.ledger import Ledger, RunStatus
from assay.ledger.schema import guard_names

TABLES = ("steps", "tool_calls", "policy_decisions", "approvals", "submissions")


def _record(ledger: Ledger, i: int) -> str:
    """One finished, verified run with two rows in every recorded table."""
    from assay.verifiers.process import chain_verdict

    run = ledger.create_run(job=f"job{i}.toml", kind="kernel", brain="playbook", budget={"steps": 4})
    ledger.set_run_status(run.id, RunStatus.running)
    for n in (1, 2):
        ledger.record_step(run.id, key=f"step-{n}", name="agent", payload={"tool_calls": n})
        ledger.record_policy_decision(run.id, key=f"{n}:c", tool="read_file", decision="allow", reason="ok")
        ledger.record_tool_call(
            run.id, key=f"{n}:c", tool="read_file", arguments={"path": f"f{n}"}, decision="allow", result="x"
        )
        ledger.record_approval(
            run.id,
            key=f"approval-{n}",
            event="requested",
            request_key=f"approval-{n}",
            fingerprint="f" * 64,
            tool="exec",
            actor="gateway",
        )
        ledger.record_submission(
            run.id,
            key=f"submission-{n}",
            snapshot=f"/s/{n}",
            sha256="a" * 64,
            files={"candidate.py": "b" * 64},
            entry="candidate.py",
        )
    payload = {
        "run_id": run.id,
        "key": "verdict:submission-2",
        "kind": "kernel",
        "passed": i % 2 == 0,
        "outcome": "pass" if i % 2 == 0 else "fail",
        "reasons": [] if i % 2 == 0 else ["speed: slow"],
    }
    row = chain_verdict(ledger, run.id, "verdict:submission-2", payload)
    ledger.set_run_status(run.id, RunStatus.passed if i % 2 == 0 else RunStatus.failed)
    return row


@pytest.fixture
def recorded(ledger_url, tmp_path):
    """Three verified runs; their receipts in tmp_path/receipts, as `assay run` writes them."""
    folder = tmp_path / "receipts"
    folder.mkdir()
    with Ledger.open(ledger_url) as ledger:
        rows = [_record(ledger, i) for i in range(3)]
        dialect = ledger.dialect
    for row in rows:
        (folder / f"receipt-{row['run_id']}.json").write_text(json.dumps(row["receipt"]))
    return ledger_url, dialect, [r["run_id"] for r in rows], folder


def _unguard(conn, dialect: str, table: str) -> None:
    for name in guard_names(dialect, table):
        conn.exec_driver_sql(f"DROP TRIGGER {name}" if dialect == "sqlite" else f"DROP TRIGGER {name} ON {table}")


def _delete(url: str, dialect: str, table: str, where: str) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        _unguard(conn, dialect, table)
        conn.exec_driver_sql(f"DELETE FROM {table} WHERE {where}")
    engine.dispose()


def _verify(cli, url: str, *extra: str):
    return cli("ledger", "verify", "--url", url, *extra)


def test_an_intact_record_verifies(recorded, cli):
    url, _, _, folder = recorded
    out = _verify(cli, url, "--receipts", str(folder))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "RECORD" not in out.stdout


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("which", ["last", "all", "middle"])
def test_deleting_rows_of_any_recorded_table_is_named(recorded, cli, table, which):
    url, dialect, runs, _ = recorded
    where = {
        "last": f"id = (SELECT MAX(id) FROM {table})",
        "all": "1 = 1",
        "middle": f"run_id = '{runs[1]}' AND key = (SELECT MIN(key) FROM {table} WHERE run_id = '{runs[1]}')",
    }[which]
    _delete(url, dialect, table, where)
    out = _verify(cli, url)
    assert out.returncode == 1, out.stdout + out.stderr
    named = [line for line in out.stdout.splitlines() if line.strip().startswith(f"RECORD: {table}:")]
    hit = runs if which == "all" else [runs[-1]] if which == "last" else [runs[1]]
    for run_id in hit:
        assert any(run_id in line for line in named), out.stdout


@pytest.mark.parametrize("which", ["last", "all", "middle"])
def test_deleting_verdicts_is_caught_and_each_receipt_names_its_missing_verdict(recorded, cli, which):
    url, dialect, runs, folder = recorded
    where = {"last": "id = 3", "all": "1 = 1", "middle": "id = 2"}[which]
    _delete(url, dialect, "verdicts", where)
    out = _verify(cli, url, "--receipts", str(folder))
    assert out.returncode == 1, out.stdout + out.stderr
    gone = {"last": [runs[2]], "all": runs, "middle": [runs[1]]}[which]
    for run_id in gone:
        # The finished run without its verdict, and its receipt, are both named.
        assert f"verdicts: run {run_id} is" in out.stdout, out.stdout
        assert any(f"receipt-{run_id}.json" in line and "missing" in line for line in out.stdout.splitlines()), (
            out.stdout
        )
    if which != "middle":  # a cut-off tail: only the signed head outside the database can tell
        assert "were signed for it" in out.stdout, out.stdout


def test_a_changed_row_is_named(recorded, cli):
    url, dialect, runs, _ = recorded
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        _unguard(conn, dialect, "tool_calls")
        conn.exec_driver_sql(f"UPDATE tool_calls SET decision = 'deny' WHERE run_id = '{runs[0]}'")
    engine.dispose()
    out = _verify(cli, url)
    assert out.returncode == 1 and f"tool_calls: rows of run {runs[0]} were changed" in out.stdout, out.stdout


def test_a_run_marked_passed_against_its_verdict_is_named(recorded, cli):
    url, _, runs, _ = recorded
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"UPDATE runs SET status = 'passed' WHERE id = '{runs[1]}'")
    engine.dispose()
    out = _verify(cli, url)
    assert out.returncode == 1 and f"runs: run {runs[1]} says passed, its verdict says fail" in out.stdout, out.stdout


def test_an_older_copy_restored_is_caught(ledger_url, cli, tmp_path):
    """The database as it was a verdict ago, put back in place (a backup restored over it)."""
    with Ledger.open(ledger_url) as ledger:
        first = [_record(ledger, i) for i in range(2)]
        dialect = ledger.dialect
    snapshot = _snapshot(ledger_url, dialect, tmp_path)
    with Ledger.open(ledger_url) as ledger:
        _record(ledger, 2)
    assert _verify(cli, ledger_url).returncode == 0
    _restore(ledger_url, dialect, snapshot)
    out = _verify(cli, ledger_url)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "the ledger holds 2 verdicts, but 3 were signed for it" in out.stdout, out.stdout
    assert len(first) == 2


def _snapshot(url: str, dialect: str, tmp_path):
    if dialect == "sqlite":
        path = sa.make_url(url).database
        shutil.copyfile(path, tmp_path / "backup.db")
        return tmp_path / "backup.db"
    name = sa.make_url(url).database
    copy = f"{name}_backup"
    _admin(url, f'CREATE DATABASE "{copy}" TEMPLATE "{name}"')
    return copy


def _restore(url: str, dialect: str, snapshot) -> None:
    if dialect == "sqlite":
        shutil.copyfile(snapshot, sa.make_url(url).database)
        return
    name = sa.make_url(url).database
    _admin(url, f'DROP DATABASE "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}" TEMPLATE "{snapshot}"')


def _admin(url: str, *statements: str) -> None:
    admin = sa.create_engine(sa.make_url(url).set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        for stmt in statements:
            conn.exec_driver_sql(stmt)
    admin.dispose()
