"""The one sandbox seam: every backend implements `Sandbox`; there is no unsandboxed backend."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

KillReason = Literal["timeout", "memory", "pids", "output"]


# For processes that time code: glibc's malloc moves its mmap and trim thresholds as a process
# runs, so whether a fresh 16 MB output comes from the heap or from new zeroed pages (4096 page
# faults, several ms) depends on the heap's history. Fixed thresholds keep freed memory in the
# heap for every implementation alike, so timing measures the kernel, not the page-fault lottery.
STEADY_MALLOC = {"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=17179869184"}


class SandboxError(RuntimeError):
    """A sandbox failed (did not start, or its helper broke the protocol and it was killed).

    Distinct from `UserError`, which is bad input or a missing backend the user can fix.
    """


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float = 60.0
    memory_mb: int = 2048
    pids: int = 128
    cpus: float = 2.0
    output_bytes: int = 1 << 20
    # Runs on CPU time nobody else wants (cgroup CPU weight / Docker CPU shares at the minimum):
    # work done ahead of need, like the verifier's cache warm-up beside a running agent.
    background: bool = False


@dataclass(frozen=True)
class SandboxSpec:
    """What a sandbox may see. The workspace is the only writable host path."""

    workspace: Path
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    # Extra read-only binds (host path -> path inside), e.g. a task file or a harness folder.
    ro_binds: tuple[tuple[Path, str], ...] = ()
    # Path of the workspace inside the sandbox.
    workdir: str = "/workspace"


@dataclass
class ExecResult:
    stdout: str
    stderr: str
    exit_code: int
    duration_s: float
    killed: KillReason | None = None
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.killed is None


@runtime_checkable
class Sandbox(Protocol):
    backend: str
    spec: SandboxSpec

    def exec(
        self,
        command: list[str] | str,
        timeout: float | None = None,
        stdin: bytes | str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        """Run one command inside; the whole process tree dies at `timeout` (default: the spec's)."""
        ...

    def boost(self) -> None:
        """A background sandbox takes normal CPU priority from now on (sandbox/background.py)."""
        ...

    def close(self) -> None: ...
