"""Canaries: secret values planted where a real secret would be, hunted for everywhere the
untrusted side can look.

Planted in the host environment before the session starts (as AWS/GitHub/service
credentials), in files inside the workspace, and in tool output (a program in the real
sandbox reads a canary from a file and prints it plain, base64, hex, URL-encoded, wrapped
across lines, and in a traceback). Only placeholders may reach the client (text content,
structured content, error messages), and the ledger may hold no canary in any of those forms
anywhere (every byte of the SQLite file and its WAL, and every cell of every table).
Placeholders are restored only for a tool whose capability says so.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import urllib.parse

import pytest
from pydantic import BaseModel, ConfigDict
from tools_helpers import (
    ASSAY,
    INIT_TIMEOUT,
    ledger_bytes,
    ledger_cells,
    open_session,
    sdk_client,
    server_env,
    signed_manifest,
)

from assay.policies.redaction.known_secrets import base64_fragments

pytestmark = pytest.mark.anyio

AWS = "wJalr" + secrets.token_urlsafe(27).replace("-", "x").replace("_", "y")
GITHUB = "ghp_" + secrets.token_hex(18)
# A password with what JSON and repr escape: a quote, a backslash, a non-ASCII letter.
# Low entropy on purpose (words, not hex), so only the known-value detector can catch it.
SERVICE = 'Pa"ss\\wörd-' + "-".join(
    secrets.choice(["apple", "river", "stone", "cloud", "maple", "tiger", "ocean", "piano"]) for _ in range(5)
)
CANARIES = {"AWS_SECRET_ACCESS_KEY": AWS, "GITHUB_TOKEN": GITHUB, "MY_SERVICE_PASSWORD": SERVICE}
PLACEHOLDER = re.compile(r"\[\[SECRET:[A-Za-z0-9._-]+:\d+\]\]")


def forms(value: str) -> set[str]:
    """Every form of `value` the redactor promises to catch, and the escapes our own
    serializers would add."""
    raw = value.encode()
    out = {
        value,
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        repr(value)[1:-1],
        raw.hex(),
        raw.hex().upper(),
        urllib.parse.quote(value, safe=""),
        urllib.parse.quote_plus(value, safe=""),
    }
    for frag in base64_fragments(raw):
        out.add(frag.decode())
        out.add(frag.decode().replace("+", "-").replace("/", "_"))
    for once in (json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]):
        out.add(json.dumps(once)[1:-1])  # JSON inside a JSON string: escaped twice
    return {f for f in out if len(f) >= 8}


def pieces(value: str) -> set[str]:
    """16-byte pieces of a token, raw and as hex: what a dump shows of it a line at a time."""
    raw = value.encode()
    cut = [raw[i : i + 16] for i in range(len(raw) - 15)]
    return {p.decode() for p in cut} | {p.hex() for p in cut}


def squeeze(text: str) -> str:
    """Text with whitespace and JSON/C line escapes removed: a wrapped canary joins up again."""
    return re.sub(r"\s+|\\[nrt]", "", text)


def assert_clean(blob: str, where: str) -> None:
    for name, value in CANARIES.items():
        for f in forms(value):
            assert f not in blob, f"{where}: {name} leaked as {f!r}"
            assert squeeze(f) not in squeeze(blob), f"{where}: {name} leaked wrapped"
    flat = squeeze(blob).lower()
    for piece in pieces(AWS):
        assert piece.lower() not in flat, f"{where}: AWS_SECRET_ACCESS_KEY leaked in pieces, {piece!r}"


def assert_result_clean(result, where: str) -> None:
    for c in result.content:
        assert_clean(c.text, f"{where} content")
    if result.structured_content is not None:
        assert_clean(json.dumps(result.structured_content, ensure_ascii=False), f"{where} structured")
        assert_clean(json.dumps(result.structured_content), f"{where} structured")


def assert_ledger_clean(home) -> None:
    blob = ledger_bytes(home).decode("latin-1")
    utf8 = ledger_bytes(home).decode("utf-8", "replace")
    for name, value in CANARIES.items():
        for f in forms(value):
            assert f not in blob and f not in utf8, f"ledger file holds {name} as {f!r}"
    for table, column, cell in ledger_cells(home):
        assert_clean(cell, f"ledger {table}.{column}")


@pytest.fixture
def env_canaries(monkeypatch):
    for k, v in CANARIES.items():
        monkeypatch.setenv(k, v)
    return CANARIES


def wrap(value: str, width: int) -> str:
    return "\n".join(value[i : i + width] for i in range(0, len(value), width))


@pytest.fixture
def planted(workspace):
    (workspace / "prod.env").write_text("".join(f"{k}={v}\n" for k, v in CANARIES.items()))
    (workspace / "config.json").write_text(json.dumps({"aws": AWS, "service": SERVICE}, indent=2))
    (workspace / "encoded.txt").write_text(
        f"b64 {base64.b64encode(AWS.encode()).decode()}\n"
        f"hex {GITHUB.encode().hex()}\n"
        f"url https://svc/?p={urllib.parse.quote(SERVICE, safe='')}\n"
    )
    (workspace / "wrapped.txt").write_text(f"token:\n{wrap(GITHUB, 7)}\nkey:\n  {wrap(AWS, 13)}\n")
    # The canaries a sandboxed program reads from files and prints in every form.
    (workspace / "canary.txt").write_text(AWS)
    (workspace / "service.txt").write_text(SERVICE)
    return workspace


PRINTER = r"""
import base64, json, sys, textwrap, urllib.parse
c = open('canary.txt').read()
print('plain', c)
print('b64', base64.b64encode(c.encode()).decode())
print('b64url', base64.urlsafe_b64encode(('xx' + c).encode()).decode())
print('hex', c.encode().hex())
print('url', urllib.parse.quote('k=' + c))
print('wrapped'); print(textwrap.fill(c, 9))
s = open('service.txt').read()
print('json', json.dumps({'password': s}))
print('go-json', json.dumps(s, ensure_ascii=False).replace('<', '\\u003c').replace('&', '\\u0026'))
print('nested', json.dumps({'stdout': json.dumps({'password': s})}))
d = b'\0' * 5 + c.encode()  # as `xxd` shows the file: 16 bytes a line, hex then text
for at in range(0, len(d), 16):
    row = d[at:at + 16]
    hexed = ' '.join(row[i:i + 2].hex() for i in range(0, len(row), 2))
    print('%08x: %-39s  %s' % (at, hexed, ''.join(chr(b) if 32 <= b < 127 else '.' for b in row)))
print('stderr', c, file=sys.stderr)
raise SystemExit('failed with ' + c)
"""


async def test_canaries_reach_neither_the_client_nor_the_ledger(env_canaries, planted, signed_home):
    calls = [
        ("read_file", {"path": "prod.env"}),
        ("read_file", {"path": "config.json"}),
        ("read_file", {"path": "encoded.txt"}),
        ("read_file", {"path": "wrapped.txt"}),
        ("list_files", {}),
        ("diff", {"a": "prod.env", "b": "wrapped.txt"}),
        ("exec", {"command": ["python", "-c", PRINTER]}),
        ("exec", {"command": ["python", "-c", "open('canary.txt').read()['no such key']"]}),
        ("exec", {"command": ["python", "-c", "import os; print(sorted(os.environ.items()))"]}),
        # Error messages that echo what they were given.
        ("read_file", {"path": f"missing-{AWS}.txt"}),
        ("write_file", {"path": "task.py", "content": GITHUB}),
        (f"tool_{GITHUB}", {"x": SERVICE}),
        # Arguments the client sends (the IDE's model may hold a real secret): the ledger
        # keeps placeholders only.
        ("write_file", {"path": "notes.txt", "content": f"remember {AWS} and {SERVICE}"}),
    ]
    with open_session(planted) as s:
        async with sdk_client(s) as c:
            results = [await c.call_tool(name, args) for name, args in calls]
            keyed = await c.call_tool("list_files", {}, meta={"assay/call-key": f"key-{GITHUB}"})
    for (name, args), r in zip(calls, results, strict=False):
        assert_result_clean(r, f"{name}({str(args)[:40]})")
    assert_result_clean(keyed, "call with a secret key")
    # The sandbox never saw the host environment at all.
    env_out = results[8].structured_content["stdout"]
    assert "AWS_SECRET_ACCESS_KEY" not in env_out and "GITHUB_TOKEN" not in env_out
    # ... and what the printer printed is there, redacted, not dropped.
    printed = results[6].structured_content
    assert printed is not None, results[6].content[0].text
    assert printed["exit_code"] == 1 and printed["stdout"].startswith("plain [[SECRET:")
    assert PLACEHOLDER.search(printed["stderr"])
    # Same value, same placeholder: in the .env file and in the sandbox's output.
    aws_ph = re.search(r"AWS_SECRET_ACCESS_KEY=(\[\[[^\]]+\]\])", results[0].structured_content["content"]).group(1)
    assert aws_ph in printed["stdout"]
    # On their way in, the arguments passed the redactor too: the file holds placeholders, and the
    # user's folder got them back as placeholders (a new file has no secrets of its own).
    notes = (planted / "notes.txt").read_text()
    assert notes.startswith("remember [[SECRET:") and AWS not in notes and SERVICE not in notes
    assert_ledger_clean(signed_home)


async def test_a_placeholder_is_not_restored_into_a_tool_whose_capability_forbids_it(
    env_canaries, planted, signed_home
):
    with open_session(planted) as s:
        async with sdk_client(s) as c:
            seen = (await c.call_tool("read_file", {"path": "canary.txt"})).structured_content["content"]
            assert PLACEHOLDER.fullmatch(seen)
            await c.call_tool("write_file", {"path": "copy.txt", "content": f"key={seen}"})
            ran = await c.call_tool(
                "exec",
                {
                    "command": [
                        "python",
                        "-c",
                        "import sys; open('argv.txt', 'w').write(sys.argv[1]); print(sys.argv[1])",
                        seen,
                    ]
                },
            )
    # The tools received the placeholder text itself, never the secret.
    assert (planted / "copy.txt").read_text() == f"key={seen}"
    assert (planted / "argv.txt").read_text() == seen
    assert ran.structured_content["stdout"] == seen + "\n"
    assert_ledger_clean(signed_home)


RESTORER = """
format = 1
role = "deployer"
[tools.read_file]
default = "allow"
[tools.list_files]
default = "allow"
[tools.write_file]
default = "allow"
restore_placeholders = true
"""

KEEPER = """
format = 1
role = "deployer"
[tools.read_file]
default = "allow"
[tools.keep]
default = "allow"
restore_placeholders = true
"""


class KeepArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    value: str


class Kept(BaseModel):
    ok: bool


def _keeper_registry(kept: list[dict]):
    """The shipped tools, and `keep`: a tool on the trusted side (it hands nothing to a
    workspace or sandbox) that records the arguments it was given."""
    from assay.tools.registry import Registry, default_registry

    registry = Registry()
    for spec in default_registry().for_kind(None):
        registry.register(spec)

    @registry.tool(reaches_sandbox=False)
    def keep(ctx, args: KeepArgs) -> Kept:
        """Keep a value on the trusted side."""
        kept.append(args.model_dump())
        return Kept(ok=True)

    return registry


async def test_a_manifest_that_restores_into_a_sandbox_tool_is_refused(env_canaries, planted, tmp_path, signed_home):
    """write_file hands its content to the workspace, where code in a sandbox reads it: no
    manifest can have secrets restored into it (it would undo redaction at the way in)."""
    from assay.errors import UserError

    manifest = signed_manifest(tmp_path / "m", RESTORER)
    with pytest.raises(UserError, match="write_file receive restored secrets") as err:
        open_session(planted, manifest=str(manifest)).__enter__()
    assert "restore_placeholders" in err.value.fix


async def test_where_the_capability_allows_it_restoration_works_inside_the_boundary(
    env_canaries, planted, tmp_path, signed_home
):
    from assay.tools.session import Session, SessionConfig

    kept: list[dict] = []
    manifest = signed_manifest(tmp_path / "m", KEEPER)
    s = Session(
        SessionConfig(workspace=planted, manifest=str(manifest), sandbox_backend="bwrap"),
        registry=_keeper_registry(kept),
    )
    try:
        async with sdk_client(s) as c:
            seen = (await c.call_tool("read_file", {"path": "canary.txt"})).structured_content["content"]
            assert PLACEHOLDER.fullmatch(seen)
            kept_call = await c.call_tool("keep", {"value": f"aws_secret={seen}"})
            # A placeholder made up by the client, or issued in another run, is just text.
            forged = await c.call_tool("keep", {"value": "k=[[SECRET:env-AWS_SECRET_ACCESS_KEY:77]]"})
    finally:
        s.close()
    assert kept == [{"value": f"aws_secret={AWS}"}, {"value": "k=[[SECRET:env-AWS_SECRET_ACCESS_KEY:77]]"}]
    for r, where in [(kept_call, "keep"), (forged, "forged")]:
        assert not r.is_error, (where, r.content[0].text)
        assert_result_clean(r, where)
    assert_ledger_clean(signed_home)


async def test_placeholders_of_one_run_mean_nothing_in_another(env_canaries, planted, tmp_path, signed_home):
    from assay.tools.session import Session, SessionConfig

    kept: list[dict] = []
    manifest = signed_manifest(tmp_path / "m", KEEPER)
    with open_session(planted, manifest="workspace-agent") as first:
        async with sdk_client(first) as c:
            seen = (await c.call_tool("read_file", {"path": "canary.txt"})).structured_content["content"]
    second = Session(
        SessionConfig(workspace=planted, manifest=str(manifest), sandbox_backend="bwrap"),
        registry=_keeper_registry(kept),
    )
    try:
        async with sdk_client(second) as c:
            await c.call_tool("keep", {"value": seen})
    finally:
        second.close()
    assert kept == [{"value": seen}]


async def test_a_cut_never_leaves_a_recognisable_prefix_of_a_secret(env_canaries, workspace, signed_home):
    """Truncation happens before redaction; a cut chosen by the caller (read_file's
    max_bytes) inside a secret would hand out its first bytes, which no detector knows."""
    (workspace / "key.txt").write_text(f"aws_secret_access_key = {AWS}\nregion = eu-west-1\n")
    start = len("aws_secret_access_key = ")
    with open_session(workspace) as s:
        async with sdk_client(s) as c:
            cuts = [
                await c.call_tool("read_file", {"path": "key.txt", "max_bytes": start + k})
                for k in (8, 20, len(AWS) - 1)
            ]
    for r in cuts:
        content = r.structured_content["content"]
        assert r.structured_content["truncated"] is True
        for k in range(8, len(AWS)):
            assert AWS[:k] not in content, f"{k} leading bytes of the secret leaked: {content!r}"
    assert_ledger_clean(signed_home)


async def test_an_agent_over_stdio_sees_only_placeholders(planted, signed_home):
    """pydantic-ai over a real `assay mcp` process whose environment holds the canaries."""
    import pydantic_ai.models
    from fastmcp.client import Client
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    pydantic_ai.models.ALLOW_MODEL_REQUESTS = False
    script = [
        ("read_file", {"path": "prod.env"}),
        ("read_file", {"path": "wrapped.txt"}),
        ("exec", {"command": ["python", "-c", PRINTER]}),
    ]
    everything_shown: list[str] = []

    def brain(messages, info):
        everything_shown.append(repr(messages))
        step = sum(1 for m in messages if isinstance(m, ModelResponse))
        if step < len(script):
            return ModelResponse(parts=[ToolCallPart(script[step][0], script[step][1], tool_call_id=f"c{step}")])
        return ModelResponse(parts=[TextPart("done")])

    env = server_env(ASSAY_HOME=str(signed_home), **CANARIES)
    toolset = MCPToolset(
        Client(
            StdioTransport(ASSAY, ["mcp", "--workspace", str(planted), "--sandbox", "bwrap"], env=env),
            init_timeout=INIT_TIMEOUT,
        )
    )
    result = await Agent(FunctionModel(brain), toolsets=[toolset]).run("read the config")
    assert result.output == "done"
    shown = "\n".join(everything_shown) + repr(result.all_messages())
    assert_clean(shown, "what the model was shown")
    assert shown.count("[[SECRET:env-") >= 3
    assert_ledger_clean(signed_home)


@pytest.mark.parametrize("offset", [10, 25])
async def test_output_cut_at_the_sandbox_limit_leaves_no_prefix_of_a_secret(
    env_canaries, workspace, signed_home, offset
):
    """A program whose output runs past the 1 MiB limit with a secret exactly at the cut."""
    (workspace / "canary.txt").write_text(AWS)
    program = (
        "import sys\n"
        "c = open('canary.txt').read()\n"
        "line = 'x' * 99 + '\\n'\n"
        f"n = (1 << 20) - {offset}\n"
        "sys.stdout.write(line * (n // 100) + 'y' * (n % 100) + c + '\\n' + 'tail\\n' * 100)\n"
    )
    with open_session(workspace) as s:
        async with sdk_client(s) as c:
            r = await c.call_tool("exec", {"command": ["python", "-c", program]})
    out = r.structured_content
    assert out["truncated"] is True  # (the sandbox kills a program that writes past its limit)
    for k in range(6, len(AWS)):
        assert AWS[:k] not in out["stdout"][-200:], f"{k} leading bytes of the secret leaked"
    assert_result_clean(r, "cut output")
