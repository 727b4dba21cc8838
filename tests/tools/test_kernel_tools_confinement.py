"""The kernel tools touch workspace files on the host, as the host's (often root) user, after
the agent's own code has run in the sandbox: each must do so by descriptor, never by a name the
agent may have turned into a symlink or a hard link since the check.

Found by a red-team review: autotune wrote its tuning source through a planted `.assay-tune`
symlink (any host file could be overwritten), read_task returned a host file its own task code
had swapped in during inspection, and write_candidate wrote through a hard link to task.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tools_helpers import open_session, sdk_client

from assay.kernels.autotune import TUNE_DIR

pytestmark = pytest.mark.anyio

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kernel"


def test_the_tuning_source_is_never_written_through_a_symlink(tmp_path):
    from assay.kernels.autotune import _write_new

    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir(), outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("a host file\n")
    os.symlink(outside, ws / TUNE_DIR)
    with pytest.raises(OSError):
        _write_new(ws / TUNE_DIR, "tune_x", "print(1)\n")
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
    os.unlink(ws / TUNE_DIR)
    (ws / TUNE_DIR).mkdir()
    written = _write_new(ws / TUNE_DIR, "tune_x", "print(1)\n")
    # The name is fresh each time, so no symlink planted under a predictable one is followed.
    assert written.read_text() == "print(1)\n" and not written.is_symlink()
    assert _write_new(ws / TUNE_DIR, "tune_x", "print(2)\n") != written
    assert victim.read_text() == "a host file\n"


async def test_autotune_through_a_planted_folder_symlink_writes_nothing_outside(workspace, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "task.py").write_text((EXAMPLES / "gelu.py").read_text())
    with open_session(workspace, kind="kernel") as s:
        async with sdk_client(s) as c:
            planted = await c.call_tool(
                "exec", {"command": ["python", "-c", f"import os; os.symlink({str(outside)!r}, {TUNE_DIR!r})"]}
            )
            assert not planted.is_error, planted.content[0].text
            tuned = await c.call_tool("autotune", {"backend": "cpp", "budget_s": 5})
    assert list(outside.iterdir()) == []
    assert tuned.structured_content["ok"] is False and tuned.structured_content["error"] == "workspace"


async def test_read_task_returns_the_task_it_inspected_not_a_file_swapped_in(workspace, tmp_path):
    host_only = tmp_path / "criteria.toml"
    host_only.write_text("held_out_seed = 424242\n")
    swap = (
        "import os as _os\n"
        "if _os.path.isfile('task.py') and not _os.path.islink('task.py'):\n"
        "    _os.rename('task.py', 'task.orig.py')\n"
        f"    _os.symlink({str(host_only)!r}, 'task.py')\n"
    )
    (workspace / "task.py").write_text(swap + (EXAMPLES / "gelu.py").read_text())
    with open_session(workspace, kind="kernel") as s:
        async with sdk_client(s) as c:
            seen = await c.call_tool("read_task", {})
    # The task's code tried to swap itself for a link to a host file; task.py is bound read-only
    # in every sandbox, so the rename fails (EBUSY) and nothing of the host file is read back.
    assert not (workspace / "task.py").is_symlink() and (workspace / "task.py").read_text().startswith(swap)
    text = seen.content[0].text + str(seen.structured_content)
    assert "424242" not in text
    if not seen.is_error:
        assert seen.structured_content["source"].startswith(swap)
    else:
        assert "busy" in seen.content[0].text.lower()


async def test_write_candidate_refuses_a_hard_link_to_the_task(workspace):
    task = (EXAMPLES / "gelu.py").read_text()
    (workspace / "task.py").write_text(task)
    with open_session(workspace, kind="kernel") as s:
        async with sdk_client(s) as c:
            linked = await c.call_tool(
                "exec", {"command": ["python", "-c", "import os; os.link('task.py', 'alias.py')"]}
            )
            assert not linked.is_error, linked.content[0].text
            wrote = await c.call_tool("write_candidate", {"path": "alias.py", "source": "class ModelNew: pass\n"})
    if linked.structured_content["exit_code"] == 0:  # the link was made: the write must refuse it
        assert wrote.is_error and "hard links" in wrote.content[0].text
    else:  # task.py is a read-only bind in the sandbox: no link to it can be made at all
        assert "Errno" in linked.structured_content["stderr"] and not wrote.is_error
    assert (workspace / "task.py").read_text() == task
