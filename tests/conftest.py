"""Shared test plumbing.

A test that needs a backend (Docker, bubblewrap, PostgreSQL, npx) uses the `need` fixture: on a
user's machine a missing backend is a skip with a clear reason; in CI, where
ASSAY_REQUIRE_SANDBOXES=1, the same absence is a failure, so nothing passes by skipping.
"""

from __future__ import annotations

import os
import sys

import pytest

# `python -m pytest` in the checkout puts it first on sys.path, where the rooms (kernels/, tools/,
# ...) shadow real distributions of those names (transformers imports huggingface's `kernels`).
# The tests import assay as installed, like its users (`make test` runs `python -P`).
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.getcwd()]

from assay.ledger import pgtest

REQUIRED = os.environ.get("ASSAY_REQUIRE_SANDBOXES") == "1"


def _need(available: bool, reason: str) -> None:
    if available:
        return
    if REQUIRED:
        pytest.fail(f"ASSAY_REQUIRE_SANDBOXES=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def need():
    """`need(available, reason)`: skip here, fail in CI."""
    return _need


@pytest.fixture(scope="session")
def harness_script():
    """`harness_script("verifiers/kernel/harness/supervisor.py")`: a script that runs inside sandboxes,
    outside the assay package (standard library and torch only), loaded from the checkout as a
    module of its own so its functions can be tested in this process."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]

    def load(relative: str):
        path = root / relative
        spec = importlib.util.spec_from_file_location("assay_under_test_" + path.stem, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    return load


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    """Every test gets its own ASSAY_HOME so no test reads another's ledger or keys."""
    home = tmp_path_factory.mktemp("assay-home")
    monkeypatch.setenv("ASSAY_HOME", str(home))
    monkeypatch.delenv("ASSAY_LEDGER_URL", raising=False)
    from assay.settings import settings

    settings.cache_clear()
    yield home
    settings.cache_clear()


# --- PostgreSQL: a throwaway server per test session, a fresh database per test -------------
# ASSAY_TEST_PG_URL (a login allowed to CREATE DATABASE) points the tests at a server someone
# already runs; otherwise the session starts its own with assay.ledger.pgtest.


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
