"""Runtime test plumbing: every test gets its own ASSAY_HOME (root conftest), signed here, as an
operator would with `assay policy keygen --if-missing` and `assay policy sign --all-shipped`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from agent_helpers import sign_home  # noqa: E402


@pytest.fixture(autouse=True)
def signed_home(_isolated_home):
    sign_home()
    return _isolated_home


@pytest.fixture
def home(signed_home) -> Path:
    return signed_home
