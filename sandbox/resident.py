"""The host half shared by both backends: one resident helper per sandbox, one round trip per exec.

A backend only has to launch the helper inside its isolation and hand back a `Channel` to
it (bwrap: pipes; docker: the attach socket) plus the sandbox's cgroup counters. This class
does the rest: the request, the host's own deadline (the helper is untrusted, so if it does
not answer by timeout + BACKSTOP_S the whole sandbox is killed), and the kill reason, which
for memory and pids comes from kernel counters the host reads itself.
"""

from __future__ import annotations

import base64
import select
import threading
import time
from typing import Protocol

from assay.sandbox.base import ExecResult, KillReason, SandboxError, SandboxSpec
from assay.sandbox.cgroups import Counters
from assay.sandbox.protocol import (
    FrameDecoder,
    ProtocolError,
    encode,
    max_reply_bytes,
    parse_ready,
    parse_reply,
)
from assay.sandbox.toolchain import merge_env

BACKSTOP_S = 0.6
POLL_S = 0.05
STARTUP_S = 30.0


class Channel(Protocol):
    def fileno(self) -> int: ...

    def send(self, data: bytes) -> None: ...

    def recv(self) -> bytes | None:
        """Helper bytes available now (maybe b""); None once the helper is gone."""
        ...

    def close(self) -> None: ...


class _NoAnswer(Exception):
    pass


class ResidentSandbox:
    backend = "resident"

    def __init__(self, spec: SandboxSpec):
        self.spec = spec
        self._lock = threading.Lock()
        self._chan: Channel | None = None
        self._decoder: FrameDecoder | None = None
        self._counters: Counters | None = None
        self._next_id = 1
        self._closed = False
        self._env: dict[str, str] = {}
        self.starts = 0
        # Whether the helper could make itself non-dumpable (unptraceable by commands).
        self.hardened = False

    # Backend hooks ------------------------------------------------------------------

    def _launch(self) -> tuple[Channel, Counters | None, dict[str, str]]:
        """Start the helper isolated; return its channel, cgroup counters, base env."""
        raise NotImplementedError

    def _destroy(self) -> None:
        """Kill everything of this sandbox and free its resources; idempotent."""
        raise NotImplementedError

    def _diagnostics(self) -> str:
        return ""

    def _before_exec(self) -> None:
        """Runs before each exec, while no command of this sandbox is alive."""

    # Lifecycle ----------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._chan is not None

    def start(self) -> None:
        with self._lock:
            self._ensure_started()

    def _ensure_started(self) -> None:
        if self._closed:
            raise SandboxError(f"{self.backend} sandbox is closed")
        if self._chan is not None:
            return
        chan, counters, env = self._launch()
        self._chan, self._counters, self._env = chan, counters, env
        self._decoder = FrameDecoder(4096)
        try:
            greeting = self._read(time.monotonic() + STARTUP_S)
            self.hardened = parse_ready(greeting)
        except (_NoAnswer, EOFError, OSError, ProtocolError) as exc:
            why = self._diagnostics() or str(exc) or type(exc).__name__
            self._kill()
            raise SandboxError(f"{self.backend} sandbox did not start: {why}") from None
        self.starts += 1

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._kill()

    def abort(self) -> None:
        """Kill everything of this sandbox now, from any thread, even while an exec waits on its
        reply (`close` waits for that exec to end: up to its timeout). The waiting exec then
        fails as if the sandbox had died, and the sandbox stays closed."""
        self._closed = True
        self._destroy()

    def _kill(self) -> None:
        chan, self._chan = self._chan, None
        if chan is not None:
            try:
                chan.close()
            except OSError:
                pass
        self._destroy()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # Exec ---------------------------------------------------------------------------

    def exec(
        self,
        command: list[str] | str,
        timeout: float | None = None,
        stdin: bytes | str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        argv = _argv(command)
        timeout = float(self.spec.limits.timeout_s if timeout is None else timeout)
        if not timeout > 0:
            raise ValueError("timeout must be positive")
        data = stdin.encode() if isinstance(stdin, str) else (stdin or b"")
        with self._lock:
            self._ensure_started()
            self._before_exec()
            assert self._chan is not None and self._decoder is not None
            cap = self.spec.limits.output_bytes
            req_id, self._next_id = self._next_id, self._next_id + 1
            request = {
                "op": "exec",
                "id": req_id,
                "argv": argv,
                "env": merge_env(self._env, env),
                "cwd": self.spec.workdir,
                "timeout": timeout,
                "output_bytes": cap,
                "stdin": base64.b64encode(data).decode(),
            }
            self._decoder.max_frame = max_reply_bytes(cap)
            base = self._counters.snapshot() if self._counters else None
            started = time.monotonic()
            host_reason = None
            try:
                self._chan.send(encode(request))
                obj, host_reason = self._await_reply(started + timeout + BACKSTOP_S, base)
                reply = parse_reply(obj, req_id, cap)
            except _NoAnswer:
                self._kill()
                return ExecResult(
                    "",
                    "sandbox: no answer by the deadline; sandbox killed\n",
                    -9,
                    time.monotonic() - started,
                    killed="timeout",
                )
            except (EOFError, OSError):
                reason = self._counter_reason(base) or host_reason
                self._kill()
                if reason is None:
                    raise SandboxError(f"{self.backend} sandbox died during exec: {self._diagnostics()}") from None
                return ExecResult(
                    "",
                    f"sandbox: killed ({reason}); sandbox restarted\n",
                    -9,
                    time.monotonic() - started,
                    killed=reason,
                )
            except ProtocolError as exc:
                self._kill()
                raise SandboxError(f"{self.backend} sandbox killed: {exc}") from None
            duration = time.monotonic() - started
            killed = host_reason or self._counter_reason(base) or _kill_reason(reply.killed)
            if killed is None and self._counters is None and reply.exit_code == -9:
                # Without kernel counters an unexplained SIGKILL is most likely the OOM killer.
                killed = "memory"
            return ExecResult(
                stdout=reply.stdout.decode("utf-8", errors="replace"),
                stderr=reply.stderr.decode("utf-8", errors="replace"),
                exit_code=reply.exit_code,
                duration_s=duration,
                killed=killed,
                truncated=reply.truncated,
            )

    def _counter_reason(self, base: tuple[int, int] | None) -> KillReason | None:
        if base is None or self._counters is None:
            return None
        oom, refused = self._counters.snapshot()
        if oom > base[0]:
            return "memory"
        if refused > base[1]:
            return "pids"
        return None

    def _read(self, deadline: float) -> dict:
        obj, _ = self._await_reply(deadline, None)
        return obj

    def _await_reply(self, deadline: float, base: tuple[int, int] | None) -> tuple[dict, KillReason | None]:
        chan, decoder = self._chan, self._decoder
        assert chan is not None and decoder is not None
        host_reason = None
        while True:
            obj = decoder.pop()
            if obj is not None:
                return obj, host_reason
            now = time.monotonic()
            if now >= deadline:
                raise _NoAnswer()
            wait = deadline - now
            if base is not None:
                wait = min(wait, POLL_S)
            ready, _, _ = select.select([chan], [], [], wait)
            if ready:
                data = chan.recv()
                if data is None:
                    raise EOFError()
                decoder.feed(data)
            if base is not None and host_reason is None:
                host_reason = self._counter_reason(base)
                if host_reason:
                    # A fork bomb or memory hog: stop the whole command now, not at its timeout.
                    chan.send(encode({"op": "kill", "reason": host_reason}))


_REASONS: dict[str, KillReason] = {"timeout": "timeout", "memory": "memory", "pids": "pids", "output": "output"}


def _kill_reason(said: str | None) -> KillReason | None:
    """The helper's word for why it killed a command, as one of ours (anything else: none)."""
    return _REASONS.get(said) if said else None


def _argv(command: list[str] | str) -> list[str]:
    if isinstance(command, str):
        if not command.strip():
            raise ValueError("empty command")
        return ["/bin/sh", "-c", command]
    argv = list(command)
    if not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError("command must be a non-empty list of strings")
    if any("\0" in a for a in argv):
        raise ValueError("command arguments may not contain NUL bytes")
    return argv
