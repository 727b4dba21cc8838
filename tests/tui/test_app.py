"""The app driven by keys (Textual's Pilot), while the test writes the ledger the way a run,
the gateway and the verifier do. Nothing is stubbed but the runner in the two tests that
start a run (the runtime has its own tests; here it is the TUI's wiring that is checked)."""

from __future__ import annotations

import threading

import pytest
from textual.widgets import DataTable, Input

from assay.agents.runner import RunOutcome
from assay.agents.workflow import decision_for
from assay.ledger import RunStatus
from assay.tui import app as app_module
from assay.tui.app import AssayApp
from assay.tui.approvals import ApprovalsScreen
from assay.tui.live import LiveScreen
from assay.tui.verdict import VerdictScreen

pytestmark = pytest.mark.anyio

SIZE = (80, 24)


def rows(app) -> list[str]:
    table = app.screen.query_one(DataTable)
    return [table.coordinate_to_cell_key((i, 0))[0].value for i in range(table.row_count)]


def notes(app) -> list[str]:
    return [n.message for n in app._notifications]


async def test_runs_filter_and_sort(filled, tui):
    app = AssayApp(poll_s=0.1, clock=lambda: tui.NOW)
    async with app.run_test(size=SIZE) as pilot:
        await tui.until(pilot, lambda: len(rows(app)) == 4, what="four runs")
        assert rows(app) == [tui.RUNNING, tui.WAITING, tui.FAILED, tui.PASSED]
        await tui.see(pilot, "#runs-status", "1 waiting for approval")
        await pilot.press("slash", *"layernorm")
        await tui.until(pilot, lambda: rows(app) == [tui.FAILED], what="the filter")
        await tui.see(pilot, "#runs-status", "1 of 4 runs")
        await pilot.press("escape")  # leaves the filter, keeps it
        assert app.focused is app.screen.query_one(DataTable)
        await pilot.press("escape")  # clears it
        await tui.until(pilot, lambda: len(rows(app)) == 4, what="filter cleared")
        await pilot.press("s")
        assert rows(app)[0] == tui.PASSED
        await tui.see(pilot, "#runs-status", "sort: oldest")


async def test_live_run_shows_steps_and_calls_as_they_arrive(ledger, tui):
    run = ledger.create_run(
        job="examples/kernel/softmax.toml",
        kind="kernel",
        brain="playbook",
        budget={"steps": 40, "minutes": 10, "tokens": None},
    )
    ledger.set_run_status(run.id, RunStatus.running)
    app = AssayApp(poll_s=0.1)
    async with app.run_test(size=SIZE) as pilot:
        await tui.until(pilot, lambda: rows(app) == [run.id], what="the run")
        await pilot.press("enter")
        assert isinstance(app.screen, LiveScreen) and app.screen.run_id == run.id
        await tui.until(pilot, lambda: "nothing recorded yet" in tui.text(app, "#detail"), what="empty timeline")

        # The gateway decides, the tool runs: the call is on screen, in flight, with its rule.
        ledger.record_policy_decision(
            run.id,
            key="1:c0",
            tool="build",
            decision="allow",
            reason="allowed by rule build#0",
            detail={"rule": "build#0", "fingerprint": "f1"},
        )
        await tui.until(pilot, lambda: rows(app) == ["call:1:c0"], what="the call in flight")
        await tui.until(
            pilot, lambda: "build 1:c0 running" in tui.text(app, "#activity-label"), what="the progress line"
        )
        assert app.screen.query_one("#activity-bar").display  # work under way: the bar moves

        # ...it ends (recorded redacted, as the gateway does), and the agent's step is recorded.
        ledger.record_tool_call(
            run.id,
            key="1:c0",
            tool="build",
            arguments={"path": "kernel.cpp", "token": "[[SECRET:k_1]]"},
            decision="allow",
            result="built kernel.so",
            outcome={"text": "built kernel.so", "is_error": False},
        )
        ledger.record_step(
            run.id, key="step-1", name="agent", payload={"tool_calls": [{"tool": "build", "id": "c0"}], "final": None}
        )
        ledger.set_run_status(
            run.id, RunStatus.running, budget_used={"steps": 1, "requests": 1, "tokens": 0, "seconds": 2.0}
        )
        await tui.until(pilot, lambda: rows(app) == ["call:1:c0", "step:step-1"], what="the step")
        table = app.screen.query_one(DataTable)
        assert str(table.get_cell("call:1:c0", "summary")).startswith("ok ")
        await tui.until(pilot, lambda: "steps 1/40" in tui.text(app, "#steps-label"), what="budget")
        # Following the newest line; the call's detail shows what the gateway recorded, no more.
        await pilot.press("up")
        await tui.see(pilot, "#detail", "policy: allow by rule build#0", "[[SECRET:k_1]]")
        await pilot.press("escape")
        assert not isinstance(app.screen, LiveScreen)


async def test_approve_a_gated_call_from_the_keyboard(filled, tui, monkeypatch):
    monkeypatch.setattr(app_module, "PICKUP_S", 0.3)
    resumed: list[str] = []

    def resume(run_id, *, wait, on_event, ledger):
        # Stands in for agents.runner.resume_run (which needs the run's MCP server and sandbox).
        resumed.append(run_id)
        ledger.set_run_status(run_id, RunStatus.running)
        return RunOutcome(run_id, "running")

    app = AssayApp(poll_s=0.1, clock=lambda: tui.NOW, resume=resume)
    async with app.run_test(size=SIZE) as pilot:
        await tui.until(pilot, lambda: len(rows(app)) == 4, what="runs")
        await pilot.press("a")
        assert isinstance(app.screen, ApprovalsScreen)
        await tui.until(pilot, lambda: rows(app) == [f"{tui.WAITING}/approval-1"], what="the pending approval")
        await tui.see(pilot, "#explain", "g++ -O3 -fopenmp -shared kernel.cpp -o kernel.so", "long builds")
        await pilot.press("y")
        await tui.until(pilot, lambda: decision_for(filled, tui.WAITING, "approval-1") is not None, what="the decision")
        (ev,) = [e for e in filled.approval_events(tui.WAITING) if e.event == "approved"]
        assert (ev.request_key, ev.actor, ev.tool, ev.fingerprint) == ("approval-1", "tui", "exec", "fp-build")
        # What a waiting driver polls for is what it now finds.
        assert decision_for(filled, tui.WAITING, "approval-1") == "approved"
        await tui.until(pilot, lambda: rows(app) == [], what="the approval gone from the list")
        await tui.see(pilot, "#explain", "No call is waiting")
        # Nobody drives that run (its process is gone): the TUI says how to go on.
        await tui.until(pilot, lambda: any("press R to resume" in n for n in notes(app)), what="the resume hint")
        await pilot.press("R")
        await tui.until(pilot, lambda: resumed == [tui.WAITING] and not app.driven, what="the resume")


async def test_deny_from_the_live_run(filled, tui):
    app = AssayApp(poll_s=0.1, clock=lambda: tui.NOW)
    async with app.run_test(size=SIZE) as pilot:
        await tui.until(pilot, lambda: len(rows(app)) == 4, what="runs")
        await pilot.press("down", "enter")
        assert isinstance(app.screen, LiveScreen) and app.screen.run_id == tui.WAITING
        await tui.until(
            pilot,
            lambda: "waiting for approval approval-1" in tui.text(app, "#activity-label"),
            what="the waiting line",
        )
        await pilot.press("a")
        await tui.until(pilot, lambda: rows(app) == [f"{tui.WAITING}/approval-1"], what="the approval")
        await pilot.press("n")
        await tui.until(pilot, lambda: decision_for(filled, tui.WAITING, "approval-1") == "denied", what="the denial")
        await pilot.press("escape")
        # Back on the live run, the denial is a line of its own, by whom it was made.
        await tui.until(pilot, lambda: "approval:approval-1:denied" in rows(app), what="the denial on the timeline")
        table = app.screen.query_one(DataTable)
        assert "by tui" in str(table.get_cell("approval:approval-1:denied", "summary"))


async def test_verdict_shows_result_speedups_signature_and_chain(filled, tui):
    app = AssayApp(poll_s=0.1, clock=lambda: tui.NOW)
    async with app.run_test(size=SIZE) as pilot:
        await tui.until(pilot, lambda: len(rows(app)) == 4, what="runs")
        await pilot.press("ctrl+end", "v")
        assert isinstance(app.screen, VerdictScreen) and app.screen.run_id == tui.PASSED
        await tui.until(pilot, lambda: "in an intact chain" in tui.text(app, "#verdict-trust"), what="the chain check")
        await tui.see(pilot, "#verdict-result", "PASS")
        await tui.see(pilot, "#verdict-chart", "1.84x", "1.21x")
        await tui.see(pilot, "#verdict-trust", "valid (verifier key", "c" * 64, "5" * 64)


async def test_tampered_verdict_is_called_out(filled, tui):
    # Someone with write access to the database drops the guard and flips a failure to a pass.
    with filled.engine.begin() as conn:
        conn.exec_driver_sql("DROP TRIGGER verdicts_no_update")
        conn.exec_driver_sql(
            "UPDATE verdicts SET payload = json_set(payload, '$.passed', json('true')) WHERE run_id = ?", (tui.FAILED,)
        )
    app = AssayApp(poll_s=0.1, clock=lambda: tui.NOW)
    async with app.run_test(size=SIZE) as pilot:
        await tui.until(pilot, lambda: len(rows(app)) == 4, what="runs")
        await pilot.press("down", "down", "v")
        await tui.see(pilot, "#verdict-trust", "TAMPERED", "INVALID", "the chain breaks here")


async def test_a_bad_job_file_is_a_notification_not_a_crash(ledger, tui):
    app = AssayApp(poll_s=0.1)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("n")
        field = app.screen.query_one("#job-path", Input)
        field.value = "no/such/job.toml"
        await pilot.press("enter")
        await tui.until(
            pilot, lambda: any("job file 'no/such/job.toml' not found" in n for n in notes(app)), what="the error"
        )
        assert app.is_running and not app.driven


@pytest.mark.parametrize("outcome", ["passed", "boom"])
async def test_starting_a_run_opens_it_live(ledger, tui, outcome):
    release = threading.Event()
    started: list[str] = []

    def start(job, *, wait, on_event, ledger):
        # Stands in for agents.runner.start_run: same signature, same ledger writes and events.
        run = ledger.create_run(job=str(job.source), kind=job.kind, brain=job.brain, budget=job.budget.model_dump())
        started.append(run.id)
        on_event("run", {"run_id": run.id})
        ledger.record_step(run.id, key="step-1", name="agent", payload={"tool_calls": [], "final": None})
        release.wait(10)
        if outcome == "boom":
            raise RuntimeError("the brain fell over")
        ledger.set_run_status(run.id, RunStatus.passed)
        return RunOutcome(run.id, "passed")

    app = AssayApp(poll_s=0.1, start=start, job_hint="examples/kernel/softmax.toml")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("n", "enter")
        await tui.until(pilot, lambda: isinstance(app.screen, LiveScreen), what="the live run")
        assert app.screen.run_id == started[0] and app.driven == {started[0]}
        assert app.screen.query_one(DataTable) is not None
        await tui.until(pilot, lambda: rows(app) == ["step:step-1"], what="its first step")
        # Quitting while a run is driven here asks first.
        await pilot.press("q")
        assert app.is_running and any("press q again" in n for n in notes(app))
        release.set()
        want = "ended: passed" if outcome == "passed" else "RuntimeError: the brain fell over"
        await tui.until(pilot, lambda: any(want in n for n in notes(app)), what=want)
        assert app.driven == set()


async def test_an_unusable_ledger_is_reported_once(tui, monkeypatch, tmp_path):
    from assay.settings import settings

    monkeypatch.setenv("ASSAY_LEDGER_URL", f"sqlite:///{tmp_path}/missing/dir/ledger.db")
    settings.cache_clear()
    app = AssayApp(poll_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await tui.until(pilot, lambda: notes(app), what="the error")
        await pilot.pause(0.5)  # many more polls
        (note,) = notes(app)
        assert "ledger directory" in note and "does not exist" in note
        assert app.is_running
