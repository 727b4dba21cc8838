"""Gateway wrapper 4: audit (invariant 6). Every call, allowed or not, goes to the ledger.

Arguments are recorded as the client sent them (placeholders, never restored secrets), the
result as a digest plus its redacted text, so a resumed run can be replayed from the
ledger instead of running a tool twice.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Callable

from assay.tools.seam import Handler, ToolCall, ToolOutcome


class Audit:
    def __init__(
        self,
        inner: Handler,
        record: Callable[[ToolCall, ToolOutcome, dict[str, Any]], None],
        replay: Callable[[ToolCall], ToolOutcome | None],
        clock=time.monotonic_ns,
    ):
        self.inner, self.record, self.replay, self.clock = inner, record, replay, clock

    async def __call__(self, call: ToolCall) -> ToolOutcome:
        call.started_ns = call.started_ns or self.clock()
        previous = self.replay(call)
        if previous is not None:
            previous.meta["replayed"] = True
            return previous
        outcome = await self.inner(call)
        done = self.clock()
        self.record(
            call,
            outcome,
            {
                "result_sha256": hashlib.sha256(outcome.text.encode()).hexdigest(),
                "result_bytes": len(outcome.text.encode()),
                "duration_ms": round((done - call.started_ns) / 1e6, 3),
            },
        )
        return outcome
