"""Ledger test plumbing: a real PostgreSQL server for the session, a fresh database per test.

ASSAY_TEST_PG_URL (a login allowed to CREATE DATABASE) points the tests at a server someone
already runs; otherwise the session starts a throwaway one with assay.ledger.pgtest. Other
rooms can copy these two fixtures, or the root conftest can hoist them.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from assay.ledger import pgtest


@pytest.fixture(scope="session")
def pg_server():
    """(server URL, None) or (None, why there is no server)."""
    url = os.environ.get("ASSAY_TEST_PG_URL")
    if url:
        yield url, None
        return
    if pgtest.find_bindir() is None:
        yield None, "PostgreSQL server binaries not found: apt-get install postgresql"
        return
    try:
        server = pgtest.start()
    except pgtest.PgTestError as exc:
        yield None, f"could not start a throwaway PostgreSQL server: {exc}"
        return
    try:
        yield server.url, None
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server, need):
    """A fresh, empty PostgreSQL database; skip here, fail in CI, when there is no server."""
    url, reason = pg_server
    need(url is not None, reason)
    return pgtest.create_database(url)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def ledger_url(request, tmp_path):
    """The same test against both databases the ledger supports."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.db'}"
    return request.getfixturevalue("pg_url")


def assay_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run the real `assay` command in a child process, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "assay", *args],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})},
    )


@pytest.fixture
def cli():
    return assay_cli
