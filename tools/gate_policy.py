"""Gateway wrapper 1: the capability check (invariant 3), then placeholder restoration.

Every call is decided against the signed manifest before it runs; the decision and the rule
that made it are recorded; a denial is a tool error the model can read and act on. A call
that needs approval runs only once a human has approved exactly this tool and these
arguments. Placeholders are restored only for tools whose capability allows it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from assay.tools.seam import Handler, ToolCall, ToolOutcome, error


@dataclass
class Verdict:
    """The policy layer's answer for one call (kept apart from the manifest's own types)."""

    effect: str  # allow | deny | approve
    rule: str
    reason: str
    grants: dict[str, Any] = field(default_factory=dict)
    may_restore: bool = False


class Approvals(Protocol):
    def status(self, call: ToolCall) -> str | None:
        """'approved', 'denied', 'pending' or None for this call's fingerprint."""

    def request(self, call: ToolCall, reason: str) -> str: ...

    def consume(self, call: ToolCall) -> None: ...


class PolicyCheck:
    def __init__(
        self,
        inner: Handler,
        decide: Callable[[ToolCall], Verdict],
        record: Callable[[ToolCall, Verdict], None],
        approvals: Approvals,
        restore: Callable[[Any], tuple[Any, int]],
    ):
        self.inner, self.decide, self.record, self.approvals, self.restore = inner, decide, record, approvals, restore

    async def __call__(self, call: ToolCall) -> ToolOutcome:
        verdict = self.decide(call)
        if verdict.effect == "approve":
            status = self.approvals.status(call)
            if status == "approved":
                self.approvals.consume(call)
                verdict = Verdict("allow", verdict.rule, f"approved by a human: {verdict.reason}", verdict.grants, verdict.may_restore)
            elif status == "denied":
                verdict = Verdict("deny", verdict.rule, f"a human denied this call ({verdict.reason})")
        self.record(call, verdict)
        if verdict.effect == "deny":
            return _stamp(error(f"denied by {verdict.rule}: {verdict.reason}", denied=True, rule=verdict.rule), verdict)
        if verdict.effect == "approve":
            approval_id = self.approvals.request(call, verdict.reason)
            return _stamp(
                error(
                    f"needs human approval ({verdict.reason}); the run pauses until a human approves "
                    f"or denies approval {approval_id}",
                    approval_required=True,
                    approval_id=approval_id,
                    rule=verdict.rule,
                ),
                verdict,
            )
        call.grants = dict(verdict.grants)
        restored_call = call
        if verdict.may_restore:
            args, n = self.restore(call.arguments)
            if n:
                restored_call = ToolCall(call.name, args, call.key, call.started_ns, call.grants)
        return _stamp(await self.inner(restored_call), verdict)


def _stamp(outcome: ToolOutcome, verdict: Verdict) -> ToolOutcome:
    outcome.decision = verdict.effect  # type: ignore[assignment]
    outcome.rule = verdict.rule
    return outcome
