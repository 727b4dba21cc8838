"""Sandbox test plumbing: every backend test runs against the real engine, once per backend."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest

from assay.sandbox import SandboxLimits, SandboxSpec, open_sandbox

sys.path.insert(0, str(Path(__file__).parent))

from sandbox_helpers import TIGHT  # noqa: E402


@functools.cache
def backend_available(name: str) -> tuple[bool, str]:
    from assay.sandbox import bwrap, docker

    return (docker if name == "docker" else bwrap).availability()


@pytest.fixture(
    params=[pytest.param("docker", marks=pytest.mark.docker), pytest.param("bwrap", marks=pytest.mark.bwrap)]
)
def backend(request, need) -> str:
    ok, detail = backend_available(request.param)
    need(ok, f"{request.param} sandbox backend unavailable: {detail}")
    return request.param


@pytest.fixture
def workspace(tmp_path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    return ws


@pytest.fixture
def make_sandbox(backend, workspace):
    """Open sandboxes in `backend` (default: the workspace, tight limits); all closed after."""
    opened = []

    def make(limits: SandboxLimits = TIGHT, ro_binds=(), ws: Path | None = None):
        sb = open_sandbox(SandboxSpec(workspace=ws or workspace, limits=limits, ro_binds=tuple(ro_binds)), backend)
        opened.append(sb)
        return sb

    yield make
    for sb in opened:
        sb.close()


@pytest.fixture
def sandbox(make_sandbox):
    return make_sandbox()
