"""The agent's only way to act: assay's own MCP server, started as a separate process.

The gateway therefore runs outside the agent's process: a brain, however hostile, holds
nothing but an MCP client whose every call is decided, redacted, padded and recorded there.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic_ai.mcp import MCPToolset

CALL_KEY_META = "assay/call-key"  # the server's name for it (tools/server.py); a plain string on the wire

# What the server process may inherit: enough to find Python, its packages and ASSAY_*.
_PASS_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "PYTHONPATH", "VIRTUAL_ENV", "TMPDIR")


def server_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _PASS_ENV or k.startswith("ASSAY_")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_toolset(
    run_id: str,
    workspace: Path,
    manifest: str,
    kind: str,
    *,
    padding: dict[str, Any] | None = None,
    sandbox: str | None = None,
    step: Callable[[], str] | None = None,
) -> MCPToolset:
    from fastmcp.client.transports import StdioTransport

    args = [
        "-P",
        "-m",
        "assay",
        "mcp",
        "--run",
        run_id,
        "--workspace",
        str(workspace),
        "--manifest",
        manifest,
        "--kind",
        kind,
    ]
    if sandbox:
        args += ["--sandbox", sandbox]
    if padding and padding.get("enabled"):
        args += ["--padding"]
    transport = StdioTransport(sys.executable, args, env=server_env(), keep_alive=True)

    async def keyed(ctx, call_tool, name: str, tool_args: dict[str, Any]):
        # The call key is the model's tool-call id within this step: a resumed run replays the
        # same ids, and the gateway answers from the ledger instead of running the tool twice.
        prefix = step() if step else "0"
        return await call_tool(name, tool_args, metadata={CALL_KEY_META: f"{prefix}:{ctx.tool_call_id}"})

    return MCPToolset(
        transport,
        id="assay",
        tool_error_behavior="failed",
        process_tool_call=keyed,
        init_timeout=120,
        read_timeout=3600,
    )
