"""PolicyCheck on its own: a stand-in tool (an async function) behind it, stand-in decisions.

What must hold: nothing runs before it is decided and recorded; a denial or a pending
approval never reaches the tool and comes back as a tool error the model can read; a
human's approval admits exactly one run; grants and restoration reach the tool only as the
decision says; the audit can learn the decision of a call that was interrupted.
"""

from __future__ import annotations

import anyio
import pytest

from assay.policies.capabilities import CapabilityPolicy, Decision, EffectiveLimits
from assay.policies.manifest import parse_manifest
from assay.tools.gate_policy import PolicyCheck
from assay.tools.seam import ToolCall, ToolOutcome

pytestmark = pytest.mark.anyio

LIMITS = EffectiveLimits(timeout_ms=7000, output_bytes=1234)


class FakeApprovals:
    def __init__(self, status=None):
        self._status = status
        self.requested: list[tuple[str, str]] = []
        self.consumed: list[str] = []

    def status(self, call):
        return self._status

    def request(self, call, reason):
        self.requested.append((call.fingerprint(), reason))
        return "approval-7"

    def consume(self, call):
        self.consumed.append(call.fingerprint())
        self._status = None


class Stage:
    """The stand-in tool and everything the wrapper touched, in order."""

    def __init__(self, decision: Decision, approvals=None, restore=None):
        self.events: list[tuple] = []
        self.approvals = approvals or FakeApprovals()
        self.restore_calls = 0

        async def tool(call: ToolCall) -> ToolOutcome:
            self.events.append(("tool", call.name, call.arguments, dict(call.grants)))
            return ToolOutcome(text="tool ran", structured={"ok": True})

        def record(call, d):
            self.events.append(("record", call.key, d.effect, d.rule))

        def restore_fn(args):
            self.restore_calls += 1
            return (restore or (lambda a: (a, 0)))(args)

        self.gate = PolicyCheck(
            tool, decide=lambda c: decision, record=record, approvals=self.approvals, restore=restore_fn
        )

    @property
    def ran(self) -> bool:
        return any(e[0] == "tool" for e in self.events)


def call(name="write_file", **arguments) -> ToolCall:
    return ToolCall(name=name, arguments=arguments or {"path": "a.txt"}, key="k1")


async def test_allowed_call_is_recorded_before_it_runs_and_stamped():
    stage = Stage(Decision("allow", "write_file#default", "ok", "write_file", LIMITS))
    out = await stage.gate(call())
    assert [e[0] for e in stage.events] == ["record", "tool"]
    assert stage.events[0] == ("record", "k1", "allow", "write_file#default")
    assert (out.text, out.is_error, out.decision, out.rule) == ("tool ran", False, "allow", "write_file#default")


async def test_limits_of_the_decision_become_the_calls_grants():
    stage = Stage(Decision("allow", "exec#1", "ok", "exec", LIMITS))
    await stage.gate(call("exec", command=["python"]))
    assert stage.events[-1][3] == {"max_timeout_s": 7.0, "max_output_bytes": 1234}


async def test_denied_call_never_reaches_the_tool_and_reads_as_a_tool_error():
    reason = "denied by exec#executables: executable 'curl' is not in [python]"
    stage = Stage(Decision("deny", "exec#executables", reason, "exec"))
    out = await stage.gate(call("exec", command=["curl", "http://x"]))
    assert not stage.ran
    assert stage.events == [("record", "k1", "deny", "exec#executables")]
    assert out.is_error and out.text == reason
    assert out.structured == {"error": reason, "denied": True, "rule": "exec#executables"}
    assert (out.decision, out.rule) == ("deny", "exec#executables")


async def test_approval_needed_asks_once_and_does_not_run():
    stage = Stage(Decision("approve", "exec#2", "a build over 30 s", "exec", LIMITS))
    out = await stage.gate(call("exec", command=["make"], timeout_s=50))
    assert not stage.ran
    assert len(stage.approvals.requested) == 1
    assert out.is_error and out.structured["approval_required"] is True
    assert out.structured["approval_id"] == "approval-7" and "approval-7" in out.text
    assert out.decision == "approve"


async def test_human_approval_admits_exactly_one_run():
    approvals = FakeApprovals(status="approved")
    stage = Stage(Decision("approve", "exec#2", "long build", "exec", LIMITS), approvals)
    c = call("exec", command=["make"], timeout_s=50)
    out = await stage.gate(c)
    assert stage.ran and not out.is_error
    assert approvals.consumed == [c.fingerprint()]
    assert stage.events[0][2] == "allow"  # recorded as the allow the human turned it into
    # The approval is used up: the same call again asks again instead of running.
    again = await stage.gate(call("exec", command=["make"], timeout_s=50))
    assert again.structured["approval_required"] is True
    assert sum(1 for e in stage.events if e[0] == "tool") == 1


async def test_human_denial_is_a_denial():
    stage = Stage(Decision("approve", "exec#2", "long build", "exec", LIMITS), FakeApprovals(status="denied"))
    out = await stage.gate(call("exec", command=["make"], timeout_s=50))
    assert not stage.ran and out.is_error and out.decision == "deny"
    assert "a human denied" in out.text


async def test_pending_approval_does_not_run():
    stage = Stage(Decision("approve", "exec#2", "long build", "exec", LIMITS), FakeApprovals(status="pending"))
    out = await stage.gate(call("exec", command=["make"], timeout_s=50))
    assert not stage.ran and out.structured["approval_required"] is True


async def test_restoration_only_where_the_capability_allows_it():
    def restore(args):
        return {k: v.replace("[[SECRET:x:1]]", "hunter2-real") for k, v in args.items()}, 1

    c = call("write_file", path="a.txt", content="key=[[SECRET:x:1]]")
    forbid = Stage(
        Decision("allow", "write_file#default", "ok", "write_file", LIMITS, restore_placeholders=False), restore=restore
    )
    await forbid.gate(c)
    assert forbid.restore_calls == 0
    assert forbid.events[-1][2]["content"] == "key=[[SECRET:x:1]]"

    allow = Stage(
        Decision("allow", "write_file#default", "ok", "write_file", LIMITS, restore_placeholders=True), restore=restore
    )
    c2 = call("write_file", path="a.txt", content="key=[[SECRET:x:1]]")
    await allow.gate(c2)
    assert allow.events[-1][2]["content"] == "key=hunter2-real"
    # What the audit will record is the call as the client sent it.
    assert c2.arguments["content"] == "key=[[SECRET:x:1]]"


async def test_a_denied_call_is_never_restored():
    stage = Stage(Decision("deny", "write_file#paths", "no", "write_file", restore_placeholders=True))
    await stage.gate(call())
    assert stage.restore_calls == 0


async def test_the_decision_is_on_the_call_an_outer_wrapper_holds():
    # Restoration hands the tool a copy of the call; the audit outside holds the original.
    def restore(args):
        return {k: v.replace("[[SECRET:x:1]]", "hunter2-real") for k, v in args.items()}, 1

    stage = Stage(
        Decision("allow", "write_file#default", "ok", "write_file", LIMITS, restore_placeholders=True), restore=restore
    )
    c = call("write_file", path="a.txt", content="key=[[SECRET:x:1]]")
    assert c.decision is None
    await stage.gate(c)
    assert stage.events[-1][2]["content"] == "key=hunter2-real"  # the tool got the copy
    assert c.decision.rule == "write_file#default"


async def test_an_exception_in_the_tool_propagates_after_the_decision_is_recorded():
    recorded = []

    async def broken(c):
        raise RuntimeError("boom")

    gate = PolicyCheck(
        broken,
        decide=lambda c: Decision("allow", "t#default", "ok", "t", LIMITS),
        record=lambda c, d: recorded.append(d.effect),
        approvals=FakeApprovals(),
        restore=lambda a: (a, 0),
    )
    with pytest.raises(RuntimeError):
        await gate(call("t"))
    assert recorded == ["allow"]


async def test_with_a_real_capability_policy_rule_ids_flow_through():
    manifest = parse_manifest(
        b"""
format = 1
role = "unit"
[tools.write_file]
default = "allow"
paths = ["**"]
rate = { per_run = 1 }
[[tools.write_file.rules]]
effect = "deny"
path = ["task.py"]
""",
        "unit.toml",
    )
    policy = CapabilityPolicy(manifest)
    decided = []

    async def tool(c):
        return ToolOutcome(text="ran")

    gate = PolicyCheck(
        tool,
        decide=lambda c: policy.decide(c.name, c.arguments),
        record=lambda c, d: decided.append(d.rule),
        approvals=FakeApprovals(),
        restore=lambda a: (a, 0),
    )
    outs = [
        await gate(call("write_file", path="task.py", content="x")),
        await gate(call("write_file", path="./sub/../task.py", content="x")),
        await gate(call("write_file", path="ok.py", content="x")),
        await gate(call("write_file", path="ok2.py", content="x")),
        await gate(call("read_file", path="ok.py")),
    ]
    assert decided == [
        "write_file#1",
        "write_file#path",
        "write_file#default",
        "write_file#rate.per_run",
        "manifest#unlisted",
    ]
    assert [o.is_error for o in outs] == [True, True, False, True, True]


async def test_concurrent_calls_each_see_their_own_decision():
    decisions = {"a": Decision("allow", "a#default", "ok", "a", LIMITS), "b": Decision("deny", "b#default", "no", "b")}
    seen = {}

    async def tool(c):
        await anyio.sleep(0.05)
        return ToolOutcome(text="ran")

    gate = PolicyCheck(
        tool,
        decide=lambda c: decisions[c.name],
        record=lambda c, d: None,
        approvals=FakeApprovals(),
        restore=lambda a: (a, 0),
    )

    async def one(name):
        c = ToolCall(name=name, arguments={}, key=name)
        await gate(c)
        seen[name] = c.decision.rule

    async with anyio.create_task_group() as tg:
        tg.start_soon(one, "a")
        tg.start_soon(one, "b")
    assert seen == {"a": "a#default", "b": "b#default"}


async def test_a_capability_check_that_crashes_fails_closed_and_on_the_record():
    recorded = []
    ran = []

    def decide(c):
        raise RecursionError("maximum recursion depth exceeded")

    async def tool(c):
        ran.append(c)
        return ToolOutcome(text="ran")

    gate = PolicyCheck(
        tool,
        decide=decide,
        record=lambda c, d: recorded.append((d.effect, d.rule)),
        approvals=FakeApprovals(),
        restore=lambda a: (a, 0),
    )
    out = await gate(call("write_file", path="d/" * 2000))
    assert not ran and out.is_error and out.decision == "deny"
    assert recorded == [("deny", "write_file#check-failed")]
    assert "could not judge" in out.text and "RecursionError" in out.text
