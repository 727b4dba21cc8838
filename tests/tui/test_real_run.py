"""The whole path, once: the main job started from the TUI through the real runner, MCP
server, gateway, sandbox and verifier, pausing on a gated call that is approved by a key.

The playbook never asks for a long build, so this run's brain does (a FunctionModel, as the
runtime's own tests use): `exec g++` with a 60 s timeout, which the kernel-agent manifest
gates behind approval. Everything after the brain is the real thing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart

from assay.agents.kernel import playbook as kernel_playbook
from assay.agents.kernel.kind import KIND
from assay.ledger import RunStatus
from assay.tui.app import AssayApp
from assay.tui.approvals import ApprovalsScreen
from assay.tui.live import LiveScreen

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

JOB = Path(__file__).resolve().parents[2] / "examples" / "kernel" / "softmax.toml"
LONG_BUILD = {"command": ["g++", "--version"], "timeout_s": 60}


def long_build_brain(messages, info) -> ModelResponse:
    n = sum(isinstance(m, ModelResponse) for m in messages) + 1
    note = kernel_playbook._human_note(messages)
    if n == 1 or (note is not None and note.startswith("A human approved")):
        return ModelResponse(parts=[ToolCallPart("exec", dict(LONG_BUILD), tool_call_id=f"lb-{n}")])
    return ModelResponse(parts=[TextPart("built; nothing to submit")])


def _sandbox_available() -> tuple[bool, str]:
    from assay.sandbox import bwrap, docker

    found = [(b.availability()) for b in (bwrap, docker)]
    return any(ok for ok, _ in found), "; ".join(detail for _, detail in found)


async def test_start_the_main_job_and_approve_its_gated_build(need, tui, monkeypatch, _isolated_home):
    ok, why = _sandbox_available()
    need(ok, f"no sandbox backend: {why}")
    from assay.policies.manifest import SHIPPED_DIR
    from assay.policies.signing import keygen, sign_manifest

    keygen(if_missing=True)  # what `make sign-examples` does for an operator
    for path in SHIPPED_DIR.glob("*.toml"):
        sign_manifest(path, to_store=True)
    monkeypatch.setattr(KIND, "playbook", long_build_brain)  # the kind's playbook brain, on this instance

    app = AssayApp(poll_s=0.2, job_hint=str(JOB))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("n", "enter")
        await tui.until(pilot, lambda: isinstance(app.screen, LiveScreen), timeout=30, what="the run to start")
        run_id = app.screen.run_id
        ledger = app.ledger()
        await tui.until(
            pilot,
            lambda: ledger.get_run(run_id).status == RunStatus.waiting_approval.value,
            timeout=120,
            what="the run to pause for approval",
        )
        await tui.until(
            pilot,
            lambda: any("needs approval approval-1 for exec" in n.message for n in app._notifications),
            what="the runner's word that it waits",
        )
        await pilot.press("a")
        assert isinstance(app.screen, ApprovalsScreen)
        await tui.until(pilot, lambda: app.screen._pending, timeout=20, what="the approval on screen")
        await pilot.press("y")
        await tui.until(
            pilot,
            lambda: RunStatus(ledger.get_run(run_id).status).finished,
            timeout=240,
            what="the run to finish after approval",
        )

        events = [(e.event, e.actor) for e in ledger.approval_events(run_id)]
        assert events == [("requested", "gateway"), ("approved", "tui"), ("used", "gateway")]
        ran = [c for c in ledger.tool_calls(run_id) if c.tool == "exec" and c.decision == "allow"]
        assert len(ran) == 1 and "g++" in (ran[0].outcome or {}).get("text", "")
        # Nothing was submitted, so the verifier's signed verdict says so; the TUI only shows it.
        (verdict,) = ledger.verdicts(run_id)
        assert verdict.payload["passed"] is False
        # The runner returns after the ledger says finished; then the TUI lets go of the run.
        await tui.until(pilot, lambda: run_id not in app.driven, timeout=30, what="the runner to return")
        # notify() posts a message; the notification joins app._notifications when it is handled.
        await tui.until(
            pilot,
            lambda: any(f"run {run_id} ended: failed" in n.message for n in app._notifications),
            timeout=10,
            what="the run's end on screen",
        )
