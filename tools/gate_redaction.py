"""Gateway wrapper 2: redaction (invariant 2). Nothing leaves the gateway unredacted.

Tool results, structured output and error messages alike pass through the run's redactor,
so a secret reaches neither the model nor the MCP client, even when a tool failed.

A result's text is often JSON (the registry serializes structured output that way), and
JSON escapes what a secret may contain: a quote becomes `\\"`, a backslash `\\\\`, a non-ASCII
letter `\\u00e4`. Scanning only the escaped text would miss such a secret, so JSON text is
redacted as the value it decodes to, and re-serialized when anything was hidden.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio

from assay.tools.seam import Handler, ToolCall, ToolOutcome

_NOT_JSON = object()


class Redaction:
    def __init__(self, inner: Handler, redact_text: Callable[[str], str], redact_json: Callable[[Any], Any]):
        self.inner, self.redact_text, self.redact_json = inner, redact_text, redact_json

    async def __call__(self, call: ToolCall) -> ToolOutcome:
        try:
            outcome = await self.inner(call)
        except Exception as exc:  # the message of an unexpected failure may carry a secret too
            outcome = ToolOutcome(text=f"{call.name} failed: {type(exc).__name__}: {exc}", is_error=True)
        # Off the event loop: redacting megabytes of hostile output must not stall the server's
        # other requests (pings, cancellations, other calls) while it runs.
        return await anyio.to_thread.run_sync(self._redact, outcome)

    def _redact(self, outcome: ToolOutcome) -> ToolOutcome:
        raw = outcome.structured
        if raw is not None:
            outcome.structured = self.redact_json(raw)
        outcome.text = self._text(outcome.text, raw, outcome.structured)
        return outcome

    def _text(self, text: str, raw_structured: Any, structured: Any) -> str:
        decoded = _json_view(text)
        if decoded is _NOT_JSON:
            return self.redact_text(text)
        # When the text is the structured result, it is redacted once (as `structured`).
        redacted = structured if raw_structured is not None and decoded == raw_structured else self.redact_json(decoded)
        if redacted == decoded:
            return self.redact_text(text)
        # The same layout the registry writes (one-space indent, ASCII escapes).
        return self.redact_text(json.dumps(redacted, indent=1))


def _json_view(text: str) -> Any:
    head = text.lstrip()[:1]
    if head not in ("{", "[", '"'):
        return _NOT_JSON
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _NOT_JSON
