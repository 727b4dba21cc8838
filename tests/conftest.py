"""Shared test plumbing.

A test that needs a backend (Docker, bubblewrap, PostgreSQL, npx) uses the `need` fixture: on a
user's machine a missing backend is a skip with a clear reason; in CI, where
ASSAY_REQUIRE_SANDBOXES=1, the same absence is a failure, so nothing passes by skipping.
"""

from __future__ import annotations

import os

import pytest

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
