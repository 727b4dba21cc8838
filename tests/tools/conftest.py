"""Gateway test plumbing: one signed ASSAY_HOME per module, real servers, real clients.

Keys and signatures are made once per test module (signing is cheap, but subprocess servers
read them, and a module's servers share one trust store); each test still gets its own
workspace, and each server session its own run in the module's ledger.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from tools_helpers import sign_home  # noqa: E402


@pytest.fixture(scope="module")
def signed_home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("assay-home-signed")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ASSAY_HOME", str(home))
        mp.delenv("ASSAY_LEDGER_URL", raising=False)
        sign_home()
    return home


@pytest.fixture(autouse=True)
def _isolated_home(signed_home, monkeypatch):
    """Overrides the suite's per-test home: the module's signed one (its own ledger, its keys)."""
    monkeypatch.setenv("ASSAY_HOME", str(signed_home))
    monkeypatch.delenv("ASSAY_LEDGER_URL", raising=False)
    monkeypatch.delenv("ASSAY_ALLOW_UNSIGNED_MANIFESTS", raising=False)
    from assay.settings import settings

    settings.cache_clear()
    yield signed_home
    settings.cache_clear()


@pytest.fixture(autouse=True)
def _bwrap_for_the_gateway(request, need):
    """Everything but the wrapper unit tests runs tools in the real bwrap sandbox."""
    if request.module.__name__.rsplit(".", 1)[-1].startswith("test_gate_"):
        return
    ok, why = _bwrap()
    need(ok, f"bubblewrap sandbox unavailable: {why}")


@functools.lru_cache(maxsize=1)
def _bwrap() -> tuple[bool, str]:
    from assay.sandbox import bwrap

    return bwrap.availability()


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def workspace(tmp_path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    return ws


@pytest.fixture
def run_workspace() -> Path:
    """A run's own workspace, where the runner puts it (ASSAY_HOME/runs/RUN/workspace): a session
    on it works on it directly, with no redacted view between (the runner staged it through the
    redactor already). The tools' own confinement is tested here, on files the test plants."""
    import secrets

    from assay.settings import settings

    ws = settings().home / "runs" / f"test-{secrets.token_hex(4)}" / "workspace"
    ws.mkdir(parents=True)
    return ws
