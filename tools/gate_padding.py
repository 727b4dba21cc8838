"""Gateway wrapper 3: trace padding's timing half (invariant 5).

A result is held back until the tool's fixed ceiling (or the next time quantum) after the
call arrived, so how long a tool took stops telling an observer about private data. The
size half is applied where the message is serialized (`Session.pad`).
"""

from __future__ import annotations

import time

import anyio

from assay.policies.padding import PaddingPolicy
from assay.tools.seam import Handler, ToolCall, ToolOutcome


class Padding:
    def __init__(self, inner: Handler, policy: PaddingPolicy, clock=time.monotonic_ns):
        self.inner, self.policy, self.clock = inner, policy, clock

    async def __call__(self, call: ToolCall) -> ToolOutcome:
        # The audit stamps the arrival time; without it (padding used on its own) the clock
        # starts here, not at 0, which would make every call look like a ceiling overrun.
        started = call.started_ns or self.clock()
        outcome = await self.inner(call)
        if not self.policy.enabled:
            return outcome
        elapsed = (self.clock() - started) / 1e9
        release, overran = self.policy.release_after(call.name, elapsed)
        if overran:  # how far past its ceiling the tool ran: the part padding could not hide
            outcome.meta["padding_overrun_s"] = round(elapsed - (self.policy.ceiling_for(call.name) or 0.0), 4)
        await anyio.sleep(max(0.0, release - (self.clock() - started) / 1e9))
        return outcome
