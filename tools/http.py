"""`assay mcp --http`: streamable HTTP on loopback, behind a bearer token and an Origin check.

The SDK's own DNS-rebinding guard checks Host and Origin; this layer adds the token (compared
in constant time) and refuses any Origin that is not a loopback address, before a request
reaches the MCP session manager.
"""

from __future__ import annotations

import hmac
import secrets
import signal
from urllib.parse import urlsplit

from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from assay.errors import UserError
from assay.tools.server import build_server, record_stopped_calls
from assay.tools.session import Session

LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}
MAX_BODY = 4 * 1024 * 1024
# A given token must be at least this long: `--token ""` (or a short one) would make the
# bearer check pass for `Authorization: Bearer` with nothing, or fall to a guess.
MIN_TOKEN_CHARS = 16


def new_token() -> str:
    return secrets.token_urlsafe(32)


def check_token(token: str) -> str:
    """The token, if it is one a client cannot guess or send by accident; UserError otherwise."""
    if (
        len(token) < MIN_TOKEN_CHARS
        or not token.isascii()
        or not token.isprintable()
        or any(c.isspace() for c in token)
    ):
        raise UserError(
            f"the bearer token must be at least {MIN_TOKEN_CHARS} printable ASCII characters without spaces",
            "omit --token (and ASSAY_MCP_TOKEN) to have one generated, or give a long random one",
        )
    return token


def _loopback_origin(origin: str) -> bool:
    try:
        parts = urlsplit(origin)
        port_ok = parts.port is None or 0 < parts.port < 65536
    except ValueError:
        return False
    return (
        parts.scheme in ("http", "https")
        and (parts.hostname or "") in LOOPBACK_HOSTS
        and port_ok
        and not parts.path.strip("/")
    )


class BearerGuard:
    def __init__(self, app: ASGIApp, token: str):
        self.app, self.token = app, check_token(token).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        origin = headers.get("origin")
        if origin is not None and not _loopback_origin(origin):
            return await _refuse(send, 403, "origin not allowed: only loopback origins may call this server")
        auth = headers.get("authorization", "")
        scheme, _, given = auth.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.token):
            return await _refuse(
                send, 401, "missing or wrong bearer token", {"www-authenticate": 'Bearer realm="assay"'}
            )
        return await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, text: str, extra: dict[str, str] | None = None) -> None:
    body = text.encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def http_app(session: Session, token: str, host: str = "127.0.0.1") -> ASGIApp:
    check_token(token)
    server = build_server(session)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )
    app = server.streamable_http_app(transport_security=security, host=host, max_request_body_size=MAX_BODY)
    return BearerGuard(app, token)


async def serve_http(session: Session, token: str, host: str, port: int) -> None:
    import uvicorn

    class Server(uvicorn.Server):
        """On SIGTERM or SIGINT uvicorn shuts down gracefully, which waits for a tool's thread to
        end (up to the exec's timeout) before the call is cancelled and recorded: a SIGKILL that
        follows the signal within that wait (a supervisor's grace) would leave the call out of the
        ledger. Record the calls in flight as interrupted first, from the loop, where the ledger
        is not in the middle of another write as it may be inside a signal handler; then kill the
        sandboxes, so the tool's thread ends at once and the server exits without waiting."""

        stopped_by: str | None = None

        def handle_exit(self, sig, frame) -> None:
            self.stopped_by = self.stopped_by or signal.Signals(sig).name
            super().handle_exit(sig, frame)

        async def shutdown(self, sockets=None) -> None:
            if self.stopped_by is not None:
                record_stopped_calls(self.stopped_by, session)
            await super().shutdown(sockets)

    config = uvicorn.Config(http_app(session, token, host), host=host, port=port, log_level="warning", lifespan="on")
    await Server(config).serve()
