"""assay.sandbox: where agent-written code runs. One protocol, two backends, no unsandboxed one.

from assay.sandbox import SandboxPool, SandboxSpec, open_sandbox
with SandboxPool() as pool:                       # backend from ASSAY_SANDBOX_BACKEND (auto)
    result = pool.exec(SandboxSpec(workspace=ws), ["python3", "solve.py"], timeout=30)
"""

from assay.sandbox.backends import availability, default_limits, open_sandbox, resolve_backend
from assay.sandbox.base import ExecResult, Sandbox, SandboxError, SandboxLimits, SandboxSpec
from assay.sandbox.pool import SandboxPool

__all__ = [
    "ExecResult",
    "Sandbox",
    "SandboxError",
    "SandboxLimits",
    "SandboxPool",
    "SandboxSpec",
    "availability",
    "default_limits",
    "open_sandbox",
    "resolve_backend",
]
