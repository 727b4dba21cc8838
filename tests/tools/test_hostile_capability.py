"""A hostile client outside its capability: unknown and ungranted tools, forbidden programs,
rate-limit floods, oversize arguments. Every attempt must come back as a readable tool
error, and every call, allowed or not, must be in the ledger with the rule that decided it.

Through the official SDK client and the real gateway (bwrap sandbox for exec).
"""

from __future__ import annotations

import anyio
import pytest
from tools_helpers import open_session, run_rows, sdk_client, signed_manifest

pytestmark = pytest.mark.anyio


def text(r) -> str:
    return r.content[0].text


async def calls_and_rules(client, session, home, calls):
    """Make `calls`; return the results and, per call, (tool_calls row, policy_decisions row)."""
    results = [await client.call_tool(name, args) for name, args in calls]
    tool_rows, decision_rows = run_rows(home, session.run_id)
    return results, tool_rows, decision_rows


def assert_every_call_recorded(tool_rows, decision_rows, n):
    assert len(tool_rows) == n and len(decision_rows) == n
    by_key = {d.key: d for d in decision_rows}
    for row in tool_rows:
        d = by_key[row.key]
        assert row.decision == d.decision and row.tool == d.tool
        assert d.detail["rule"] and row.outcome["rule"] == d.detail["rule"]


FORBIDDEN_EXEC = [
    (["curl", "http://example.com"], "exec#executables"),
    (["sh", "-c", "id"], "exec#executables"),
    (["bash"], "exec#executables"),
    (["/bin/sh", "-c", "id"], "exec#executables"),
    (["/usr/bin/python3", "-c", "1"], "exec#executables"),
    (["./python"], "exec#executables"),
    (["python ", "-c", "1"], "exec#executables"),
    (["env", "python", "-c", "1"], "exec#executables"),
    (["python3\x00", "-c", "1"], "exec#command"),
    ([""], "exec#command"),
    ([], "exec#command"),
    ("python -c 1", "exec#command"),
    ([["python"]], "exec#command"),
]


async def test_calls_outside_the_capability_are_denied_readably_and_recorded(workspace, signed_home):
    calls = [
        ("rm_rf_everything", {"path": "."}),
        ("read_task", {}),  # granted by the manifest, but no such tool in this session
        ("exec", {"command": ["python", "-c", "print('fine')"]}),
        ("exec", {"command": ["python", "-c", "print(1)"], "timeout_s": 45}),
        ("exec", {"command": ["g++", "x.cpp"], "timeout_s": 45}),
        ("exec", {"command": ["python"], "timeout_s": -1}),
        ("exec", {"command": ["python"], "timeout_s": 10**400 if False else 1e308}),
        ("write_file", {"path": "task.py", "content": "x"}),
        ("write_file", {"path": "sub/task.py", "content": "x"}),
    ] + [("exec", {"command": cmd}) for cmd, _ in FORBIDDEN_EXEC]
    # kernel-agent grants read_task, a tool this kind-less session does not have.
    with open_session(workspace, manifest="kernel-agent") as s:
        async with sdk_client(s) as c:
            results, tool_rows, decision_rows = await calls_and_rules(c, s, signed_home, calls)
    rules = [d.detail["rule"] for d in decision_rows]
    assert rules[:9] == [
        "manifest#unlisted",
        "read_task#default",
        "exec#1",
        "exec#default",
        "exec#2",
        "exec#timeout_s",
        "exec#max_timeout_s",
        "write_file#1",
        "write_file#1",
    ]
    assert rules[9:] == [rule for _, rule in FORBIDDEN_EXEC]
    assert results[2].structured_content["stdout"] == "fine\n"
    for i, r in enumerate(results):
        if i == 2:
            continue
        assert r.is_error, (calls[i], text(r))
        assert text(r)  # something the model can read and act on
    assert "granted:" in text(results[0]) and "write_file" in text(results[0])
    assert "unknown tool" in text(results[1])
    assert "approval" in text(results[4]) and "pending" in text(results[4])
    assert "bare name 'python3'" in text(results[9 + 4])
    assert [d.decision for d in decision_rows][:5] == ["deny", "allow", "allow", "deny", "approve"]
    assert_every_call_recorded(tool_rows, decision_rows, len(calls))
    assert not (workspace / "task.py").exists() and not (workspace / "sub").exists()


NARROW = """
format = 1
role = "narrow"
[tools.read_file]
default = "allow"
paths = ["src/**"]
rate = { per_minute = 5 }
[tools.list_files]
default = "allow"
rate = { per_run = 3 }
"""


async def test_tools_the_manifest_does_not_grant_are_neither_listed_nor_callable(workspace, tmp_path, signed_home):
    manifest = signed_manifest(tmp_path / "m", NARROW)
    (workspace / "src").mkdir()
    (workspace / "src" / "a.py").write_text("A = 1\n")
    (workspace / "other.txt").write_text("other\n")
    with open_session(workspace, manifest=str(manifest)) as s:
        async with sdk_client(s) as c:
            listed = sorted(t.name for t in (await c.list_tools()).tools)
            results, tool_rows, decision_rows = await calls_and_rules(
                c,
                s,
                signed_home,
                [
                    ("write_file", {"path": "src/b.py", "content": "x"}),
                    ("exec", {"command": ["python", "-c", "1"]}),
                    ("read_file", {"path": "src/a.py"}),
                    ("read_file", {"path": "other.txt"}),
                ],
            )
    assert listed == ["list_files", "read_file"]
    assert [d.detail["rule"] for d in decision_rows] == [
        "manifest#unlisted",
        "manifest#unlisted",
        "read_file#default",
        "read_file#paths",
    ]
    assert [r.is_error for r in results] == [True, True, False, True]
    assert not (workspace / "src" / "b.py").exists()
    assert_every_call_recorded(tool_rows, decision_rows, 4)


async def test_rate_limit_floods_are_cut_off_and_every_denial_is_recorded(workspace, tmp_path, signed_home):
    manifest = signed_manifest(tmp_path / "m", NARROW)
    (workspace / "src").mkdir()
    (workspace / "src" / "a.py").write_text("A = 1\n")
    with open_session(workspace, manifest=str(manifest)) as s:
        async with sdk_client(s) as c:
            # Sequential flood, then a concurrent one: the counter must hold under both.
            seq = [await c.call_tool("list_files", {}) for _ in range(6)]
            par: list = []

            async def one():
                par.append(await c.call_tool("read_file", {"path": "src/a.py"}))

            async with anyio.create_task_group() as tg:
                for _ in range(12):
                    tg.start_soon(one)
        run_id = s.run_id
    assert [r.is_error for r in seq] == [False] * 3 + [True] * 3
    assert sum(not r.is_error for r in par) == 5
    assert all("retry in" in text(r) for r in par if r.is_error)
    tool_rows, decision_rows = run_rows(signed_home, run_id)
    rules = [d.detail["rule"] for d in decision_rows]
    assert rules.count("list_files#rate.per_run") == 3 and rules.count("read_file#rate.per_minute") == 7
    assert_every_call_recorded(tool_rows, decision_rows, 18)

    # A resumed session on the same run keeps the per-run count: the flood stays cut off.
    with open_session(workspace, manifest=str(manifest), run_id=run_id) as s2:
        async with sdk_client(s2) as c:
            again = await c.call_tool("list_files", {})
    assert again.is_error and "list_files#rate.per_run" in text(again)


async def test_oversize_and_malformed_arguments_are_refused_without_harm(workspace, signed_home):
    nested: object = "x"
    for _ in range(150):
        nested = [nested]
    calls = [
        ("write_file", {"path": "big.txt", "content": "A" * (4 * 1024 * 1024 + 1)}),
        ("write_file", {"path": "a" * 5000, "content": "x"}),
        ("write_file", {"path": "/".join(["d"] * 2000), "content": "x"}),
        ("exec", {"command": ["python"] + ["-c"] * 5000}),
        ("exec", {"command": ["python", "-c", "print(1)", "A" * (200 * 1024)], "timeout_s": 5}),
        ("exec", {"command": ["python", "-c", "print(1)"] + ["A" * 100_000] * 40, "timeout_s": 5}),
        ("exec", {"command": ["python", "-c", "1"], "stdin": "B" * (2 << 20)}),
        ("write_file", {"path": "n.txt", "content": "x", "extra": nested}),
        ("read_file", {"path": "n.txt", "max_bytes": 10**12}),
        ("read_file", {"path": ["a", "b"]}),
        ("list_files", {"path": {"$ne": ""}}),
    ]
    with open_session(workspace) as s:
        async with sdk_client(s) as c:
            with anyio.fail_after(120):
                results, tool_rows, decision_rows = await calls_and_rules(c, s, signed_home, calls)
            alive = await c.call_tool("list_files", {})
    assert [d.detail["rule"] for d in decision_rows] == [
        "write_file#default",  # admitted by the policy, refused by the tool's argument check
        "write_file#path",
        "write_file#default",  # 2000 segments: the glob matcher copes; the tool's 1024-char limit refuses
        # Arguments the tool's model rejects are judged as sent, without its defaults (no
        # timeout_s means the 60 s limit, more than the 30 s rule admits): denied before running.
        "exec#default",
        "exec#1",  # admitted (timeout 5 s), then refused by exec's argv bounds before the sandbox
        "exec#1",
        "exec#default",
        "write_file#default",
        "read_file#default",
        "read_file#path",
        "list_files#path",
    ]
    for (name, _), r in zip(calls, results, strict=False):
        assert r.is_error, (name, text(r)[:200])
        assert len(text(r)) < 2000  # refusals are bounded, never an echo of the payload
    assert not alive.is_error
    assert sorted(p.name for p in workspace.iterdir()) == []
    assert_every_call_recorded(tool_rows, decision_rows, len(calls))


DIFF_SCOPED = """
format = 1
role = "diff-scoped"
[tools.read_file]
default = "allow"
[[tools.read_file.rules]]
effect = "deny"
path = ["private/**"]
[tools.diff]
default = "allow"
[[tools.diff.rules]]
effect = "deny"
path = ["private/**"]
"""


async def test_path_constraints_also_hold_for_tools_whose_paths_have_other_names(workspace, tmp_path):
    manifest = signed_manifest(tmp_path / "m", DIFF_SCOPED)
    (workspace / "src").mkdir()
    (workspace / "src" / "a.py").write_text("A = 1\n")
    (workspace / "private").mkdir()
    (workspace / "private" / "notes.txt").write_text("outside the role's paths\n")
    with open_session(workspace, manifest=str(manifest)) as s:
        async with sdk_client(s) as c:
            direct = await c.call_tool("read_file", {"path": "private/notes.txt"})
            via_diff = await c.call_tool("diff", {"a": "src/a.py", "b": "private/notes.txt"})
    assert direct.is_error and "read_file#1" in text(direct)
    assert via_diff.is_error and "outside the role's paths" not in text(via_diff)


def test_glob_matching_a_long_legal_path_does_not_recurse_out_of_the_stack():
    from assay.policies.paths import glob_match, normalize_relpath

    path = normalize_relpath("/".join(["d"] * 2000))
    assert glob_match("**", path)


LIMITED = """
format = 1
role = "limited"
[tools.write_file]
default = "allow"
[tools.read_file]
default = "allow"
max_output_bytes = 1024
[tools.diff]
default = "allow"
max_output_bytes = 1024
[tools.list_files]
default = "allow"
max_output_bytes = 1024
"""


async def test_the_file_tools_keep_to_the_output_their_capability_grants(workspace, tmp_path, signed_home):
    """max_output_bytes binds every tool, not only exec (red-team finding: the file tools
    ignored it, and diff compared crafted files for 20 s of the gateway's CPU)."""
    lines = "".join(f"line {i}\n" for i in range(3000))
    (workspace / "a.txt").write_text(lines)
    (workspace / "b.txt").write_text(lines.replace("0\n", "zero\n"))
    (workspace / "big.txt").write_text("x\n" * 20_000)
    for i in range(100):
        (workspace / f"file-with-a-long-name-{i:03}.txt").write_text("")
    manifest = signed_manifest(tmp_path / "m", LIMITED)
    with open_session(workspace, manifest=str(manifest)) as s:
        async with sdk_client(s) as c:
            read = await c.call_tool("read_file", {"path": "a.txt"})
            diffed = await c.call_tool("diff", {"a": "a.txt", "b": "b.txt"})
            listed = await c.call_tool("list_files", {})
            too_long = await c.call_tool("diff", {"a": "big.txt", "b": "a.txt"})
    assert read.structured_content["truncated"] and len(read.structured_content["content"].encode()) <= 1024
    assert diffed.structured_content["truncated"] and 0 < len(diffed.structured_content["diff"].encode()) <= 1024
    assert (
        listed.structured_content["truncated"]
        and sum(len(e["path"]) for e in listed.structured_content["entries"]) <= 1024
    )
    assert too_long.is_error and "exec" in too_long.content[0].text
