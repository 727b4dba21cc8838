"""The run workflow: a LangGraph StateGraph, checkpointed after every node.

    agent_step --(a call needs approval)--> approval --(human decides)--> agent_step
        |  (submitted, finished, or out of budget)
        v
      verify --> report

One agent_step is one model request and the tool calls it asks for, so a run killed at any
point resumes from the last finished step: the model's history is in the checkpoint, every
tool call is in the ledger under a key the replayed step reuses, and the verifier appends its
verdict under a key of its own. The state holds only plain JSON (strict msgpack).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict

import anyio

# langgraph ships py.typed at its top level only, so pyright asks for stubs of the subpackage.
from langgraph.graph import END, START, StateGraph  # pyright: ignore[reportMissingTypeStubs]
from langgraph.runtime import Runtime
from langgraph.types import interrupt
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequest, UserPromptPart
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import UsageLimits

from assay.agents.job import Job
from assay.ledger import Ledger, RunStatus

# Each agent step is a few graph steps; this bounds a runaway graph well above any budget.
RECURSION_LIMIT = 4 * 10_000 + 16


class RunState(TypedDict, total=False):
    messages: list[dict[str, Any]]
    step: int
    requests: int
    input_tokens: int
    output_tokens: int
    started: float
    # Seconds the agent itself has worked (its steps), the measure of the time budget: time
    # spent waiting for a human's approval, or while no process ran the run, is not its time.
    active_s: float
    outcome: str  # submitted | finished | budget | error
    note: str
    approval: dict[str, Any] | None
    verdict: dict[str, Any] | None


@dataclass
class RunDeps:
    run_id: str
    job: Job
    ledger: Ledger
    agent: Agent
    prompt: str
    verify: Callable[[str], dict[str, Any]]
    on_event: Callable[[str, dict[str, Any]], None] = field(default=lambda kind, data: None)


def _history(state: RunState) -> list[ModelMessage]:
    return ModelMessagesTypeAdapter.validate_python(state.get("messages") or [])


def _dump(messages: list[ModelMessage]) -> list[dict[str, Any]]:
    return ModelMessagesTypeAdapter.dump_python(messages, mode="json")


def _budget_left(state: RunState, job: Job) -> str | None:
    b = job.budget
    if state.get("step", 0) >= b.steps:
        return f"step budget spent ({b.steps} steps)"
    if state.get("active_s", 0.0) >= b.minutes * 60:
        return f"time budget spent ({b.minutes:g} min)"
    if b.tokens is not None and state.get("input_tokens", 0) + state.get("output_tokens", 0) >= b.tokens:
        return f"token budget spent ({b.tokens} tokens)"
    return None


async def one_step(
    agent: Agent, history: list[ModelMessage], prompt: str, limits: UsageLimits, max_tokens: int | None = None
):
    """Run the agent until its next model request has been answered and its tool calls done.

    Returns (messages, final_text or None, usage)."""
    from pydantic_ai.agent import CallToolsNode, ModelRequestNode
    from pydantic_graph import End

    # A model may not write past the token budget: UsageLimits only looks once the answer is
    # in, so without a cap a rambling model generates up to its context window first.
    settings = ModelSettings(max_tokens=max_tokens) if max_tokens is not None else None
    async with agent.iter(
        None if history else prompt, message_history=history or None, usage_limits=limits, model_settings=settings
    ) as run:
        node = run.next_node
        while True:
            if isinstance(node, End):
                return run.all_messages(), str(node.data.output), run.usage
            if isinstance(node, CallToolsNode):
                nxt = await run.next(node)
                if isinstance(nxt, End):
                    return run.all_messages(), str(nxt.data.output), run.usage
                if isinstance(nxt, ModelRequestNode):
                    return run.all_messages() + [nxt.request], None, run.usage
                node = nxt
                continue
            node = await run.next(node)


async def agent_step(state: RunState, runtime: Runtime[RunDeps]) -> RunState:
    deps = runtime.context
    started = state.get("started") or time.time()
    state = {**state, "started": started}
    spent = _budget_left(state, deps.job)
    if spent:
        return {"started": started, "outcome": "budget", "note": spent}
    step = state.get("step", 0) + 1
    tokens_left = None
    if deps.job.budget.tokens is not None:
        tokens_left = deps.job.budget.tokens - state.get("input_tokens", 0) - state.get("output_tokens", 0)
    limits = UsageLimits(request_limit=1, total_tokens_limit=tokens_left)
    deps.on_event("step", {"step": step})
    active = state.get("active_s", 0.0)
    time_left = deps.job.budget.minutes * 60 - active
    t0 = time.monotonic()
    try:
        # The time budget holds inside a step too: a call still running when it runs out is
        # cancelled (the gateway records it as interrupted) and the run goes to the verifier.
        with anyio.fail_after(time_left):
            messages, final, usage = await one_step(
                deps.agent, _history(state), deps.prompt, limits, max_tokens=tokens_left
            )
    except Exception as exc:  # a brain that breaks ends the run honestly, recorded, not a crash
        from pydantic_ai.exceptions import UsageLimitExceeded

        active += time.monotonic() - t0
        if isinstance(exc, TimeoutError):
            outcome, note = "budget", f"time budget spent ({deps.job.budget.minutes:g} min) during step {step}"
        else:
            outcome = "budget" if isinstance(exc, UsageLimitExceeded) else "error"
            note = f"{type(exc).__name__}: {exc}"[:500]
        deps.ledger.record_step(deps.run_id, key=f"step-{step}", name="agent", payload={"error": note})
        return {"started": started, "step": step, "active_s": active, "outcome": outcome, "note": note}
    active += time.monotonic() - t0
    calls = [
        {"tool": p.tool_name, "id": p.tool_call_id}
        for m in messages[len(state.get("messages") or []) :]
        for p in getattr(m, "parts", [])
        if getattr(p, "part_kind", "") == "tool-call"
    ]
    out: RunState = {
        "started": started,
        "step": step,
        "active_s": active,
        "messages": _dump(messages),
        "requests": state.get("requests", 0) + usage.requests,
        "input_tokens": state.get("input_tokens", 0) + usage.input_tokens,
        "output_tokens": state.get("output_tokens", 0) + usage.output_tokens,
        "approval": pending_approval(deps.ledger, deps.run_id),
    }
    deps.ledger.record_step(
        deps.run_id, key=f"step-{step}", name="agent", payload={"tool_calls": calls, "final": final}
    )
    deps.ledger.set_run_status(deps.run_id, RunStatus.running, budget_used=_used(out))
    if deps.ledger.submissions(deps.run_id):
        out.update(outcome="submitted", note=final or "submitted")
    elif final is not None:
        out.update(outcome="finished", note=final)
    return out


def pending_approval(ledger: Ledger, run_id: str) -> dict[str, Any] | None:
    events = ledger.approval_events(run_id)
    decided = {e.request_key for e in events if e.event in ("approved", "denied")}
    for e in events:
        if e.event == "requested" and e.key not in decided:
            return {"id": e.key, "tool": e.tool, "arguments": e.arguments, "reason": e.reason}
    return None


def decision_for(ledger: Ledger, run_id: str, approval_id: str) -> str | None:
    for e in ledger.approval_events(run_id):
        if e.request_key == approval_id and e.event in ("approved", "denied"):
            return e.event
    return None


async def approval(state: RunState, runtime: Runtime[RunDeps]) -> RunState:
    deps = runtime.context
    pending = state.get("approval")
    assert pending is not None  # the graph routes here only with an approval pending
    deps.ledger.set_run_status(deps.run_id, RunStatus.waiting_approval)
    decision = interrupt(pending)
    deps.ledger.set_run_status(deps.run_id, RunStatus.running)
    history = _history(state)
    verb = "approved" if decision == "approved" else "denied"
    note = f"A human {verb} {pending['id']} ({pending['tool']})." + (
        " Make the same call again, with the same arguments, to run it." if verb == "approved" else " Do not retry it."
    )
    if history and isinstance(history[-1], ModelRequest):
        history[-1] = ModelRequest(parts=[*history[-1].parts, UserPromptPart(content=note)])
    else:
        history.append(ModelRequest(parts=[UserPromptPart(content=note)]))
    return {"approval": None, "messages": _dump(history)}


async def verify(state: RunState, runtime: Runtime[RunDeps]) -> RunState:
    deps = runtime.context
    deps.ledger.set_run_status(deps.run_id, RunStatus.verifying, budget_used=_used(state))
    deps.on_event("verify", {})
    return {"verdict": deps.verify(deps.run_id)}


async def report(state: RunState, runtime: Runtime[RunDeps]) -> RunState:
    deps = runtime.context
    verdict = state.get("verdict") or {}
    passed = bool(verdict.get("payload", {}).get("passed"))
    run = deps.ledger.get_run(deps.run_id)
    if run is not None and not RunStatus(run.status).finished:
        deps.ledger.set_run_status(
            deps.run_id,
            RunStatus.passed if passed else RunStatus.failed,
            budget_used=_used(state),
            error=None if passed else (state.get("note") or None),
        )
    return {}


def _used(state: RunState) -> dict[str, Any]:
    return {
        "steps": state.get("step", 0),
        "requests": state.get("requests", 0),
        "tokens": state.get("input_tokens", 0) + state.get("output_tokens", 0),
        "seconds": round(time.time() - state.get("started", time.time()), 1),
        "agent_seconds": round(state.get("active_s", 0.0), 1),
    }


def _after_step(state: RunState) -> str:
    if state.get("approval"):
        return "approval"
    if state.get("outcome"):
        return "verify"
    return "agent_step"


def build_graph() -> StateGraph[RunState, RunDeps, RunState, RunState]:
    g = StateGraph(RunState, context_schema=RunDeps)
    for name, node in (("agent_step", agent_step), ("approval", approval), ("verify", verify), ("report", report)):
        # langgraph's own signature leaves CachePolicy's type argument open.
        g.add_node(name, node)  # pyright: ignore[reportUnknownMemberType]
    g.add_edge(START, "agent_step")
    g.add_conditional_edges("agent_step", _after_step, ["approval", "verify", "agent_step"])
    g.add_edge("approval", "agent_step")
    g.add_edge("verify", "report")
    g.add_edge("report", END)
    return g
