"""A hostile client against the workspace file tools: nothing outside the workspace, ever.

Through the official SDK client and the real gateway. Traps are planted the two ways an
agent can plant them: by the test on the host (as a previous step's leftovers would be) and
by code the agent runs in the real sandbox (bwrap and Docker).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from tools_helpers import open_session, run_rows, sdk_client

pytestmark = pytest.mark.anyio

CANARY = "HOSTCANARY-7c1e5f0a9b"


@pytest.fixture
def outside(tmp_path) -> Path:
    """A host folder next to the workspace, holding a canary file the agent must never see."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "canary.txt").write_text(f"{CANARY}\n")
    (d / "hostonly-name.txt").write_text("x")
    return d


def text_of(result) -> str:
    return result.content[0].text


def assert_refused(result) -> None:
    assert result.is_error, text_of(result)
    assert CANARY not in text_of(result) and CANARY not in str(result.structured_content)


TRAVERSALS = [
    "../outside/canary.txt",
    "sub/../../outside/canary.txt",
    "/etc/passwd",
    "//etc/passwd",
    "a\x00b",
    "./../outside/canary.txt",
]


@pytest.mark.parametrize("path", TRAVERSALS)
async def test_traversal_by_name_is_denied_by_the_policy_and_recorded(workspace, outside, signed_home, path):
    with open_session(workspace) as s:
        async with sdk_client(s) as c:
            results = [
                await c.call_tool("read_file", {"path": path}),
                await c.call_tool("write_file", {"path": path, "content": "pwned"}),
                await c.call_tool("list_files", {"path": path}),
                await c.call_tool("diff", {"a": path, "b": path}),
            ]
        assert_refused(results[3])  # diff's paths are not `path`: the tool refuses them itself
        for r in results[:3]:
            assert_refused(r)
            assert text_of(r).startswith("denied by ") and r.structured_content is None
        assert (outside / "canary.txt").read_text() == f"{CANARY}\n"
        calls, decisions = run_rows(signed_home, s.run_id)
        rules = [d.detail["rule"] for d in decisions]
        assert rules[:3] == ["read_file#path", "write_file#path", "list_files#path"]
        assert [c.decision for c in calls][:3] == ["deny", "deny", "deny"]


async def test_symlinks_planted_in_the_workspace_are_not_followed(run_workspace, outside):
    workspace = run_workspace  # the tools' own confinement: no redacted view between
    (workspace / "link.txt").symlink_to(outside / "canary.txt")
    (workspace / "dirlink").symlink_to(outside, target_is_directory=True)
    (workspace / "rel").symlink_to("../outside/canary.txt")
    (workspace / "sub").mkdir()
    (workspace / "sub" / "up").symlink_to("../../outside")
    with open_session(workspace) as s:
        async with sdk_client(s) as c:
            for path in ["link.txt", "rel", "dirlink/canary.txt", "sub/up/canary.txt"]:
                assert_refused(await c.call_tool("read_file", {"path": path}))
                assert_refused(await c.call_tool("diff", {"a": path, "b": path}))
            for path in ["link.txt", "dirlink/new.txt", "sub/up/canary.txt", "sub/up/new.txt"]:
                assert_refused(await c.call_tool("write_file", {"path": path, "content": "pwned"}))
            assert_refused(await c.call_tool("list_files", {"path": "dirlink"}))
            listing = await c.call_tool("list_files", {"path": "."})
    assert not listing.is_error
    names = [e["path"] for e in listing.structured_content["entries"]]
    assert "dirlink" in names and not any("hostonly-name" in n for n in names)
    assert sorted(p.name for p in outside.iterdir()) == ["canary.txt", "hostonly-name.txt"]
    assert (outside / "canary.txt").read_text() == f"{CANARY}\n"


# Swaps `d` (a folder) and `d.link` (a symlink to the outside) with renameat2's
# RENAME_EXCHANGE: one atomic syscall per flip, so `d` changes kind as often as a process can
# ask, the way code in the sandbox would race the gateway.
FLIPPER = """
import ctypes, os, sys, time
ws, outside, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
real, link = os.path.join(ws, "d"), os.path.join(ws, "d.link")
os.symlink(outside, link)
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
a, b = real.encode(), link.encode()
flips = 0
end = time.monotonic() + seconds
while time.monotonic() < end:
    for _ in range(1000):
        if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) == 0:
            flips += 1
if flips % 2:
    libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
os.unlink(link)
print(flips)
"""


async def test_a_folder_swapped_for_a_symlink_mid_call_never_lets_a_call_out(run_workspace, outside):
    """Another process (as code in the sandbox would) flips `d` between a real folder and a
    symlink to the outside while the client lists, reads and writes under it: no call may
    ever see, or write to, the outside."""
    workspace = run_workspace  # the tools' own confinement: no redacted view between
    import subprocess
    import sys

    real = workspace / "d"
    real.mkdir()
    (real / "canary.txt").write_text("inside\n")
    (real / "inner").mkdir()
    leaked = []
    with open_session(workspace) as s:
        async with sdk_client(s) as c:
            flipper = subprocess.Popen(
                [sys.executable, "-c", FLIPPER, str(workspace), str(outside), "4"], stdout=subprocess.PIPE
            )
            try:
                while flipper.poll() is None:
                    for name, args in [
                        ("list_files", {"path": "d"}),
                        ("list_files", {"path": "."}),
                        ("read_file", {"path": "d/canary.txt"}),
                        ("write_file", {"path": "d/inner/new.txt", "content": "w"}),
                    ]:
                        r = await c.call_tool(name, args)
                        blob = text_of(r) + str(r.structured_content)
                        if CANARY in blob or "hostonly-name" in blob:
                            leaked.append((name, blob[:300]))
            finally:
                flips = int(flipper.communicate(timeout=30)[0] or 0)
    assert flips > 100, "the race never ran"
    assert not leaked, leaked[:3]
    assert sorted(p.name for p in outside.iterdir()) == ["canary.txt", "hostonly-name.txt"]


def test_the_same_race_at_tool_speed(workspace, outside):
    """The window between the check and the walk is microseconds: through MCP a few hundred
    calls rarely hit it (the old os.walk listing leaked about once in 2,500 calls), so the
    tool functions themselves are driven tens of thousands of times against the flipping
    folder."""
    import subprocess
    import sys

    from assay.tools.context import ToolContext
    from assay.tools.registry import ToolFailure, default_registry
    from assay.tools.seam import ToolCall

    (workspace / "d").mkdir()
    (workspace / "d" / "inner").mkdir()
    reg = default_registry()
    ctx = ToolContext(run_id="r", role="t", workspace=workspace, sandbox=lambda: None)
    calls = [
        ("list_files", {"path": "d"}),
        ("read_file", {"path": "d/canary.txt"}),
    ]
    prepared = [
        (reg.get(n), reg.get(n).input_model.model_validate(a), ToolCall(name=n, arguments=a, key="k")) for n, a in calls
    ]
    leaked = []
    n = 0
    flipper = subprocess.Popen(
        [sys.executable, "-c", FLIPPER, str(workspace), str(outside), "5"], stdout=subprocess.PIPE
    )
    try:
        while flipper.poll() is None:
            for spec, args, call in prepared:
                n += 1
                try:
                    out = spec.fn(ctx.for_call(call), args).model_dump_json()
                except (ToolFailure, OSError):
                    continue
                if CANARY in out or "hostonly-name" in out:
                    leaked.append((spec.name, out[:200]))
    finally:
        flips = int(flipper.communicate(timeout=30)[0] or 0)
    assert flips > 10000 and n > 5000, (flips, n)
    assert not leaked, (len(leaked), leaked[:3])
    assert sorted(p.name for p in outside.iterdir()) == ["canary.txt", "hostonly-name.txt"]


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
async def test_traps_planted_by_code_in_the_sandbox(run_workspace, outside, need, backend):
    """Symlinks out, a FIFO, and a hard link to the read-only task file, made by code the agent
    runs in the real sandbox. Reads and writes must refuse them at once: a FIFO must not hang
    the server, a hard link must not let write_file rewrite task.py."""
    workspace = run_workspace  # the tools' own confinement: no redacted view between
    from assay.sandbox import bwrap, docker

    ok, why = (bwrap if backend == "bwrap" else docker).availability()
    need(ok, f"{backend} unavailable: {why}")
    (workspace / "task.py").write_text("REFERENCE = 1\n")
    plant = (
        "import os\n"
        "os.symlink('/etc/passwd', 'pw')\n"
        f"os.symlink({str(outside / 'canary.txt')!r}, 'host')\n"
        "os.mkfifo('fifo')\n"
        # task.py is bound read-only in every sandbox, so the link fails (EXDEV); were it made,
        # write_file must still refuse the second name.
        "try:\n    os.link('task.py', 'alias.py'); print('linked')\n"
        "except OSError:\n    print('no link')\n"
        "print('planted')\n"
    )
    with open_session(workspace, sandbox_backend=backend) as s:
        async with sdk_client(s) as c:
            r = await c.call_tool("exec", {"command": ["python", "-c", plant]})
            assert r.structured_content["stdout"].endswith("planted\n"), r
            linked = r.structured_content["stdout"].startswith("linked")
            results = {}
            with anyio.fail_after(20):  # a FIFO that blocks an open would hang here
                for name, args in [
                    ("read_file", {"path": "pw"}),
                    ("read_file", {"path": "host"}),
                    ("read_file", {"path": "fifo"}),
                    ("write_file", {"path": "fifo", "content": "x"}),
                    ("diff", {"a": "fifo", "b": "task.py"}),
                    ("write_file", {"path": "alias.py", "content": "REFERENCE = 2\n"}),
                    ("write_file", {"path": "task.py", "content": "REFERENCE = 3\n"}),
                    ("list_files", {"path": "."}),
                ]:
                    results[(name, str(args))] = await c.call_tool(name, args)
    listing = results.pop(("list_files", str({"path": "."})))
    if not linked:  # alias.py is a file of its own: writing it is no way to task.py
        results.pop(("write_file", str({"path": "alias.py", "content": "REFERENCE = 2\n"})))
    for key, r in results.items():
        assert r.is_error, key
        assert "root:" not in text_of(r) and CANARY not in text_of(r)
    assert not listing.is_error
    assert (workspace / "task.py").read_text() == "REFERENCE = 1\n"
    assert (outside / "canary.txt").read_text() == f"{CANARY}\n"


def test_submit_never_copies_a_file_from_outside_the_workspace(workspace, outside, tmp_path):
    """The same flipper swaps a regular file `d` for a symlink to the host canary while the
    agent submits: no snapshot may ever hold the canary."""
    import subprocess
    import sys

    from assay.ledger import Ledger
    from assay.settings import settings
    from assay.tools.context import ToolContext
    from assay.tools.registry import default_registry
    from assay.tools.seam import ToolCall

    (workspace / "candidate.py").write_text("x = 1\n")
    (workspace / "d").write_text("inside\n")
    with Ledger.open(f"sqlite:///{tmp_path / 'submit-ledger.db'}") as led:
        run = led.create_run(job="race", kind="kernel", brain="test")
        spec = default_registry().get("submit")
        ctx = ToolContext(run_id=run.id, role="t", workspace=workspace, sandbox=lambda: None, ledger=led)
        args = spec.input_model.model_validate({"entry": "candidate.py"})
        flipper = subprocess.Popen(
            [sys.executable, "-c", FLIPPER, str(workspace), str(outside / "canary.txt"), "4"], stdout=subprocess.PIPE
        )
        n = 0
        try:
            while flipper.poll() is None:
                try:
                    spec.fn(ctx.for_call(ToolCall(name="submit", arguments={}, key="k")), args)
                except Exception:
                    continue  # a file vanished mid-walk: an error, not a leak
                n += 1
        finally:
            flipper.communicate(timeout=30)
        snapshots = settings().home / "runs" / run.id / "submissions"
        leaked = [p for p in snapshots.rglob("*") if p.is_file() and CANARY.encode() in p.read_bytes()]
    assert n > 20
    assert not leaked, f"{len(leaked)} of {n} snapshots hold a host file"
