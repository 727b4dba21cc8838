"""`assay mcp`: serve assay's tools over MCP, every call through the run's gateway."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import typer

from assay.errors import UserError


def mcp(
    workspace: Path = typer.Option(Path("."), "--workspace", "-w", help="the only folder tools may touch"),
    manifest: str | None = typer.Option(
        None,
        "--manifest",
        "-m",
        help="signed manifest: a path or a shipped role name (default: the kind's own; without --kind, workspace-agent)",
    ),
    role: str | None = typer.Option(None, "--role", help="the role the manifest must be for"),
    run: str | None = typer.Option(None, "--run", help="attach to this run instead of creating one"),
    kind: str | None = typer.Option(None, "--kind", help="job kind whose tools to expose, e.g. kernel"),
    http: bool = typer.Option(False, "--http", help="serve streamable HTTP instead of stdio"),
    host: str = typer.Option("127.0.0.1", "--host", help="HTTP bind address (loopback only)"),
    port: int = typer.Option(8765, "--port", min=1, max=65535),
    token: str | None = typer.Option(
        None, "--token", envvar="ASSAY_MCP_TOKEN", help="bearer token; generated and printed once if omitted"
    ),
    padding: bool = typer.Option(False, "--padding/--no-padding", help="pad result sizes and timings (trace padding)"),
    pad_bucket: int | None = typer.Option(
        None, "--pad-bucket", help="with --padding: pad results to multiples of this many bytes (default 4096)"
    ),
    pad_quantum: float | None = typer.Option(
        None, "--pad-quantum", help="with --padding: release results on multiples of this many seconds (default 0.25)"
    ),
    pad_ceiling: list[str] = typer.Option(
        [],
        "--pad-ceiling",
        help="with --padding: TOOL=SECONDS, release that tool's results at this fixed time (repeatable)",
    ),
    pad_default_ceiling: float | None = typer.Option(
        None, "--pad-default-ceiling", help="with --padding: fixed release time for tools without their own ceiling"
    ),
    sandbox: str | None = typer.Option(None, "--sandbox", help="auto | docker | bwrap"),
) -> None:
    """Serve assay's gateway over MCP (stdio by default; --http for streamable HTTP)."""
    from assay.tools.session import Session, SessionConfig

    if http and host not in ("127.0.0.1", "localhost", "::1"):
        raise UserError(
            f"--host {host} is not a loopback address",
            "serve on 127.0.0.1; put a reverse proxy with its own auth in front for remote use",
        )
    if http and token is not None:
        from assay.tools.http import check_token

        check_token(token)
    policy = _padding_policy(padding, pad_bucket, pad_quantum, pad_ceiling, pad_default_ceiling)
    if manifest is None:
        manifest = _default_manifest(kind)
    session = Session(
        SessionConfig(
            workspace=workspace,
            manifest=manifest,
            role=role,
            run_id=run,
            kind=kind,
            padding=policy,
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


# A client served without a job kind gets the tools every kind shares, under this role.
KINDLESS_MANIFEST = "workspace-agent"


def _default_manifest(kind: str | None) -> str:
    if kind is None:
        return KINDLESS_MANIFEST
    from assay.agents.kinds import agent_kind

    return agent_kind(kind).default_manifest


def _padding_policy(
    enabled: bool, bucket: int | None, quantum: float | None, ceilings: list[str], default_ceiling: float | None
):
    """PaddingPolicy from the --pad-* options; a mistake is one line and exit 2."""
    import pydantic

    from assay.policies.padding import PaddingPolicy

    given = {"size_bucket": bucket, "time_quantum_s": quantum, "default_ceiling_s": default_ceiling}
    given = {k: v for k, v in given.items() if v is not None}
    if (given or ceilings) and not enabled:
        raise UserError("--pad-* options only take effect with --padding", "add --padding, or drop the --pad-* options")
    per_tool: dict[str, float] = {}
    for item in ceilings:
        tool, sep, seconds = item.partition("=")
        try:
            if not sep or not tool.strip():
                raise ValueError
            per_tool[tool.strip()] = float(seconds)
        except ValueError:
            raise UserError(f"--pad-ceiling {item!r} is not TOOL=SECONDS", "e.g. --pad-ceiling exec=2.5") from None
    try:
        return PaddingPolicy(enabled=enabled, ceilings_s=per_tool, **given)
    except pydantic.ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err["loc"]) or "padding"
        raise UserError(
            f"padding option {where}: {err['msg']}", "see assay mcp --help for the --pad-* options"
        ) from None
