"""CLI test plumbing: the runtime helpers (tests/agents) and a signed ASSAY_HOME per test."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))

from agent_helpers import sign_home  # noqa: E402


@pytest.fixture(autouse=True)
def signed_home(_isolated_home):
    sign_home()
    return _isolated_home


@pytest.fixture
def home(signed_home) -> Path:
    return signed_home
