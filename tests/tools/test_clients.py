"""Real clients nobody here wrote: MCP Inspector's CLI (Node, the reference TypeScript SDK)
and pydantic-ai's MCPToolset (on fastmcp's client), each over stdio and over HTTP.

What the model sees is asserted from the model's side: a FunctionModel plays the agent
(no model requests leave the process) and records every tool return part it is shown.
"""

from __future__ import annotations

import uuid

import pytest
from tools_helpers import (
    ASSAY,
    INIT_TIMEOUT,
    http_server,
    inspector_cli,
    inspector_has_headers,
    last_json,
    run_inspector,
    server_env,
)

pytestmark = pytest.mark.anyio

TOKEN = "tok-" + uuid.uuid4().hex + uuid.uuid4().hex
GRANTED = {"diff", "exec", "list_files", "read_file", "submit", "write_file"}


def mcp_args(workspace) -> list[str]:
    return ["mcp", "--workspace", str(workspace), "--sandbox", "bwrap"]


# -- MCP Inspector ---------------------------------------------------------------------------


@pytest.fixture
def inspector(need):
    cli = inspector_cli()
    need(cli is not None, "MCP Inspector CLI not installed (make test installs it into .cache/npm)")
    return cli


def test_inspector_over_stdio_lists_and_calls(inspector, workspace):
    target = [ASSAY, *mcp_args(workspace)]
    listed = run_inspector(inspector, *target, "--method", "tools/list")
    assert listed.returncode == 0, listed.stderr
    tools = {t["name"]: t for t in last_json(listed.stdout)["tools"]}
    assert set(tools) == GRANTED
    assert tools["read_file"]["annotations"]["readOnlyHint"] is True
    assert tools["write_file"]["annotations"]["destructiveHint"] is True
    assert "outputSchema" in tools["read_file"] and tools["write_file"]["inputSchema"]["additionalProperties"] is False

    wrote = run_inspector(
        inspector,
        *target,
        "--method",
        "tools/call",
        "--tool-name",
        "write_file",
        "--tool-arg",
        "path=notes/hello.txt",
        "--tool-arg",
        "content=hello from node",
    )
    assert wrote.returncode == 0, wrote.stderr
    assert last_json(wrote.stdout)["structuredContent"]["bytes_written"] == len("hello from node")
    assert (workspace / "notes" / "hello.txt").read_text() == "hello from node"

    read = run_inspector(
        inspector, *target, "--method", "tools/call", "--tool-name", "read_file", "--tool-arg", "path=notes/hello.txt"
    )
    assert last_json(read.stdout)["structuredContent"]["content"] == "hello from node"

    denied = run_inspector(
        inspector,
        *target,
        "--method",
        "tools/call",
        "--tool-name",
        "write_file",
        "--tool-arg",
        "path=task.py",
        "--tool-arg",
        "content=x",
    )
    # A denial is a tool error the client can show, not a protocol error (the TypeScript SDK
    # validates structuredContent against the output schema even on errors).
    assert denied.returncode == 0, denied.stdout + denied.stderr
    result = last_json(denied.stdout)
    assert result["isError"] is True and "write_file#1" in result["content"][0]["text"]
    assert not (workspace / "task.py").exists()


def test_inspector_over_http_with_and_without_the_token(inspector, workspace, need, signed_home):
    need(
        inspector_has_headers(inspector),
        f"MCP Inspector at {inspector} has no --header (0.15); HTTP with a bearer token needs >= 0.17",
    )
    with http_server(workspace, TOKEN, "--sandbox", "bwrap") as (url, _):
        common = [url, "--transport", "http"]
        auth = ["--header", f"Authorization: Bearer {TOKEN}"]
        listed = run_inspector(inspector, *common, *auth, "--method", "tools/list")
        assert listed.returncode == 0, listed.stderr + listed.stdout
        assert {t["name"] for t in last_json(listed.stdout)["tools"]} == GRANTED

        wrote = run_inspector(
            inspector,
            *common,
            *auth,
            "--method",
            "tools/call",
            "--tool-name",
            "write_file",
            "--tool-arg",
            "path=h.txt",
            "--tool-arg",
            "content=over http",
        )
        assert wrote.returncode == 0 and last_json(wrote.stdout)["isError"] is False
        read = run_inspector(
            inspector, *common, *auth, "--method", "tools/call", "--tool-name", "read_file", "--tool-arg", "path=h.txt"
        )
        assert last_json(read.stdout)["structuredContent"]["content"] == "over http"

        for bad in ([], ["--header", "Authorization: Bearer wrong-token-0123456789abcdef"]):
            refused = run_inspector(
                inspector,
                *common,
                *bad,
                "--method",
                "tools/call",
                "--tool-name",
                "write_file",
                "--tool-arg",
                "path=nope.txt",
                "--tool-arg",
                "content=x",
            )
            assert refused.returncode != 0
            assert "bearer token" in (refused.stdout + refused.stderr)
        assert not (workspace / "nope.txt").exists()


# -- pydantic-ai -----------------------------------------------------------------------------


class ScriptedModel:
    """A FunctionModel brain that makes the given tool calls one per turn, then answers, and
    keeps every part the agent loop showed it."""

    def __init__(self, script: list[tuple[str, dict]]):
        self.script = script
        self.shown: list = []
        self.tools: list[str] = []

    def __call__(self, messages, info):
        from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart

        if not self.tools:
            self.tools = sorted(t.name for t in info.function_tools)
        last = messages[-1]
        if isinstance(last, ModelRequest):
            self.shown.extend(p for p in last.parts if getattr(p, "part_kind", "") in ("tool-return", "retry-prompt"))
        step = sum(1 for m in messages if not isinstance(m, ModelRequest))
        if step < len(self.script):
            name, args = self.script[step]
            return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"call-{step}")])
        return ModelResponse(parts=[TextPart("done")])


async def run_agent(toolset, script):
    import pydantic_ai.models
    from pydantic_ai import Agent
    from pydantic_ai.models.function import FunctionModel

    pydantic_ai.models.ALLOW_MODEL_REQUESTS = False
    brain = ScriptedModel(script)
    result = await Agent(FunctionModel(brain), toolsets=[toolset]).run("work in the workspace")
    assert result.output == "done"
    return brain


def stdio_toolset(workspace, *extra: str):
    from fastmcp.client import Client
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai.mcp import MCPToolset

    return MCPToolset(
        Client(StdioTransport(ASSAY, mcp_args(workspace) + list(extra), env=server_env()), init_timeout=INIT_TIMEOUT)
    )


SCRIPT = [
    ("write_file", {"path": "src/kernel.py", "content": "def add(a, b):\n    return a + b\n"}),
    ("read_file", {"path": "src/kernel.py"}),
    ("write_file", {"path": "task.py", "content": "overwrite the reference"}),
]


def check_what_the_model_saw(brain, workspace):
    assert set(brain.tools) == GRANTED
    wrote, read, denied = brain.shown
    assert wrote.tool_name == "write_file" and wrote.content["bytes_written"] == 32
    assert wrote.content["sha256"].startswith("sha256:")
    assert read.tool_name == "read_file"
    assert read.content == {
        "path": "src/kernel.py",
        "content": "def add(a, b):\n    return a + b\n",
        "size": 32,
        "truncated": False,
    }
    # A denial is a tool error the model can read and act on, naming the rule.
    assert denied.tool_name == "write_file" and "write_file#1" in str(denied.content)
    assert "write your candidate to a new file" in str(denied.content)
    assert not (workspace / "task.py").exists()


async def test_pydantic_ai_over_stdio(workspace):
    brain = await run_agent(stdio_toolset(workspace), SCRIPT)
    check_what_the_model_saw(brain, workspace)


async def test_pydantic_ai_over_http(workspace, signed_home):
    from pydantic_ai.mcp import MCPToolset

    with http_server(workspace, TOKEN, "--sandbox", "bwrap") as (url, _):
        brain = await run_agent(
            MCPToolset(url, headers={"Authorization": f"Bearer {TOKEN}"}, init_timeout=INIT_TIMEOUT), SCRIPT
        )
        check_what_the_model_saw(brain, workspace)

        # With a wrong token the toolset cannot even connect: the run fails before any call.
        from mcp.shared.exceptions import MCPError

        with pytest.raises(MCPError, match="error response"):
            await run_agent(
                MCPToolset(
                    url, headers={"Authorization": "Bearer not-the-token-0123456789"}, init_timeout=INIT_TIMEOUT
                ),
                [("write_file", {"path": "refused.txt", "content": "x"})],
            )
    assert (workspace / "src" / "kernel.py").read_text().startswith("def add")
    assert not (workspace / "refused.txt").exists()
