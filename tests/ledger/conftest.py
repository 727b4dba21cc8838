"""Ledger test plumbing: a real PostgreSQL server for the session, a fresh database per test.

The PostgreSQL fixtures (`pg_server`, `pg_url`) live in the root conftest, shared by every room.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


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
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture
def cli():
    return assay_cli
