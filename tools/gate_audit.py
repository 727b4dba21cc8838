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
from collections.abc import Callable
from typing import Any

from assay.tools.seam import Handler, ToolCall, ToolOutcome

log = logging.getLogger(__name__)

# Calls inside the audit and not yet recorded. A tool runs in a thread that cannot be abandoned,
# so a server stopped by SIGTERM while one runs never reaches the except below; the server's
# signal handler records these instead (record_in_flight).
_in_flight: dict[int, tuple[Audit, ToolCall]] = {}


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
        _in_flight[id(call)] = (self, call)
        try:
            outcome = await self.inner(call)
        except BaseException as exc:
            if _in_flight.pop(id(call), None) is not None:  # else recorded when the server stopped
                try:
                    self._record(call, _interrupted(call, type(exc).__name__))
                except Exception:  # the interruption is what the caller must see
                    log.exception("could not record interrupted call %s", call.key)
            raise
        if _in_flight.pop(id(call), None) is not None:
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


def record_in_flight(why: str) -> int:
    """Record every call still inside the audit as interrupted by `why` (the server is being
    stopped); returns how many. Each is recorded once: the audit skips a call recorded here."""
    n = 0
    for key, (audit, call) in list(_in_flight.items()):
        if _in_flight.pop(key, None) is None:
            continue
        try:
            audit._record(call, _interrupted(call, why))
            n += 1
        except Exception:
            log.exception("could not record interrupted call %s", call.key)
    return n


def _interrupted(call: ToolCall, why: str) -> ToolOutcome:
    decided = call.decision
    ran = decided is not None and decided.effect == "allow"
    text = f"{call.name} was interrupted ({why}) before its result was delivered" + (
        "; the tool may have run" if ran else ""
    )
    outcome = ToolOutcome(text=text, is_error=True, meta={"interrupted": True})
    if decided is not None:
        outcome.decision, outcome.rule = decided.effect, decided.rule
    return outcome
