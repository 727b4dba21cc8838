"""Crash and resume: kill -9 the `assay run` process at several points, `assay resume RUN`
finishes the run, and the ledger holds every row exactly once, with one verdict per submission
and an intact chain.

The run is the real CLI in its own process (through brain_driver.py, with the `steady` brain),
so a kill takes down exactly what a crash would: the run process; its MCP server and sandbox
are left to end on their own, its verifier dies with it (PDEATHSIG).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from agent_helpers import (
    assay,
    assert_verdicts_are_the_verifiers,
    latest_run_id,
    reap_group,
    rows,
    run_row,
    spawn,
    wait_for,
    write_job,
)

pytestmark = pytest.mark.slow

# The `steady` brain's calls, step by step (scripted_brains.py): what a finished run must hold.
EXPECTED_CALLS = {
    "c:1:steady-1-0": "list_files",
    "c:2:steady-2-0": "write_file",
    "c:3:steady-3-0": "exec",
    "c:4:steady-4-0": "read_file",
    "c:4:steady-4-1": "exec",
    "c:5:steady-5-0": "write_file",
    "c:6:steady-6-0": "submit",
}


def verifier_of(parent: int) -> int | None:
    """The pid of `python -m assay.verifiers verify` started by `parent`, if it is running."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and b"assay.verifiers" in argv and b"verify" in argv:
            return int(entry.name)
    return None


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def kill9(proc) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def check_complete(run_id: str, home: Path, url: str | None = None) -> None:
    got = rows(run_id, url)
    assert [k for k, _ in got["steps"]] == [f"step-{i}" for i in range(1, 7)]
    calls = {k: t for k, t, _ in got["tool_calls"]}
    assert calls == EXPECTED_CALLS, got["tool_calls"]
    assert len(got["tool_calls"]) == len(EXPECTED_CALLS)  # no key twice
    decisions = {k: t for k, t, _ in got["policy_decisions"]}
    assert decisions == EXPECTED_CALLS, got["policy_decisions"]
    assert len(got["policy_decisions"]) == len(EXPECTED_CALLS)
    assert all(d == "allow" for _, _, d in got["tool_calls"])
    assert [k for k, _ in got["submissions"]] == ["submission-1"]
    assert [k for k, _ in got["verdicts"]] == ["verdict:submission-1"]
    run = run_row(run_id, url)
    assert run.status == "failed"  # the tiny candidate fails the verifier's source scan
    assert run.budget_used["steps"] == 6
    verdicts = assert_verdicts_are_the_verifiers(home, url)
    assert [v.run_id for v in verdicts].count(run_id) == 1
    env = {"ASSAY_LEDGER_URL": url} if url else None
    out = assay("ledger", "verify", env=env, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def resume(run_id: str, log: Path, env=None):
    return spawn("resume", run_id, brain="steady", env=env, log=log)


def test_kill_between_steps_mid_tool_call_and_mid_verify_then_resume(home, tmp_path):
    job = write_job(tmp_path / "job")
    procs = []
    try:
        # 1. Between steps: step 2 is recorded, step 3's slow call has not started.
        p = spawn("run", str(job), brain="steady", log=tmp_path / "run.log")
        procs.append(p)
        run_id = wait_for(latest_run_id, what="the run row")
        ws = home / "runs" / run_id / "workspace"
        wait_for(lambda: ("step-2", "agent") in rows(run_id)["steps"], what="step 2")
        kill9(p)
        assert not (ws / "slow-started").exists() or "c:3:steady-3-0" not in {
            k for k, _, _ in rows(run_id)["tool_calls"]
        }

        # 2. Mid tool call: the slow exec of step 3 is running in the sandbox.
        p = resume(run_id, tmp_path / "resume1.log")
        procs.append(p)
        wait_for(lambda: (ws / "slow-started").exists(), what="the slow call to start")
        assert "c:3:steady-3-0" not in {k for k, _, _ in rows(run_id)["tool_calls"]}
        kill9(p)

        # 3. Mid verify: the agent has submitted and the verifier process is at work.
        p = resume(run_id, tmp_path / "resume2.log")
        procs.append(p)
        wait_for(lambda: run_row(run_id).status == "verifying", timeout=180, what="verifying")
        # Frozen, the verifier cannot finish first however fast it is; SIGKILL (its PDEATHSIG)
        # reaches a stopped process all the same.
        verifier = wait_for(lambda: verifier_of(p.pid), every=0.01, what="the verifier process")
        os.kill(verifier, signal.SIGSTOP)
        kill9(p)
        wait_for(
            lambda: not Path(f"/proc/{verifier}").exists() or _zombie(verifier), what="the verifier to die with the run"
        )
        assert rows(run_id)["verdicts"] == []  # the verifier died with the run

        # The last resume finishes it.
        done = assay("resume", run_id, brain="steady", timeout=300)
        assert done.returncode == 1, done.stdout + done.stderr  # a failing verdict, reported
        assert "FAIL" in done.stdout
    finally:
        for p in procs:
            reap_group(p)
    check_complete(run_id, home)
    # Resuming a finished run changes nothing.
    again = assay("resume", run_id, brain="steady", timeout=120)
    assert again.returncode == 1
    check_complete(run_id, home)


@pytest.mark.postgres
def test_kill_mid_tool_call_and_mid_verify_on_postgresql(home, tmp_path, pg_url, monkeypatch):
    monkeypatch.setenv("ASSAY_LEDGER_URL", pg_url)
    job = write_job(tmp_path / "job")
    procs = []
    try:
        p = spawn("run", str(job), brain="steady", log=tmp_path / "run.log")
        procs.append(p)
        run_id = wait_for(lambda: latest_run_id(pg_url), what="the run row")
        ws = home / "runs" / run_id / "workspace"
        wait_for(lambda: (ws / "slow-started").exists(), what="the slow call to start")
        kill9(p)

        p = resume(run_id, tmp_path / "resume1.log")
        procs.append(p)
        wait_for(lambda: run_row(run_id, pg_url).status == "verifying", timeout=180, what="verifying")
        time.sleep(1.5)
        kill9(p)

        done = assay("resume", run_id, brain="steady", timeout=300)
        assert done.returncode == 1, done.stdout + done.stderr
    finally:
        for p in procs:
            reap_group(p)
    assert not (home / "checkpoints.db").exists()  # checkpoints went to PostgreSQL, beside the ledger
    check_complete(run_id, home, pg_url)
