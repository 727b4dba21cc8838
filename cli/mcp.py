"""`assay mcp`: serve assay's tools over MCP, every call through the run's gateway."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import typer

from assay.errors import UserError

def mcp(
    workspace: Path = typer.Option(Path("."), "--workspace", "-w", help="the only folder tools may touch"),
    manifest: str = typer.Option("kernel-agent", "--manifest", "-m", help="signed manifest: a path or a shipped role name"),
    role: str | None = typer.Option(None, "--role", help="the role the manifest must be for"),
    run: str | None = typer.Option(None, "--run", help="attach to this run instead of creating one"),
    kind: str | None = typer.Option(None, "--kind", help="job kind whose tools to expose, e.g. kernel"),
    http: bool = typer.Option(False, "--http", help="serve streamable HTTP instead of stdio"),
    host: str = typer.Option("127.0.0.1", "--host", help="HTTP bind address (loopback only)"),
    port: int = typer.Option(8765, "--port", min=1, max=65535),
    token: str | None = typer.Option(None, "--token", envvar="ASSAY_MCP_TOKEN", help="bearer token; generated and printed once if omitted"),
    padding: bool = typer.Option(False, "--padding/--no-padding", help="pad result sizes and timings (trace padding)"),
    sandbox: str | None = typer.Option(None, "--sandbox", help="auto | docker | bwrap"),
) -> None:
    """Serve assay's gateway over MCP (stdio by default; --http for streamable HTTP)."""
    from assay.policies.padding import PaddingPolicy
    from assay.tools.session import Session, SessionConfig

    if http and host not in ("127.0.0.1", "localhost", "::1"):
        raise UserError(f"--host {host} is not a loopback address", "serve on 127.0.0.1; put a reverse proxy with its own auth in front for remote use")
    session = Session(
        SessionConfig(
            workspace=workspace,
            manifest=manifest,
            role=role,
            run_id=run,
            kind=kind,
            padding=PaddingPolicy(enabled=padding),
            sandbox_backend=sandbox,
        )
    )
    if session.warning:
        print(f"assay: WARNING: {session.warning}", file=sys.stderr)
    try:
        if http:
            from assay.tools.http import new_token, serve_http

            if token is None:
                token = new_token()
                print(f"assay mcp: bearer token (shown once): {token}", file=sys.stderr)
            print(f"assay mcp: run {session.run_id} on http://{host}:{port}/mcp", file=sys.stderr)
            anyio.run(serve_http, session, token, host, port)
        else:
            from assay.tools.server import serve_stdio

            anyio.run(serve_stdio, session)
    finally:
        session.close()
