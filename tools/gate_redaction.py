"""Gateway wrapper 2: redaction (invariant 2). Nothing leaves the gateway unredacted.

Tool results, structured output and error messages alike pass through the run's redactor,
so a secret reaches neither the model nor the MCP client, even when a tool failed.
"""

from __future__ import annotations

from typing import Any, Callable

from assay.tools.seam import Handler, ToolCall, ToolOutcome


class Redaction:
    def __init__(self, inner: Handler, redact_text: Callable[[str], str], redact_json: Callable[[Any], Any]):
        self.inner, self.redact_text, self.redact_json = inner, redact_text, redact_json

    async def __call__(self, call: ToolCall) -> ToolOutcome:
        try:
            outcome = await self.inner(call)
        except Exception as exc:  # the message of an unexpected failure may carry a secret too
            outcome = ToolOutcome(text=f"{call.name} failed: {type(exc).__name__}: {exc}", is_error=True)
        outcome.text = self.redact_text(outcome.text)
        if outcome.structured is not None:
            outcome.structured = self.redact_json(outcome.structured)
        return outcome
