"""`assay mcp --http` stopped by a signal while a tool runs: the call is in the ledger as
interrupted, and the sandboxed command is killed, so the server exits at once instead of
waiting out the command's timeout in its graceful shutdown (a supervisor's SIGKILL after its
grace could otherwise come first). The stdio server's counterpart is in
tests/agents/test_budgets.py."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path

import httpx
from test_hostile_http import TOKEN, headers, open_mcp_session
from tools_helpers import http_server, ledger_path, server_env


def _rows(home, marker: str) -> list[tuple]:
    con = sqlite3.connect(f"file:{ledger_path(home)}?mode=ro", uri=True)
    try:
        return con.execute("select decision, error from tool_calls where arguments like ?", (f"%{marker}%",)).fetchall()
    finally:
        con.close()


def _running(marker: str) -> bool:
    """The sandboxed command is running (its command line carries the marker)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes():
                return True
        except OSError:
            pass
    return False


def _wait_for(check, seconds: float):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    return check()


def test_sigterm_records_the_running_call_before_a_sigkill(signed_home, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    marker = (
        f"stop-test-{os.getpid()}-{int(time.time()) % 1000}"  # low entropy: a hex id would be redacted in the ledger
    )
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {
            "name": "exec",
            "arguments": {"command": ["python3", "-c", f"import time; time.sleep(25)  # {marker}"], "timeout_s": 30},
        },
    }
    with http_server(ws, TOKEN, "--sandbox", "bwrap", env=server_env(ASSAY_HOME=str(signed_home))) as (url, proc):
        sid = open_mcp_session(url)

        def post() -> None:
            with contextlib.suppress(httpx.HTTPError):  # the server is killed under it
                httpx.post(url, json=call, headers=headers(**{"mcp-session-id": sid}), timeout=60)

        client = threading.Thread(target=post, daemon=True)
        client.start()
        assert _wait_for(lambda: _running(marker), 30), "the exec never started in the sandbox"
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        exited = _wait_for(lambda: proc.poll() is not None, 10)
        took = time.monotonic() - signalled
        proc.kill()
        rows = _rows(signed_home, marker)
        command_gone = _wait_for(lambda: not _running(marker), 5)
    assert exited, "the server was still waiting for its tool's thread 10 s after SIGTERM (the command sleeps 25 s)"
    assert command_gone, "the sandboxed command outlived the server"
    assert rows, f"the running call was not in the ledger when the server exited ({took:.1f} s after SIGTERM)"
    ((decision, error),) = rows
    assert decision == "allow"
    assert "exec was interrupted (the server was stopped by SIGTERM)" in error and "the tool may have run" in error, (
        error
    )
