"""The audit trail from the untrusted side: a client that walks away mid-call, replays keys,
or hangs up cannot make a call disappear from the ledger.

Every call, allowed or not, must be in tool_calls and in policy_decisions with the rule
that decided it; a call the client cancelled after it was admitted must still be there,
allowed, and marked interrupted.
"""

from __future__ import annotations

import time

import anyio
import pytest
from tools_helpers import StdioWire, open_session, run_rows, sdk_client, server_env

from assay.policies.padding import PaddingPolicy

pytestmark = pytest.mark.anyio


def by_key(rows):
    return {r.key: r for r in rows}


async def test_a_call_cancelled_in_the_padding_hold_is_recorded_with_its_decision(workspace, signed_home):
    with open_session(workspace, padding=PaddingPolicy(enabled=True, default_ceiling_s=3.0)) as s:
        async with sdk_client(s) as c:
            with anyio.move_on_after(0.5) as scope:
                await c.call_tool("write_file", {"path": "ran.txt", "content": "the tool ran"})
            assert scope.cancelled_caught
            await anyio.sleep(3.0)  # the hold the server was in when it was cancelled
            after = await c.call_tool("list_files", {})
        run_id = s.run_id
    assert (workspace / "ran.txt").read_text() == "the tool ran"
    assert not after.is_error
    tool_rows, decision_rows = run_rows(signed_home, run_id)
    writes = [r for r in tool_rows if r.tool == "write_file"]
    assert len(writes) == 1, "a cancelled call that ran is missing from tool_calls"
    w = writes[0]
    assert w.decision == "allow" and w.outcome["rule"] == "write_file#default"
    assert "interrupted" in w.outcome["text"] and "may have run" in w.outcome["text"]
    assert by_key(decision_rows)[w.key].detail["rule"] == "write_file#default"


async def test_a_call_cancelled_while_the_sandbox_runs_it_is_recorded(workspace, signed_home):
    with open_session(workspace) as s:
        async with sdk_client(s) as c:
            with anyio.move_on_after(1.0):
                await c.call_tool(
                    "exec", {"command": ["python", "-c", "import time; time.sleep(2); open('slept', 'w')"]}
                )
            await anyio.sleep(2.5)
        run_id = s.run_id
    tool_rows, decision_rows = run_rows(signed_home, run_id)
    execs = [r for r in tool_rows if r.tool == "exec"]
    assert len(execs) == 1 and execs[0].decision == "allow"
    assert by_key(decision_rows)[execs[0].key].detail["rule"] == "exec#1"


async def test_replayed_keys_run_nothing_twice_and_a_reused_key_cannot_hide_a_call(workspace, signed_home):
    with open_session(workspace) as s:
        async with sdk_client(s) as c:
            meta = {"assay/call-key": "agent-call-1"}
            first = await c.call_tool("write_file", {"path": "a.txt", "content": "one"}, meta=meta)
            (workspace / "a.txt").write_text("changed by someone else")
            again = await c.call_tool("write_file", {"path": "a.txt", "content": "one"}, meta=meta)
            other = await c.call_tool("write_file", {"path": "b.txt", "content": "two"}, meta=meta)
        run_id = s.run_id
    assert first.structured_content == again.structured_content
    assert not other.is_error  # the same key for another call is a call of its own, run
    assert (workspace / "a.txt").read_text() == "changed by someone else"  # replayed, not re-run
    assert (workspace / "b.txt").read_text() == "two"
    tool_rows, decision_rows = run_rows(signed_home, run_id)
    assert sorted(r.arguments["path"] for r in tool_rows) == ["a.txt", "b.txt"]
    assert {r.key for r in tool_rows} == {d.key for d in decision_rows}
    assert any(r.key.startswith("c:agent-call-1:") for r in tool_rows)  # the reused key got its own row


async def test_a_client_that_hangs_up_mid_call_leaves_the_call_in_the_ledger(workspace, signed_home):
    w = StdioWire(["--workspace", str(workspace), "--sandbox", "bwrap"], env=server_env(ASSAY_HOME=str(signed_home)))
    with w:
        init = w.initialize()
        run_id = init["result"]["instructions"].split("run ")[1].split(",")[0]
        w.send(
            {
                "jsonrpc": "2.0",
                "id": 50,
                "method": "tools/call",
                "params": {
                    "name": "exec",
                    "arguments": {"command": ["python", "-c", "import time; time.sleep(1.5); print('done')"]},
                },
            }
        )
        time.sleep(0.5)
        rc = w.close(timeout=30)  # EOF on stdin while the call runs
    assert rc == 0
    tool_rows, decision_rows = run_rows(signed_home, run_id)
    assert [r.tool for r in tool_rows] == ["exec"] and [d.tool for d in decision_rows] == ["exec"]
    assert tool_rows[0].decision == "allow"


async def test_calls_sharing_a_key_while_the_first_still_runs_are_each_recorded(workspace, signed_home):
    """A key taken by a call still running cannot hide a second call behind it: each is
    decided, run and recorded under a key of its own, the denial too (red-team finding: the
    ledger kept one row per key, so these went unrecorded and a resumed run's per-run counts
    missed them)."""
    meta = {"assay/call-key": "same"}
    with open_session(workspace) as s:
        async with sdk_client(s) as c:

            async def slow():
                await c.call_tool("exec", {"command": ["python", "-c", "import time; time.sleep(2)"]}, meta=meta)

            async def call(tool: str, args: dict):
                await anyio.sleep(0.8)  # while the exec holds the key
                await c.call_tool(tool, args, meta=meta)

            async with anyio.create_task_group() as tg:
                tg.start_soon(slow)
                for i in range(3):
                    tg.start_soon(call, "write_file", {"path": f"w{i}.txt", "content": "x"})
                tg.start_soon(call, "drop_tables", {})  # no capability names it: denied
        run_id = s.run_id
    tool_rows, decision_rows = run_rows(signed_home, run_id)
    assert sorted(r.tool for r in tool_rows) == ["drop_tables", "exec"] + ["write_file"] * 3
    assert (
        sorted((d.tool, d.decision) for d in decision_rows)
        == [("drop_tables", "deny"), ("exec", "allow")] + [("write_file", "allow")] * 3
    )
    assert len({r.key for r in tool_rows}) == 5 and {r.key for r in tool_rows} == {d.key for d in decision_rows}
