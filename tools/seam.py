"""The one tool-call seam. Every gateway wrapper takes a `Handler` and is a `Handler`.

Like httpx's BaseTransport: a single small interface, so each wrapper (policy check,
redaction, padding, audit) can be built, tested and reordered on its own.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

Effect = Literal["allow", "deny", "approve"]


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any]
    # Ledger idempotency key: deterministic per run so a resumed run does not duplicate rows.
    key: str
    started_ns: int = 0
    # Set by the policy check: limits the capability grants this call (e.g. max_timeout_s).
    grants: dict[str, Any] = field(default_factory=dict[str, Any])
    # Set by the policy check: its decision, for the audit of a call cut off where the check's
    # context is out of reach (a server stopped by a signal while the tool runs).
    decision: Any = None

    def fingerprint(self) -> str:
        """Tool + canonical arguments: what a human approves is exactly what runs."""
        return fingerprint(self.name, self.arguments)


def fingerprint(name: str, arguments: dict[str, Any]) -> str:
    blob = json.dumps([name, arguments], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass
class ToolOutcome:
    """What a tool call produced, as it travels back out through the wrappers."""

    text: str
    structured: dict[str, Any] | None = None
    is_error: bool = False
    # Filled by wrappers on the way out; never shown to the model as content.
    # The decision that let it run: a policy effect, or a replayed call's as the ledger holds it.
    decision: str | None = None
    rule: str | None = None
    meta: dict[str, Any] = field(default_factory=dict[str, Any])
    tool_ns: int = 0


Handler = Callable[[ToolCall], Awaitable[ToolOutcome]]


def error(text: str, **structured: Any) -> ToolOutcome:
    return ToolOutcome(text=text, structured={"error": text, **structured} if structured else None, is_error=True)
