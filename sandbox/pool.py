"""A run's warm sandboxes: one per spec, started on first use, reused by every later exec.

A tool call then costs one round trip to a running sandbox instead of a container start.
Sandboxes restart themselves if a hostile command got them killed, so the pool never hands
out a dead one. `close()` at the end of the run removes them all.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from assay.sandbox.backends import open_sandbox
from assay.sandbox.base import ExecResult, Sandbox, SandboxError, SandboxSpec


class SandboxPool:
    def __init__(self, backend: str | None = None, opener: Callable[..., Sandbox] = open_sandbox):
        self.backend = backend
        self._opener = opener
        self._lock = threading.Lock()
        self._sandboxes: dict[SandboxSpec, Sandbox] = {}
        self._opening: dict[SandboxSpec, threading.Lock] = {}
        self._closed = False

    def get(self, spec: SandboxSpec) -> Sandbox:
        """The warm sandbox for `spec`, opened now if this is its first use."""
        with self._lock:
            if self._closed:
                raise SandboxError("sandbox pool is closed")
            found = self._sandboxes.get(spec)
            if found is not None:
                return found
            gate = self._opening.setdefault(spec, threading.Lock())
        # Open outside the pool lock: a cold start must not stall execs on other specs.
        with gate:
            with self._lock:
                found = self._sandboxes.get(spec)
                if found is not None:
                    return found
            sandbox = self._opener(spec, self.backend)
            with self._lock:
                if self._closed:
                    sandbox.close()
                    raise SandboxError("sandbox pool is closed")
                self._sandboxes[spec] = sandbox
                return sandbox

    def exec(
        self,
        spec: SandboxSpec,
        command: list[str] | str,
        timeout: float | None = None,
        stdin: bytes | str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        return self.get(spec).exec(command, timeout=timeout, stdin=stdin, env=env)

    def __len__(self) -> int:
        return len(self._sandboxes)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sandboxes, self._sandboxes = list(self._sandboxes.values()), {}
        errors = []
        for sandbox in sandboxes:
            try:
                sandbox.close()
            except Exception as exc:  # close every one even if one fails
                errors.append(exc)
        if errors:
            raise SandboxError(f"{len(errors)} sandbox(es) failed to close: {errors[0]}")

    def abort(self) -> None:
        """Close the pool and kill its sandboxes now, commands running in them included (a
        server stopped by a signal): `close` would wait for each running exec to end."""
        with self._lock:
            self._closed = True
            sandboxes, self._sandboxes = list(self._sandboxes.values()), {}
        for sandbox in sandboxes:
            try:
                (getattr(sandbox, "abort", None) or sandbox.close)()
            except Exception:  # kill every one even if one fails; the process is ending
                pass

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
