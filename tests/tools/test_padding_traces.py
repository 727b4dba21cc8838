"""Trace padding seen from outside: what an observer of the stdio pipe learns.

Two runs whose private data differ (a test script that passes vs one that fails; a short vs
a long secret file) make the same calls through a real `assay mcp` process. The size trace
is the byte length of every JSON-RPC response line exactly as the server wrote it; the
timing trace is, per call, the time from writing the request to reading its response.

With padding on, both traces must match between the runs; with it off, they must differ,
or the test shows nothing. Padding must not change what a model reads (pydantic-ai's view).

Timing tolerance: padded results leave at a fixed per-tool ceiling (exec 2.0 s, the file
tools 0.5 s, `--pad-ceiling`), so what remains is noise after the release: an event-loop
wake-up, one SQLite insert for the audit row, serialization, a pipe write, and scheduling on
a loaded two-core host. TOLERANCE (0.1 s) bounds that noise; the passing test does 0.6 s
more work than the failing one, so unpadded timings differ by more than six tolerances.
"""

from __future__ import annotations

import json
import secrets

import pytest
from tools_helpers import ASSAY, INIT_TIMEOUT, StdioWire, server_env

pytestmark = pytest.mark.anyio

EXEC_CEILING = 2.0
FILE_CEILING = 0.5
TOLERANCE = 0.1
EARLY = 0.005
PADDED = ["--padding", "--pad-ceiling", f"exec={EXEC_CEILING}", "--pad-default-ceiling", str(FILE_CEILING)]

PASSING = """
import time
t = time.monotonic()
checks = 0
while time.monotonic() - t < 0.6:      # the full suite runs when nothing fails
    checks += 1
print(f"ok: {checks} checks passed")
"""

FAILING = """
def test_softmax():
    out = [0.2, 0.3, 0.4]
    assert abs(sum(out) - 1.0) < 1e-6, f"rows must sum to 1, got {sum(out)}"
test_softmax()
"""


def trace(home, workspace, padded: bool, calls) -> tuple[list[int], list[float], list[dict]]:
    """(response sizes, latencies, results) of `calls` against a fresh server."""
    args = ["--workspace", str(workspace), "--sandbox", "bwrap"] + (PADDED if padded else [])
    sizes, times, results = [], [], []
    with StdioWire(args, env=server_env(ASSAY_HOME=str(home))) as w:
        w.initialize()
        sizes.append(len(w.seen[0].raw))
        w.request("tools/list")
        for name, arguments in calls:
            line, took = w.call(name, arguments, timeout=60)
            sizes.append(len(line.raw))
            times.append(took)
            results.append(line.obj["result"])
        assert w.close() == 0
    return sizes, times, results


def make_workspace(tmp_path, name: str, files: dict[str, str]):
    ws = tmp_path / name
    ws.mkdir()
    for rel, text in files.items():
        (ws / rel).write_text(text)
    return ws


TEST_CALLS = [
    ("list_files", {}),
    ("read_file", {"path": "test_kernel.py"}),
    ("exec", {"command": ["python", "test_kernel.py"]}),
    ("write_file", {"path": "notes.txt", "content": "ran the tests"}),
]


def secret_text(n: int) -> str:
    words = []
    while sum(len(w) + 1 for w in words) < n:
        words.append(secrets.token_hex(4))
    return " ".join(words)[:n]


SECRET_CALLS = [
    ("read_file", {"path": "secret.txt"}),
    ("exec", {"command": ["python", "-c", "print(open('secret.txt').read())"]}),
    ("diff", {"a": "secret.txt", "b": "public.txt"}),
]


@pytest.fixture(scope="module")
def scenarios(signed_home, tmp_path_factory):
    """Both scenarios, each run with the two secrets, padded and not: eight servers."""
    tmp = tmp_path_factory.mktemp("traces")
    out = {}
    # A result carries its content twice (text and structured), so the long secret stays
    # under half a bucket: padding hides sizes within a bucket, not across buckets.
    runs = [
        ("pass", {"test_kernel.py": PASSING}, TEST_CALLS),
        ("fail", {"test_kernel.py": FAILING}, TEST_CALLS),
        ("short", {"secret.txt": secret_text(10), "public.txt": "public\n"}, SECRET_CALLS),
        ("long", {"secret.txt": secret_text(1500), "public.txt": "public\n"}, SECRET_CALLS),
    ]
    for padded in (True, False):
        for label, files, calls in runs:
            ws = make_workspace(tmp, f"{label}-{'on' if padded else 'off'}", files)
            out[(label, padded)] = trace(signed_home, ws, padded, calls)
    return out


@pytest.mark.parametrize("a,b", [("pass", "fail"), ("short", "long")])
def test_with_padding_the_size_traces_are_identical(scenarios, a, b):
    sizes_a, sizes_b = scenarios[(a, True)][0], scenarios[(b, True)][0]
    assert sizes_a == sizes_b
    # Every tool result is padded to the same bucket (the envelope and ids are the same).
    assert len(set(sizes_a[1:])) == 1, sizes_a


@pytest.mark.parametrize("a,b", [("pass", "fail"), ("short", "long")])
def test_without_padding_the_size_traces_tell_the_runs_apart(scenarios, a, b):
    assert scenarios[(a, False)][0] != scenarios[(b, False)][0]


@pytest.mark.parametrize("a,b,calls", [("pass", "fail", TEST_CALLS), ("short", "long", SECRET_CALLS)])
def test_with_padding_the_timing_traces_match(scenarios, a, b, calls):
    times_a, times_b = scenarios[(a, True)][1], scenarios[(b, True)][1]
    for (name, _), ta, tb in zip(calls, times_a, times_b, strict=False):
        ceiling = EXEC_CEILING if name == "exec" else FILE_CEILING
        # Not before the ceiling (EARLY: asyncio fires a timer up to its clock resolution
        # early, and the client stamps its send after the server may have read it), and never
        # a ceiling overrun.
        for t in (ta, tb):
            assert ceiling - EARLY <= t < ceiling + TOLERANCE, (name, ta, tb)
        assert abs(ta - tb) < TOLERANCE, (name, ta, tb)


def test_without_padding_the_timing_trace_tells_pass_from_fail(scenarios):
    exec_at = [n for n, _ in TEST_CALLS].index("exec")
    t_pass, t_fail = scenarios[("pass", False)][1][exec_at], scenarios[("fail", False)][1][exec_at]
    assert t_pass - t_fail > 3 * TOLERANCE, (t_pass, t_fail)


def test_the_runs_really_differed(scenarios):
    exec_at = [n for n, _ in TEST_CALLS].index("exec")
    passed = scenarios[("pass", True)][2][exec_at]["structuredContent"]
    failed = scenarios[("fail", True)][2][exec_at]["structuredContent"]
    assert passed["exit_code"] == 0 and "checks passed" in passed["stdout"]
    assert failed["exit_code"] == 1 and "rows must sum to 1" in failed["stderr"]
    short = scenarios[("short", True)][2][0]["structuredContent"]["size"]
    long = scenarios[("long", True)][2][0]["structuredContent"]["size"]
    assert (short, long) == (10, 1500)


def test_padding_never_changes_content(scenarios):
    """Apart from the padding field, the same private data gives the same results."""
    for label in ("fail", "long"):
        on, off = scenarios[(label, True)][2], scenarios[(label, False)][2]
        for r_on, r_off in zip(on, off, strict=False):
            assert set(r_on["_meta"]) == {"assay/padding"} and "_meta" not in r_off
            a, b = dict(r_on), dict(r_off)
            a.pop("_meta")
            for r in (a, b):
                if r.get("structuredContent") and "duration_s" in r["structuredContent"]:
                    r["structuredContent"]["duration_s"] = r["content"] = None
            assert a == b


async def test_the_model_reads_the_same_with_and_without_padding(signed_home, tmp_path):
    """pydantic-ai over stdio, padded and not: identical tool return parts."""
    import pydantic_ai.models
    from fastmcp.client import Client
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    pydantic_ai.models.ALLOW_MODEL_REQUESTS = False
    script = [
        ("write_file", {"path": "k.py", "content": "x = 1\n"}),
        ("read_file", {"path": "k.py"}),
        ("list_files", {}),
        ("write_file", {"path": "task.py", "content": "denied"}),
    ]

    async def run(padded: bool) -> list:
        ws = tmp_path / f"model-{padded}"
        ws.mkdir()
        shown: list = []

        def brain(messages, info):
            last = messages[-1]
            if isinstance(last, ModelRequest):
                shown.extend(
                    (p.tool_name, p.content) for p in last.parts if getattr(p, "part_kind", "") == "tool-return"
                )
            step = sum(1 for m in messages if isinstance(m, ModelResponse))
            if step < len(script):
                return ModelResponse(parts=[ToolCallPart(*script[step], tool_call_id=f"c{step}")])
            return ModelResponse(parts=[TextPart("done")])

        args = ["mcp", "--workspace", str(ws), "--sandbox", "bwrap"] + (PADDED if padded else [])
        toolset = MCPToolset(
            Client(StdioTransport(ASSAY, args, env=server_env(ASSAY_HOME=str(signed_home))), init_timeout=INIT_TIMEOUT)
        )
        await Agent(FunctionModel(brain), toolsets=[toolset]).run("go")
        return shown

    padded, plain = await run(True), await run(False)
    assert len(plain) == len(script)
    assert padded == plain
    assert "assay/padding" not in json.dumps(padded, default=str)
