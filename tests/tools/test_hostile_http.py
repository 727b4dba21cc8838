"""A hostile client against `assay mcp --http`: a real server process, raw HTTP requests.

The bearer token, the loopback-Origin check and the SDK's Host check must each hold on their
own; a refused request must never reach a tool (the test asks for a file to be written and
checks the workspace). One server serves the whole module.
"""

from __future__ import annotations

import json
import subprocess
import uuid

import httpx
import pytest
from tools_helpers import ASSAY, PROTOCOL, http_server, server_env

TOKEN = "tok-" + uuid.uuid4().hex + uuid.uuid4().hex

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "hostile", "version": "0"}},
}


@pytest.fixture(scope="module")
def server(signed_home, tmp_path_factory):
    ws = tmp_path_factory.mktemp("http-ws")
    env = server_env(ASSAY_HOME=str(signed_home))
    with http_server(ws, TOKEN, "--sandbox", "bwrap", env=env) as (url, proc):
        yield url, ws, proc


def headers(token: str | None = TOKEN, **extra: str) -> dict[str, str]:
    h = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if token is not None:
        h["authorization"] = f"Bearer {token}"
    h.update({k.replace("_", "-"): v for k, v in extra.items()})
    return h


def parse(resp: httpx.Response) -> dict:
    """The JSON-RPC reply, from a JSON body or the first SSE data line."""
    if resp.headers.get("content-type", "").startswith("text/event-stream"):
        for line in resp.text.splitlines():
            if line.startswith("data:"):
                return json.loads(line[5:])
        raise AssertionError(f"no data in SSE reply: {resp.text[:300]}")
    return resp.json()


def raw_post(url: str, header_lines: list[str], body: bytes) -> int:
    """POST with header bytes exactly as given (httpx refuses e.g. a trailing space); the status."""
    import socket

    u = httpx.URL(url)
    head = [
        f"POST {u.path} HTTP/1.1",
        f"Host: {u.host}:{u.port}",
        f"Content-Length: {len(body)}",
        "Connection: close",
        *header_lines,
    ]
    with socket.create_connection((u.host, u.port), timeout=30) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
        status = sock.makefile("rb").readline()
    return int(status.split()[1])


def open_mcp_session(url: str) -> str:
    r = httpx.post(url, json=INIT, headers=headers(), timeout=30)
    assert r.status_code == 200, r.text
    sid = r.headers["mcp-session-id"]
    httpx.post(
        url,
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers=headers(**{"mcp-session-id": sid}),
        timeout=30,
    )
    return sid


def write_call(path: str) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "tools/call",
        "params": {"name": "write_file", "arguments": {"path": path, "content": "reached the tool"}},
    }


def test_the_right_token_works(server):
    url, ws, _ = server
    sid = open_mcp_session(url)
    r = httpx.post(url, json=write_call("allowed.txt"), headers=headers(**{"mcp-session-id": sid}), timeout=60)
    assert r.status_code == 200 and parse(r)["result"]["isError"] is False
    assert (ws / "allowed.txt").read_text() == "reached the tool"


BAD_AUTH = {
    "no header": None,
    "empty bearer": "Bearer",
    "wrong token": "Bearer " + "x" * len(TOKEN),
    "token prefix": "Bearer " + TOKEN[:-1],
    "token plus one": "Bearer " + TOKEN + "a",
    "upper-cased token": "Bearer " + TOKEN.upper(),
    "basic scheme": "Basic " + TOKEN,
    "token without scheme": TOKEN,
    "token in another scheme": "Token " + TOKEN,
}


@pytest.mark.parametrize("auth", list(BAD_AUTH), ids=list(BAD_AUTH))
def test_without_the_right_token_nothing_gets_through(server, auth):
    url, ws, _ = server
    sid = open_mcp_session(url)  # a live MCP session exists; only the token is missing
    h = headers(None, **{"mcp-session-id": sid})
    if BAD_AUTH[auth] is not None:
        h["authorization"] = BAD_AUTH[auth]
    target = f"bad-auth-{uuid.uuid4().hex}.txt"
    for method in ("POST", "GET", "DELETE"):
        body = json.dumps(write_call(target)) if method == "POST" else None
        r = httpx.request(method, url, content=body, headers=h, timeout=30)
        assert r.status_code == 401, (method, r.status_code, r.text[:200])
        assert r.headers.get("www-authenticate", "").startswith("Bearer")
    r = httpx.post(url, json=INIT, headers=h, timeout=30)
    assert r.status_code == 401
    assert not (ws / target).exists()


def test_a_bearer_with_only_spaces_is_refused(server):
    url, _, _ = server
    base = ["Content-Type: application/json", "Accept: application/json, text/event-stream"]
    for auth in ["Authorization: Bearer ", "Authorization: Bearer    ", "Authorization: Bearer \t"]:
        assert raw_post(url, base + [auth], json.dumps(INIT).encode()) == 401, repr(auth)
    assert raw_post(url, base + [f"Authorization: Bearer {TOKEN}"], json.dumps(INIT).encode()) == 200


BAD_ORIGINS = [
    "http://evil.example",
    "http://127.0.0.1.evil.com",
    "http://localhost.evil.com:8080",
    "http://evil.com#@127.0.0.1",
    "null",
    "file://",
    "http://0.0.0.0",
    "http://192.168.1.10",
    "http://[::ffff:7f00:1]",
    "http://127.0.0.1/evil/path",
    "javascript:alert(1)",
    "http://127.0.0.1:99999",
]


@pytest.mark.parametrize("origin", BAD_ORIGINS)
def test_a_non_loopback_origin_is_refused_even_with_the_token(server, origin):
    url, ws, _ = server
    target = f"bad-origin-{uuid.uuid4().hex}.txt"
    r = httpx.post(url, json=INIT, headers=headers(origin=origin), timeout=30)
    assert r.status_code in (400, 403), (origin, r.status_code, r.text[:200])
    sid = open_mcp_session(url)
    r = httpx.post(url, json=write_call(target), headers=headers(origin=origin, **{"mcp-session-id": sid}), timeout=30)
    assert r.status_code in (400, 403)
    assert not (ws / target).exists()


def test_two_origin_headers_one_bad_are_refused(server):
    url, _, _ = server
    port = httpx.URL(url).port
    for pair in (
        [f"http://127.0.0.1:{port}", "http://evil.example"],
        ["http://evil.example", f"http://127.0.0.1:{port}"],
    ):
        h = list(headers().items()) + [("origin", o) for o in pair]
        r = httpx.post(url, json=INIT, headers=h, timeout=30)
        assert r.status_code in (400, 403), (pair, r.status_code)


def test_a_loopback_origin_with_the_token_is_served(server):
    url, _, _ = server
    port = httpx.URL(url).port
    r = httpx.post(url, json=INIT, headers=headers(origin=f"http://127.0.0.1:{port}"), timeout=30)
    assert r.status_code == 200


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:80", "127.0.0.1.evil.com", "attacker:{port}", "localhost.evil:{port}"]
)
def test_a_foreign_host_header_is_refused_even_with_the_token(server, host):
    """DNS rebinding: a page on evil.example resolving to 127.0.0.1 sends Host: evil.example."""
    url, _, _ = server
    port = httpx.URL(url).port
    r = httpx.post(url, json=INIT, headers=headers(host=host.format(port=port)), timeout=30)
    assert r.status_code in (400, 403, 421), (host, r.status_code, r.text[:200])


def test_an_oversize_body_is_refused_before_parsing(server):
    url, ws, _ = server
    sid = open_mcp_session(url)
    call = write_call("huge.txt")
    call["params"]["arguments"]["content"] = "A" * (5 * 1024 * 1024)
    r = httpx.post(url, json=call, headers=headers(**{"mcp-session-id": sid}), timeout=60)
    assert r.status_code == 413, (r.status_code, r.text[:200])
    assert not (ws / "huge.txt").exists()
    # ... and the server is still there for honest calls.
    assert httpx.post(url, json=INIT, headers=headers(), timeout=30).status_code == 200


@pytest.mark.parametrize(
    "token", ["", "short", "sixteen chars!!", "with a space in it 1234567", "tab\tinside-the-token-xxxx"]
)
def test_the_server_refuses_to_start_with_a_weak_token(signed_home, tmp_path, token):
    """`--token ""` used to start a server that let `Authorization: Bearer` with nothing in."""
    r = subprocess.run(
        [ASSAY, "mcp", "--http", "--port", "1", "--token", token, "--workspace", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=server_env(ASSAY_HOME=str(signed_home)),
    )
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("assay: error:") and "token" in lines[0]


def test_an_empty_token_in_the_environment_means_generate_one(signed_home, tmp_path):
    """ASSAY_MCP_TOKEN='' is unset, not an empty token: the server prints a fresh one."""
    import socket
    import time

    from tools_helpers import free_port

    port = free_port()
    env = server_env(ASSAY_HOME=str(signed_home), ASSAY_MCP_TOKEN="")
    proc = subprocess.Popen(
        [ASSAY, "mcp", "--http", "--port", str(port), "--workspace", str(tmp_path), "--sandbox", "bwrap"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    try:
        line = proc.stderr.readline()
        assert "bearer token (shown once):" in line
        token = line.rsplit(":", 1)[1].strip()
        assert len(token) >= 32
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        url = f"http://127.0.0.1:{port}/mcp"
        assert httpx.post(url, json=INIT, headers=headers(None, authorization="Bearer"), timeout=30).status_code == 401
        assert httpx.post(url, json=INIT, headers=headers(token), timeout=30).status_code == 200
    finally:
        proc.terminate()
        proc.wait(20)


def test_only_loopback_hosts_may_be_bound(signed_home, tmp_path):
    r = subprocess.run(
        [ASSAY, "mcp", "--http", "--host", "0.0.0.0", "--workspace", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=server_env(ASSAY_HOME=str(signed_home)),
    )
    assert r.returncode == 2 and "loopback" in r.stderr
