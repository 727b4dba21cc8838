"""Audit on its own: every call that crosses it is recorded exactly once, whatever happens.

The stand-in tool is an async function; `record` and `replay` are a dict standing in for
the ledger. The real gateway stack (policy -> ... -> audit) is assembled in the last tests
to show that a call interrupted after its decision keeps that decision in the record.
"""

from __future__ import annotations

import hashlib

import anyio
import pytest

from assay.policies.capabilities import Decision, EffectiveLimits
from assay.policies.padding import PaddingPolicy
from assay.tools.gate_audit import Audit
from assay.tools.gate_padding import Padding
from assay.tools.gate_policy import PolicyCheck
from assay.tools.seam import ToolCall, ToolOutcome

pytestmark = pytest.mark.anyio


class FakeLedger:
    def __init__(self):
        self.rows: dict[str, tuple[ToolCall, ToolOutcome, dict]] = {}
        self.writes = 0

    def record(self, call, outcome, timing):
        self.writes += 1
        self.rows.setdefault(call.key, (call, outcome, timing))

    def replay(self, call):
        row = self.rows.get(call.key)
        if row is None:
            return None
        return ToolOutcome(
            text=row[1].text, structured=row[1].structured, is_error=row[1].is_error, decision=row[1].decision
        )


def audit(inner, led: FakeLedger) -> Audit:
    return Audit(inner, record=led.record, replay=led.replay)


async def ok_tool(call):
    return ToolOutcome(text="result text", structured={"v": 1}, decision="allow", rule="t#default")


async def test_a_call_is_recorded_once_with_digest_size_and_duration():
    led = FakeLedger()
    out = await audit(ok_tool, led)(ToolCall(name="t", arguments={"a": 1}, key="k1"))
    assert out.text == "result text"
    call, outcome, timing = led.rows["k1"]
    assert timing["result_sha256"] == hashlib.sha256(b"result text").hexdigest()
    assert timing["result_bytes"] == len("result text")
    assert timing["duration_ms"] >= 0
    assert outcome.decision == "allow" and led.writes == 1


async def test_the_arrival_time_is_stamped_once():
    led = FakeLedger()
    c = ToolCall(name="t", arguments={}, key="k")
    await audit(ok_tool, led)(c)
    assert c.started_ns > 0
    stamped = ToolCall(name="t", arguments={}, key="k2", started_ns=123)
    await audit(ok_tool, led)(stamped)
    assert stamped.started_ns == 123


async def test_a_replayed_key_returns_the_record_and_runs_nothing():
    led = FakeLedger()
    runs = []

    async def tool(call):
        runs.append(call.key)
        return ToolOutcome(text="first", decision="allow")

    gate = audit(tool, led)
    await gate(ToolCall(name="t", arguments={}, key="k"))
    again = await gate(ToolCall(name="t", arguments={}, key="k"))
    assert runs == ["k"] and again.text == "first" and again.meta["replayed"] is True
    assert led.writes == 1


async def test_denied_calls_are_recorded_too():
    led = FakeLedger()

    async def denied(call):
        return ToolOutcome(text="denied by x", is_error=True, decision="deny", rule="manifest#unlisted")

    await audit(denied, led)(ToolCall(name="nope", arguments={}, key="k"))
    assert led.rows["k"][1].decision == "deny" and led.rows["k"][1].rule == "manifest#unlisted"


async def test_an_exception_inside_is_recorded_then_raised():
    led = FakeLedger()

    async def broken(call):
        raise RuntimeError("redactor exploded")

    with pytest.raises(RuntimeError):
        await audit(broken, led)(ToolCall(name="t", arguments={}, key="k"))
    assert led.rows["k"][1].is_error and "interrupted" in led.rows["k"][1].text


async def test_a_call_cancelled_while_the_tool_runs_is_still_recorded():
    led = FakeLedger()
    started = anyio.Event()
    finished = []

    async def slow(call):
        started.set()
        await anyio.sleep(5)
        finished.append(call.key)
        return ToolOutcome(text="never")

    async with anyio.create_task_group() as tg:
        tg.start_soon(audit(slow, led), ToolCall(name="t", arguments={}, key="k"))
        await started.wait()
        tg.cancel_scope.cancel()
    assert "k" in led.rows and led.rows["k"][1].is_error
    assert finished == []


def stack(led: FakeLedger, decision: Decision, tool, padding: PaddingPolicy | None = None):
    """policy -> tool, inside padding, inside audit: the order the session builds."""
    policy = PolicyCheck(
        tool, decide=lambda c: decision, record=lambda c, d: None, approvals=None, restore=lambda a: (a, 0)
    )
    return Audit(Padding(policy, padding or PaddingPolicy()), record=led.record, replay=led.replay)


async def test_a_call_cancelled_in_the_padding_hold_after_it_ran_keeps_its_decision():
    # The tool has run (a file was written); the client gives up while padding holds the
    # result. The ledger must still show the call, allowed by the rule that allowed it.
    led = FakeLedger()
    side_effects = []

    async def tool(call):
        side_effects.append("written")
        return ToolOutcome(text="done")

    gate = stack(
        led,
        Decision("allow", "write_file#default", "ok", "write_file", EffectiveLimits(1000, 10)),
        tool,
        PaddingPolicy(enabled=True, default_ceiling_s=5.0),
    )
    with anyio.move_on_after(0.2):
        await gate(ToolCall(name="write_file", arguments={"path": "a"}, key="k"))
    assert side_effects == ["written"]
    outcome = led.rows["k"][1]
    assert (outcome.decision, outcome.rule, outcome.is_error) == ("allow", "write_file#default", True)
    assert "may have run" in outcome.text


async def test_a_call_cancelled_before_any_decision_says_so():
    led = FakeLedger()
    gate = Audit(lambda c: anyio.sleep(5), record=led.record, replay=led.replay)
    with anyio.move_on_after(0.1):
        await gate(ToolCall(name="t", arguments={}, key="k"))
    outcome = led.rows["k"][1]
    assert outcome.decision is None and "may have run" not in outcome.text


async def test_a_failing_ledger_does_not_mask_the_cancellation():
    def record(call, outcome, timing):
        raise OSError("disk full")

    gate = Audit(lambda c: anyio.sleep(5), record=record, replay=lambda c: None)
    with anyio.move_on_after(0.1) as scope:
        await gate(ToolCall(name="t", arguments={}, key="k"))
    assert scope.cancelled_caught


async def test_a_server_stopping_records_the_calls_still_running_once():
    # A tool's thread cannot be abandoned, so a server stopped by SIGTERM never reaches the
    # audit's own except: its signal handler records what is still inside, from another task,
    # with the decision the policy put on the call.
    from assay.tools.gate_audit import record_in_flight

    led = FakeLedger()
    release = anyio.Event()

    async def tool(call):
        await release.wait()
        return ToolOutcome(text="finished after the stop")

    gate = stack(led, Decision("allow", "exec#default", "ok", "exec", EffectiveLimits(1000, 10)), tool)
    async with anyio.create_task_group() as tg:
        tg.start_soon(gate, ToolCall(name="exec", arguments={}, key="k"))
        await anyio.sleep(0.05)
        assert record_in_flight("the server was stopped by SIGTERM") == 1
        outcome = led.rows["k"][1]
        assert (outcome.decision, outcome.rule, outcome.is_error) == ("allow", "exec#default", True)
        assert "interrupted (the server was stopped by SIGTERM)" in outcome.text and "may have run" in outcome.text
        release.set()
    assert led.writes == 1  # the call that finished after the stop is not recorded a second time
    assert record_in_flight("again") == 0
