"""The run workflow's bookkeeping, through the real server, gateway, ledger and verifier."""

from __future__ import annotations

from agent_helpers import install_brain, rows, run_row, write_job
from pydantic_ai.messages import ModelResponse, ToolCallPart
from scripted_brains import exec_py, responses, text

LIST = exec_py("import os; print(sorted(os.listdir('.')))")


def test_a_call_id_reused_in_a_later_step_is_a_new_call(home, tmp_path, monkeypatch):
    """Models reuse tool-call ids across requests (some always say 'call_0'). The gateway keys a
    call by step and id, so step 3's call runs, not step 1's recorded answer replayed."""
    from assay.agents.job import load_job
    from assay.agents.runner import start_run

    plan = [LIST, ("write_file", {"path": "b.txt", "content": "x"}), LIST]
    seen = []

    def brain(messages, info):
        n = responses(messages)
        if n < len(plan):
            tool, args = plan[n]
            return ModelResponse(parts=[ToolCallPart(tool, args, tool_call_id="call_0")])
        return text("done")

    install_brain(monkeypatch, brain, seen=seen)
    outcome = start_run(load_job(write_job(tmp_path / "job", steps=10)))
    got = rows(outcome.run_id)
    assert [(k, t) for k, t, _ in got["tool_calls"]] == [
        ("c:1:call_0", "exec"),
        ("c:2:call_0", "write_file"),
        ("c:3:call_0", "exec"),
    ]
    assert [k for k, _, _ in got["policy_decisions"]] == ["c:1:call_0", "c:2:call_0", "c:3:call_0"]
    last_exec = seen[-1][-1].parts[0].content
    assert "b.txt" in last_exec["stdout"], last_exec  # a fresh result, not step 1's
    assert run_row(outcome.run_id).status == "failed"


def test_the_job_s_brain_is_what_the_run_records(home, tmp_path, monkeypatch):
    from assay.agents.job import load_job
    from assay.agents.runner import start_run

    install_brain(monkeypatch, lambda m, i: text("nothing to do"))
    outcome = start_run(load_job(write_job(tmp_path / "job", brain="local")))
    run = run_row(outcome.run_id)
    assert run.brain == "local" and run.kind == "kernel"
    assert run.spec["job"]["brain"] == "local"
    assert [k for k, _ in rows(outcome.run_id)["steps"]] == ["step-1"]
    assert outcome.verdict["payload"]["reasons"][0].startswith("no submission")
