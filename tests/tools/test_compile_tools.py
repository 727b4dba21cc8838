"""The compile tools from the agent's side, through the real MCP server and gateway of a compile
session: the compile-agent manifest gives no command line and writes only fixed.py and
diagnosis.md (no sitecustomize, no library look-alike); the task's symptom and a rewrite are
measured in the run's sandbox by the verifier's own judge script."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tools_helpers import open_session, sdk_client

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
TASK = ROOT / "examples" / "compile" / "item_branch.py"
FIX = ROOT / "tests" / "verifiers" / "compile" / "honest" / "item_branch.py"


def text(result) -> str:
    return result.content[0].text if result.content else ""


async def test_a_compile_session_diagnoses_and_checks_and_runs_nothing_else(workspace, need):
    from assay.sandbox.backends import availability

    need(availability()["bwrap"][0], "bubblewrap is not available here")
    (workspace / "task.py").write_text(TASK.read_text())
    job = {"options": {"backend": "aot_eager"}}
    with open_session(workspace, kind="compile", manifest="compile-agent", job=job) as s:
        async with sdk_client(s) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert {"compile_diagnose", "compile_check", "write_file", "submit"} <= names
            assert not {"quant_try", "autotune"} & names
            assert (await c.call_tool("exec", {"command": ["python", "-c", "print(1)"]})).is_error
            for planted in ("sitecustomize.py", "torch.py", "evil.pth"):
                refused = await c.call_tool("write_file", {"path": planted, "content": "import os\n"})
                assert refused.is_error and not (workspace / planted).exists()
            diag = await c.call_tool("compile_diagnose", {})
            assert not diag.is_error, text(diag)
            figures = json.loads(text(diag))["figures"]
            assert figures["breaks"] == 1 and figures["fullgraph"] is False
            assert (
                "item()" in figures["break_reasons"][0]["reason"]
                and "task.py:22" in figures["break_reasons"][0]["where"]
            )
            await c.call_tool("write_file", {"path": "fixed.py", "content": FIX.read_text()})
            checked = await c.call_tool("compile_check", {"path": "fixed.py"})
            assert not checked.is_error, text(checked)
            got = json.loads(text(checked))
            assert got["tamper"] == [], got["tamper"]
            assert got["figures"]["breaks"] == 0 and got["figures"]["fullgraph"] is True and got["tamper"] == []
            assert got["figures"]["parity"] and all(p["ok"] for p in got["figures"]["parity"])
            outside = await c.call_tool("compile_check", {"path": "../fixed.py"})
            assert outside.is_error
