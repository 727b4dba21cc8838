"""Helpers for the gateway tests: signed homes, real `assay mcp` processes, raw wire peers.

Nothing here fakes a part of assay: servers are `assay mcp` subprocesses (or the in-process
server the SDK's own client talks to), sandboxes are the real backends, ledgers are real
SQLite files that the tests read back byte for byte.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import queue
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
ASSAY = str(Path(sys.executable).with_name("assay"))
PROTOCOL = "2025-06-18"
# Seconds a client waits for `assay mcp` to start and answer initialize. pydantic-ai's default
# is 5, which a loaded two-core host running docker and other suites can exceed.
INIT_TIMEOUT = 60


# -- keys and manifests ----------------------------------------------------------------------


def sign_home() -> None:
    """In the current ASSAY_HOME: a signing key (trusted) and every shipped manifest signed."""
    from assay.policies.manifest import SHIPPED_DIR
    from assay.policies.signing import keygen, sign_manifest
    from assay.settings import settings

    settings.cache_clear()
    keygen(if_missing=True)
    for path in sorted(SHIPPED_DIR.glob("*.toml")):
        sign_manifest(path, to_store=True)
    settings.cache_clear()


def signed_manifest(folder: Path, text: str, name: str = "test-role.toml") -> Path:
    """A manifest file written from `text` and signed with the home's key (MANIFEST.sig)."""
    from assay.policies.signing import sign_manifest

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    sign_manifest(path)
    return path


# -- sessions in this process ------------------------------------------------------------------


@contextlib.contextmanager
def open_session(workspace: Path, **cfg: Any):
    from assay.tools.session import Session, SessionConfig

    cfg.setdefault("sandbox_backend", "bwrap")
    cfg.setdefault("manifest", "kernel-agent" if cfg.get("kind") == "kernel" else "workspace-agent")
    s = Session(SessionConfig(workspace=workspace, **cfg))
    try:
        yield s
    finally:
        s.close()


@contextlib.asynccontextmanager
async def sdk_client(session):
    """The official SDK client, connected in memory to the server built for `session`."""
    from mcp.client import Client

    from assay.tools.server import build_server

    async with Client(build_server(session)) as client:
        yield client


# -- subprocess servers ----------------------------------------------------------------------


def server_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Line:
    at: float
    raw: bytes

    @property
    def obj(self) -> Any:
        return json.loads(self.raw)


class StdioWire:
    """A raw JSON-RPC peer of an `assay mcp` subprocess: every line the server writes is kept
    with the time it arrived, exactly as written (the size trace is measured on these bytes)."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None):
        self.proc = subprocess.Popen(
            [ASSAY, "mcp", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env or server_env(),
        )
        self._lines: queue.Queue[Line | None] = queue.Queue()
        self.stderr = b""
        self.seen: list[Line] = []
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()
        self._next_id = 1

    def _pump(self) -> None:
        for raw in iter(self.proc.stdout.readline, b""):
            self._lines.put(Line(time.monotonic(), raw))
        self._lines.put(None)

    def _pump_err(self) -> None:
        for raw in iter(self.proc.stderr.readline, b""):
            self.stderr += raw

    def send(self, data: bytes | dict | list) -> float:
        if not isinstance(data, bytes):
            data = json.dumps(data).encode()
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()
        return time.monotonic()

    def read(self, timeout: float) -> Line | None:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            return None
        if line is not None:
            self.seen.append(line)
        return line

    def request(
        self, method: str, params: dict | None = None, *, timeout: float = 60, id: Any = None
    ) -> tuple[Line, float]:
        """Send one request; the reply line (notifications in between are skipped) and the
        seconds from writing the request to reading the reply."""
        if id is None:
            id = self._next_id
            self._next_id += 1
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            msg["params"] = params
        sent = self.send(msg)
        line = self._read_until_id(id, sent + timeout)
        if line is None:
            raise TimeoutError(f"no reply to {method} id={id} within {timeout} s; stderr: {self.stderr[-2000:]!r}")
        return line, line.at - sent

    def wait_for_id(self, id: Any, timeout: float) -> Line | None:
        """The reply for `id`, already seen or still to come: requests run concurrently, so a
        slow call's answer may follow a ping sent after it."""
        for line in self.seen:
            with contextlib.suppress(ValueError):
                if isinstance(line.obj, dict) and line.obj.get("id") == id:
                    return line
        return self._read_until_id(id, time.monotonic() + timeout)

    def _read_until_id(self, id: Any, deadline: float) -> Line | None:
        """Read lines (keeping them in `seen`) until one answers `id`; None at the deadline."""
        while (left := deadline - time.monotonic()) > 0:
            line = self.read(left)
            if line is None:
                return None
            with contextlib.suppress(ValueError):
                if isinstance(line.obj, dict) and line.obj.get("id") == id:
                    return line
        return None

    def initialize(self) -> dict:
        line, _ = self.request(
            "initialize",
            {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "assay-tests", "version": "0"}},
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return line.obj

    def call(self, name: str, arguments: Any, **kw: Any) -> tuple[Line, float]:
        return self.request("tools/call", {"name": name, "arguments": arguments}, **kw)

    def close(self, timeout: float = 20) -> int:
        with contextlib.suppress(BrokenPipeError, OSError):
            self.proc.stdin.close()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise

    def __enter__(self) -> StdioWire:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(Exception):
                self.close()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@contextlib.contextmanager
def http_server(
    workspace: Path, token: str, *args: str, env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen]]:
    """`assay mcp --http` on a free loopback port, token given through ASSAY_MCP_TOKEN."""
    port = free_port()
    env = dict(env or server_env())
    env["ASSAY_MCP_TOKEN"] = token
    proc = subprocess.Popen(
        [ASSAY, "mcp", "--http", "--port", str(port), "--workspace", str(workspace), *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    deadline = time.monotonic() + 90
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"assay mcp --http exited {proc.returncode}: {proc.stderr.read().decode()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            break
        if time.monotonic() > deadline:
            proc.kill()
            raise TimeoutError("assay mcp --http did not listen within 90 s")
        time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


# -- the ledger, read back -------------------------------------------------------------------


def ledger_path(home: Path) -> Path:
    return home / "ledger.db"


def ledger_bytes(home: Path) -> bytes:
    """Every byte of the SQLite ledger, its WAL and shared memory (free pages included)."""
    out = b""
    for suffix in ("", "-wal", "-shm", "-journal"):
        p = Path(str(ledger_path(home)) + suffix)
        if p.exists():
            out += p.read_bytes()
    return out


def ledger_cells(home: Path) -> list[tuple[str, str, str]]:
    """(table, column, value as text) for every cell of every table of the ledger."""
    con = sqlite3.connect(f"file:{ledger_path(home)}?mode=ro", uri=True)
    try:
        out = []
        tables = [r[0] for r in con.execute("select name from sqlite_master where type='table'")]
        for t in tables:
            cur = con.execute(f'select * from "{t}"')
            cols = [d[0] for d in cur.description]
            for row in cur:
                for c, v in zip(cols, row, strict=False):
                    if v is None:
                        continue
                    out.append((t, c, v.decode("latin-1") if isinstance(v, bytes) else str(v)))
        return out
    finally:
        con.close()


def run_rows(home: Path, run_id: str) -> tuple[list, list]:
    """(tool_calls, policy_decisions) of one run, read through the ledger API."""
    from assay.ledger import Ledger

    with Ledger.open(f"sqlite:///{ledger_path(home)}") as led:
        return led.tool_calls(run_id), led.policy_decisions(run_id)


# -- third-party clients -----------------------------------------------------------------------


def inspector_cli() -> Path | None:
    """MCP Inspector's CLI as the Makefile installs it (ASSAY_MCP_INSPECTOR overrides)."""
    given = os.environ.get("ASSAY_MCP_INSPECTOR")
    candidates = [Path(given)] if given else []
    candidates.append(REPO / ".cache" / "npm" / "node_modules" / ".bin" / "mcp-inspector")
    for c in candidates:
        if c.exists() and shutil.which("node"):
            return c
    return None


@functools.cache
def inspector_has_headers(cli: Path) -> bool:
    """Whether this Inspector can send HTTP headers (`--header`, from 0.17 on)."""
    out = subprocess.run([str(cli), "--help"], capture_output=True, text=True, timeout=120)
    return "--header" in out.stdout + out.stderr


def run_inspector(
    cli: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(cli), "--cli", *args], capture_output=True, text=True, timeout=timeout, env=env or server_env()
    )


def last_json(text: str) -> Any:
    """The JSON document the Inspector CLI prints (it may log lines before it)."""
    start = text.index("{")
    return json.loads(text[start:])
