"""Gateway wrapper 1: the capability check (invariant 3), then placeholder restoration.

Every call is decided against the signed manifest before it runs; the decision and the rule
that made it are recorded; a denial is a tool error the model can read and act on. A call
that needs approval runs only once a human has approved exactly this tool with exactly
these arguments. Placeholders are restored only for tools whose capability allows it (and a
session refuses that capability for a tool that hands its arguments to a sandbox); every other
call's arguments pass the redactor on their way in, so a raw secret a client sends (one its
user typed, say) reaches no workspace either.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any, Protocol

from assay.policies.capabilities import Decision
from assay.tools.seam import Handler, ToolCall, ToolOutcome, error

log = logging.getLogger(__name__)


class Approvals(Protocol):
    def status(self, call: ToolCall) -> str | None:
        """'approved', 'denied', 'pending' or None for this call's fingerprint."""

    def request(self, call: ToolCall, reason: str) -> str: ...

    def consume(self, call: ToolCall) -> None: ...


class PolicyCheck:
    def __init__(
        self,
        inner: Handler,
        decide: Callable[[ToolCall], Decision],
        record: Callable[[ToolCall, Decision], None],
        approvals: Approvals,
        restore: Callable[[Any], tuple[Any, int]],
        inbound: Callable[[Any], Any] = lambda args: args,
    ):
        self.inner, self.decide, self.record, self.approvals, self.restore = inner, decide, record, approvals, restore
        self.inbound = inbound

    async def __call__(self, call: ToolCall) -> ToolOutcome:
        try:
            decision = self.decide(call)
        except Exception as exc:  # fail closed, and on the record, like any other denial
            log.exception("capability check failed for %s", call.name)
            decision = Decision(
                "deny",
                f"{call.name}#check-failed",
                f"denied: the capability check could not judge these arguments ({type(exc).__name__}); "
                "simplify them (shorter paths, fewer nested values) and try again",
                call.name,
            )
        if decision.effect == "approve":
            status = self.approvals.status(call)
            if status == "approved":
                self.approvals.consume(call)
                decision = dataclasses.replace(
                    decision, effect="allow", reason=f"approved by a human ({decision.reason})"
                )
            elif status == "denied":
                decision = dataclasses.replace(
                    decision, effect="deny", reason=f"a human denied this call ({decision.reason})"
                )
        self.record(call, decision)
        # On the call the outer wrappers hold (restoration below passes a copy inward): the audit
        # reads it when the call is interrupted after this point, also from a signal handler
        # outside the call's task, so the ledger shows the decision that let the call run.
        call.decision = decision
        if decision.effect == "deny":
            return _stamp(error(decision.reason, denied=True, rule=decision.rule), decision)
        if decision.effect == "approve":
            approval = self.approvals.request(call, decision.reason)
            text = (
                f"needs human approval ({decision.reason}); approval {approval} is pending: "
                "the run pauses until a human approves or denies it"
            )
            return _stamp(error(text, approval_required=True, approval_id=approval, rule=decision.rule), decision)
        if decision.limits is not None:
            call.grants = {"max_timeout_s": decision.limits.timeout_s, "max_output_bytes": decision.limits.output_bytes}
        if decision.restore_placeholders:
            args, n = self.restore(call.arguments)
            if n:
                call = dataclasses.replace(call, arguments=args)
        else:
            args = self.inbound(call.arguments)
            if args != call.arguments:
                call = dataclasses.replace(call, arguments=args)
        return _stamp(await self.inner(call), decision)


def _stamp(outcome: ToolOutcome, decision: Decision) -> ToolOutcome:
    outcome.decision = decision.effect
    outcome.rule = decision.rule
    return outcome
