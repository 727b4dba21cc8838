"""Choosing a backend and opening a sandbox in it. There is no unsandboxed backend."""

from __future__ import annotations

from assay.errors import UserError
from assay.sandbox.base import Sandbox, SandboxLimits, SandboxSpec
from assay.sandbox.resident import ResidentSandbox

BACKENDS = ("docker", "bwrap")
CHOICES = ("auto", *BACKENDS)
NONE_FIX = (
    "install either: bubblewrap (sudo apt-get install -y bubblewrap) or Docker "
    "(sudo apt-get install -y docker.io && sudo dockerd &); scripts/ensure-bwrap.sh and "
    "scripts/ensure-docker.sh do it"
)


def availability() -> dict[str, tuple[bool, str]]:
    """backend -> (usable here, one line saying why or why not)."""
    from assay.sandbox import bwrap, docker

    return {"docker": docker.availability(), "bwrap": bwrap.availability()}


def resolve_backend(backend: str | None = None) -> str:
    """'auto' (or None: the ASSAY_SANDBOX_BACKEND setting) -> docker if a daemon answers, else bwrap."""
    if backend is None:
        from assay.settings import settings

        backend = settings().sandbox_backend
    if backend not in CHOICES:
        raise UserError(f"unknown sandbox backend {backend!r}", f"use one of: {', '.join(CHOICES)}")
    if backend != "auto":
        return backend
    from assay.sandbox import bwrap, docker

    ok, docker_detail = docker.availability()
    if ok:
        return "docker"
    ok, bwrap_detail = bwrap.availability()
    if ok:
        return "bwrap"
    raise UserError(f"no sandbox backend works here ({docker_detail}; {bwrap_detail.split(';')[0]})", NONE_FIX)


def open_sandbox(spec: SandboxSpec, backend: str | None = None) -> Sandbox:
    """A started sandbox for `spec`. An explicit backend that is missing is a UserError with the fix."""
    name = resolve_backend(backend)
    # Starting is the backends' shared ResidentSandbox's business, not the protocol's: callers
    # get a sandbox that is already running.
    if name == "docker":
        from assay.sandbox.docker import DockerSandbox

        sandbox: ResidentSandbox = DockerSandbox(spec)
    else:
        from assay.sandbox.bwrap import BwrapSandbox

        sandbox = BwrapSandbox(spec)
    sandbox.start()
    return sandbox


def default_limits() -> SandboxLimits:
    """The limits the settings give (ASSAY_LIMIT_*); a capability manifest may only tighten them."""
    from assay.settings import settings

    lim = settings().limits
    return SandboxLimits(
        timeout_s=lim.timeout_s, memory_mb=lim.memory_mb, pids=lim.pids, cpus=lim.cpus, output_bytes=lim.output_bytes
    )
