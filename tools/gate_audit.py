"""Gateway wrapper 4: audit (invariant 6). Every call, allowed or not, goes to the ledger.

Arguments are recorded as the client sent them (placeholders, never restored secrets), the
result as a digest plus its redacted text, so a resumed run can be replayed from the
ledger instead of running a tool twice.

A call that is interrupted on its way out (the client cancels it while the tool runs or
while padding holds its result, or the server is stopped) is recorded too, as interrupted,
with the decision that let it run: a tool that ran must never be missing from the ledger
just because nobody waited for its answer.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Any, Callable

from assay.tools.gate_policy import current_decision
from assay.tools.seam import Handler, ToolCall, ToolOutcome

log = logging.getLogger(__name__)


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
        token = current_decision.set(None)
        try:
            outcome = await self.inner(call)
        except BaseException as exc:
            try:
                self._record(call, _interrupted(call, exc))
            except Exception:  # the interruption is what the caller must see
                log.exception("could not record interrupted call %s", call.key)
            raise
        finally:
            current_decision.reset(token)
        self._record(call, outcome)
        return outcome

    def _record(self, call: ToolCall, outcome: ToolOutcome) -> None:
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


def _interrupted(call: ToolCall, exc: BaseException) -> ToolOutcome:
    decided = current_decision.get()
    ran = decided is not None and decided.effect == "allow"
    text = (
        f"{call.name} was interrupted ({type(exc).__name__}) before its result was delivered"
        + ("; the tool may have run" if ran else "")
    )
    outcome = ToolOutcome(text=text, is_error=True, meta={"interrupted": True})
    if decided is not None:
        outcome.decision, outcome.rule = decided.effect, decided.rule
    return outcome
