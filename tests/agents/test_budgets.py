"""Budgets stop a runaway brain cleanly: the run ends (status failed), the verifier still writes
its signed verdict ("no submission"), the run says which budget ran out, and every call made
before the stop is in the ledger."""

from __future__ import annotations

import time

from agent_helpers import assert_verdicts_are_the_verifiers, install_brain, open_ledger, rows, run_row, write_job
from scripted_brains import calls, exec_py, responses


def forever(batch):
    def brain(messages, info):
        return calls("loop", responses(messages) + 1, batch)

    return brain


def start(tmp_path, **budget):
    from assay.agents.job import load_job
    from assay.agents.runner import start_run

    return start_run(load_job(write_job(tmp_path / "job", **budget)))


def check_stopped(outcome, home, budget_words: str) -> dict:
    run = run_row(outcome.run_id)
    assert run.status == "failed"
    assert budget_words in (run.error or ""), run.error
    got = rows(outcome.run_id)
    assert got["submissions"] == []
    assert [k for k, _ in got["verdicts"]] == ["verdict:none"]
    payload = outcome.verdict["payload"]
    assert payload["passed"] is False and payload["reasons"][0].startswith("no submission")
    assert_verdicts_are_the_verifiers(home)
    return got


def test_step_budget(home, tmp_path, monkeypatch):
    install_brain(monkeypatch, forever([("list_files", {})]))
    outcome = start(tmp_path, steps=3)
    got = check_stopped(outcome, home, "step budget spent (3 steps)")
    assert [k for k, _ in got["steps"]] == ["step-1", "step-2", "step-3"]
    assert [k for k, _, _ in got["tool_calls"]] == [f"c:{i}:loop-{i}-0" for i in (1, 2, 3)]
    assert run_row(outcome.run_id).budget_used["steps"] == 3


def test_token_budget(home, tmp_path, monkeypatch):
    big = "x " * 2000  # about 2000 tokens of arguments a step
    install_brain(monkeypatch, forever([("write_file", {"path": "big.txt", "content": big})]))
    outcome = start(tmp_path, steps=50, tokens=5000)
    got = check_stopped(outcome, home, "token")
    # It stopped after a couple of steps, long before the step budget; the call of the
    # request that crossed the limit never ran.
    assert 1 <= len(got["steps"]) <= 4
    ran = len(got["tool_calls"])
    assert ran == len(got["steps"]) - 1
    used = run_row(outcome.run_id).budget_used
    assert used["tokens"] <= 5000


def test_time_budget_between_steps(home, tmp_path, monkeypatch):
    install_brain(monkeypatch, forever([exec_py("import time; time.sleep(2)")]))
    t0 = time.monotonic()
    outcome = start(tmp_path, steps=50, minutes=0.15)  # 9 s of agent time
    check_stopped(outcome, home, "time budget spent")
    got = rows(outcome.run_id)
    assert 2 <= len(got["steps"]) <= 5
    assert len(got["tool_calls"]) >= 2
    assert time.monotonic() - t0 < 90


def run_long_step(home, tmp_path, monkeypatch):
    install_brain(monkeypatch, forever([exec_py("import time; time.sleep(25)", timeout_s=29)]))
    t0 = time.monotonic()
    outcome = start(tmp_path, steps=50, minutes=0.05)  # 3 s
    return outcome, time.monotonic() - t0


def test_time_budget_cuts_a_long_step(home, tmp_path, monkeypatch):
    """A single tool call may not carry a run far past its time budget."""
    outcome, took = run_long_step(home, tmp_path, monkeypatch)
    check_stopped(outcome, home, "time budget spent (0.05 min) during step 1")
    assert took < 25, f"the run went on for {took:.0f}s on a 3 s budget"
    got = rows(outcome.run_id)
    assert [(k, d) for k, _, d in got["policy_decisions"]] == [("c:1:loop-1-0", "allow")]


def test_time_budget_cut_call_is_recorded_as_interrupted(home, tmp_path, monkeypatch):
    """The runner closes the `assay mcp` server while the exec runs; the SDK's grace runs out and
    the server gets SIGTERM, with the tool's thread still in its sleep. The call is in the ledger
    all the same, as interrupted, with the decision that let it run."""
    outcome, _ = run_long_step(home, tmp_path, monkeypatch)
    got = rows(outcome.run_id)
    assert [(k, t, d) for k, t, d in got["tool_calls"]] == [("c:1:loop-1-0", "exec", "allow")]
    with open_ledger() as ledger:
        (call,) = ledger.tool_calls(outcome.run_id)
    said = f"{call.error} {call.outcome}"
    assert "exec was interrupted (the server was stopped by SIGTERM)" in said and "the tool may have run" in said, said
