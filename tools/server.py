"""assay's MCP server: every tool call from any client crosses the session's gateway.

Built on the SDK's low-level `Server` so there is exactly one tool-call seam: the SDK parses
JSON-RPC; listing and calling tools are ours, and a call can only reach a tool through the
gateway stack that the session was built with.
"""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import uuid

import anyio
import mcp.types as types
from mcp.server import Server

from assay import __version__
from assay.tools.gate_audit import record_in_flight
from assay.tools.session import Session

log = logging.getLogger(__name__)

# The client may name its call (e.g. the agent's tool-call id) so that a run resumed after a
# crash replays the same keys; the gateway then returns the recorded outcome instead of
# running the tool twice.
CALL_KEY_META = "assay/call-key"


def build_server(session: Session) -> Server:
    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[spec.mcp_tool() for spec in session.listed_tools()])

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        meta = params.meta if isinstance(params.meta, dict) else {}
        key = _call_key(session, meta.get(CALL_KEY_META))
        # The name goes to the ledger and into denial messages as given: an unknown one is
        # client text like any argument, so it is bounded and redacted the same way.
        name = session.redactor.redact(str(params.name)[:128])

        async def progress(done: float, total: float | None, message: str | None) -> None:
            try:
                await ctx.session.report_progress(done, total, message)
            except Exception:  # a client that stops listening must not fail the tool
                log.debug("progress notification dropped", exc_info=True)

        outcome = await session.call(name, params.arguments or {}, key=key, progress=progress)
        content: list[types.ContentBlock] = [types.TextContent(type="text", text=outcome.text)]
        # An error carries its message as text only. Its structured fields (denied, rule,
        # approval_id) do not match the tool's output schema, and clients on the TypeScript
        # SDK (MCP Inspector, most IDEs) validate structuredContent even on errors: they
        # would turn every denial into a protocol error instead of a refusal the model reads.
        result = types.CallToolResult(
            content=content,
            structured_content=None if outcome.is_error else outcome.structured,
            is_error=outcome.is_error,
        )
        return session.pad(result)

    return Server(
        "assay",
        version=__version__,
        instructions=session.instructions(),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _call_key(session: Session, client_key: object) -> str:
    """The ledger key of a call: the client's own (stable across a resume) or a fresh one.

    A client key that holds anything the redactor would hide is stored as its digest, which
    is just as stable across a resume and keeps the text out of the ledger."""
    if not isinstance(client_key, str) or not client_key:
        return f"s:{uuid.uuid4().hex}"
    if len(client_key) > 128 or session.redactor.find(client_key):
        return "c:sha256:" + hashlib.sha256(client_key.encode("utf-8", "surrogatepass")).hexdigest()[:40]
    return f"c:{client_key}"


async def serve_stdio(session: Session) -> None:
    from mcp.server.stdio import stdio_server

    server = build_server(session)
    async with anyio.create_task_group() as tg:
        tg.start_soon(_record_calls_on_sigterm, session)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        tg.cancel_scope.cancel()


async def _record_calls_on_sigterm(session: Session) -> None:
    """A client that closes the server waits a grace period, then sends SIGTERM; a tool still
    running then (its thread cannot be abandoned) would be missing from the ledger. Record each
    call in flight as interrupted, kill the sandboxes (a docker container would outlive the
    process), then die of the signal as before."""
    with anyio.open_signal_receiver(signal.SIGTERM) as signals:
        async for _ in signals:
            record_stopped_calls("SIGTERM", session)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return


def record_stopped_calls(signal_name: str, session: Session) -> None:
    """Record the calls still running as interrupted by the signal that stops the server (stdio
    and HTTP alike), then kill the session's sandboxes with what runs in them, so the server
    does not wait out a command's timeout before it exits; call it from the event loop, not
    inside a signal handler."""
    n = record_in_flight(f"the server was stopped by {signal_name}")
    if n:
        log.warning("%s: recorded %d call(s) still running as interrupted", signal_name, n)
    session.pool.abort()
