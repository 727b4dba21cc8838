"""Approvals through the CLI: a call the manifest gates ("approve") pauses the run; `assay
approve` lets it run, `assay deny` makes the agent carry on without it; `--no-wait` leaves the
run paused (exit 1) and `assay resume` picks it up.

The gate is kernel-agent's own rule: g++ with a timeout over 30 s needs a human. The brain is
`approver` (scripted_brains.py), run by the real CLI through brain_driver.py.
"""

from __future__ import annotations

import time

import pytest
from agent_helpers import assay, reap_group, rows, run_row, spawn, wait_for, write_job

pytestmark = pytest.mark.slow

GATED_KEY_PREFIX = "c:1:approver-1-0"


def events(run_id):
    return [e for _, e in rows(run_id)["approvals"]]


def gated_calls(run_id):
    from agent_helpers import open_ledger

    with open_ledger() as ledger:
        return [
            (c.key, c.decision, c.outcome.get("is_error"), c.outcome.get("text", ""))
            for c in ledger.tool_calls(run_id)
            if c.tool == "exec"
        ]


def test_no_wait_leaves_it_paused_then_approve_and_resume(home, tmp_path):
    job = write_job(tmp_path / "job")
    first = assay("run", str(job), "--no-wait", brain="approver")
    assert first.returncode == 1, first.stdout + first.stderr
    assert "paused, waiting for approval approval-1" in first.stderr
    run_id = rows_run_id()
    assert run_row(run_id).status == "waiting_approval"
    assert events(run_id) == ["requested"]
    calls = gated_calls(run_id)
    assert len(calls) == 1 and calls[0][1] == "approve" and calls[0][2] is True  # asked, not run

    # Nothing to decide for a run that does not exist; a resume before the decision waits no more.
    bad = assay("approve", "no-such-run")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no run" in bad.stderr
    still = assay("resume", run_id, "--no-wait", brain="approver")
    assert still.returncode == 1 and run_row(run_id).status == "waiting_approval"
    assert events(run_id) == ["requested"]  # asked once, not again

    ok = assay("approve", run_id)
    assert ok.returncode == 0 and "approved approval-1" in ok.stdout
    again = assay("approve", run_id)
    assert again.returncode == 2 and "no pending approval" in again.stderr

    done = assay("resume", run_id, brain="approver")
    assert done.returncode == 1, done.stdout + done.stderr  # the tiny candidate fails verification
    assert events(run_id) == ["requested", "approved", "used"]
    ran = [c for c in gated_calls(run_id) if c[1] == "allow"]
    assert len(ran) == 1 and ran[0][2] is False and "g++" in ran[0][3]  # the approved call ran
    assert run_row(run_id).status == "failed"
    assert [k for k, _ in rows(run_id)["verdicts"]] == ["verdict:submission-1"]


def rows_run_id():
    from agent_helpers import latest_run_id

    return latest_run_id()


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_a_waiting_run_continues_on_the_decision(home, tmp_path, decision):
    # 9 s of agent time; the human takes longer than that, which is not the agent's time.
    job = write_job(tmp_path / "job", minutes=0.15)
    proc = spawn("run", str(job), brain="approver", log=tmp_path / "run.log")
    try:
        run_id = wait_for(rows_run_id, what="the run row")
        wait_for(lambda: run_row(run_id).status == "waiting_approval", timeout=120, what="the approval")
        t_paused = time.monotonic()
        time.sleep(max(0.0, 10 - (time.monotonic() - t_paused)))
        out = assay(decision, run_id)
        assert out.returncode == 0, out.stderr
        code = proc.wait(timeout=240)
    finally:
        reap_group(proc)
    log = (tmp_path / "run.log").read_text()
    assert code == 1, log
    assert "approval needed" in log
    ws = home / "runs" / run_id / "workspace"
    if decision == "approve":
        assert events(run_id) == ["requested", "approved", "used"]
        assert [c[1] for c in gated_calls(run_id)] == ["approve", "allow"]
        assert not (ws / "after-deny.txt").exists()
    else:
        assert events(run_id) == ["requested", "denied"]
        assert [c[1] for c in gated_calls(run_id)] == ["approve"]  # never ran
        assert (ws / "after-deny.txt").read_text() == "carried on\n"  # the agent went on without it
    run = run_row(run_id)
    assert run.status == "failed" and "time budget" not in (run.error or "")
    assert [k for k, _ in rows(run_id)["submissions"]] == ["submission-1"]
